# syntax=docker/dockerfile:1
#
# ingress-status-guard container image, built the way scripts/image.sh builds it without a
# registry: a static release binary (the gnu target linked with crt-static) in an image FROM
# scratch, running as UID/GID 65532, which the manifests and the chart also require.
#
#   docker build --build-arg REVISION=$(git rev-parse --short=12 HEAD) \
#     -t registry.example.com/ingress-status-guard:0.1.0 .
#
# The binary embeds its dependency list (cargo auditable's .dep-v0 section), as the released
# binaries do: `cargo audit bin` and SBOM scanners read it from the image. The image is built for
# the architecture of the build machine. It has no shell: debug with
# `kubectl debug --image=busybox --target=webhook`. No CA bundle either: in-cluster the API
# server's CA comes from the mounted service-account token.

ARG RUST_VERSION=1.89
ARG CARGO_AUDITABLE_VERSION=0.7.7

FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
ARG CARGO_AUDITABLE_VERSION
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    cargo install --locked "cargo-auditable@${CARGO_AUDITABLE_VERSION}"
# The revision for --version and the build_info metric (.git is not in the build context).
ARG REVISION=unknown
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    target="$(rustc -vV | awk '/^host:/ { print $2 }')" \
 && RUSTFLAGS="-C target-feature=+crt-static" ISG_GIT_REVISION="$REVISION" \
    cargo auditable build --release --locked --bin ingress-status-guard --target "$target" \
 && install -D -m 0755 "target/$target/release/ingress-status-guard" /out/ingress-status-guard \
 && ! readelf -d /out/ingress-status-guard | grep NEEDED \
 && readelf -S /out/ingress-status-guard | grep -q '\.dep-v0'

FROM scratch
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title=ingress-status-guard \
      org.opencontainers.image.source=https://github.com/ingress-status-guard/ingress-status-guard \
      org.opencontainers.image.version=$VERSION \
      org.opencontainers.image.revision=$REVISION \
      org.opencontainers.image.licenses=Apache-2.0
COPY --from=build /out/ingress-status-guard /usr/local/bin/ingress-status-guard
USER 65532:65532
# 8443: the webhook (HTTPS); 8080: /livez, /readyz, /metrics (plain HTTP).
EXPOSE 8443 8080
ENTRYPOINT ["/usr/local/bin/ingress-status-guard"]
CMD ["serve"]

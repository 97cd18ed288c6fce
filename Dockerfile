# syntax=docker/dockerfile:1
#
# ingress-status-guard container image: a static (musl) release binary on distroless/static,
# running as the distroless "nonroot" user (UID/GID 65532), which the manifests also require.
#
#   docker build -t registry.example.com/ingress-status-guard:0.1.0 .
#
# The image is built for the architecture of the build machine (use `docker buildx build
# --platform` with emulation for another one). It has no shell: debug with
# `kubectl debug --image=busybox --target=webhook`.

ARG RUST_VERSION=1.89

FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
# musl-gcc builds ring's C and assembly for the static target.
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/*
RUN rustup target add "$(uname -m)-unknown-linux-musl"
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin ingress-status-guard --target "$(uname -m)-unknown-linux-musl" \
 && install -D -m 0755 "target/$(uname -m)-unknown-linux-musl/release/ingress-status-guard" /out/ingress-status-guard

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ingress-status-guard /usr/local/bin/ingress-status-guard
USER 65532:65532
# 8443: the webhook (HTTPS); 8080: /livez, /readyz, /metrics (plain HTTP).
EXPOSE 8443 8080
ENTRYPOINT ["/usr/local/bin/ingress-status-guard"]
CMD ["serve"]

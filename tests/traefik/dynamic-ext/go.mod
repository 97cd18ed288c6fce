// A stand-in for Traefik's nested module github.com/traefik/traefik/dynamic/ext, which the Go
// module proxy does not serve (a module zip leaves nested modules out, and Traefik's own go.mod
// reaches it by a `replace` to its source tree, which a dependent's build ignores); see
// ../build.sh. Nothing here is shipped.
module github.com/traefik/traefik/dynamic/ext

go 1.26.0

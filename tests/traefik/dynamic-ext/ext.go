// Package ext stands in for Traefik's dynamic-configuration extension point: the two types that
// pkg/config/dynamic embeds (`ext.HTTP` in HTTPConfiguration, `ext.Router` in Router), empty, so
// they add no field. The Kubernetes ingress-nginx provider the tests run fills neither.
package ext

// HTTP is embedded in dynamic.HTTPConfiguration.
type HTTP struct{}

// Router is embedded in dynamic.Router.
type Router struct{}

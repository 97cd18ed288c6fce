//! ingress-status-guard: a mutating admission webhook that enforces canonical Ingress status addresses.

//go:build tools

// Package tools pins the release tools scripts/release-tools/build.sh builds: cosign (signs the
// image and attests its SBOM), crane (a loopback registry to sign against, and the push into it).
package tools

import (
	_ "github.com/google/go-containerregistry/cmd/crane"
	_ "github.com/sigstore/cosign/v2/cmd/cosign"
)

//go:build tools

// The programs hack/conformance builds that no package of this module
// imports: naming them here keeps their dependencies in go.mod and go.sum
// (go mod tidy reads files of every build tag; nothing builds this one).
package conformance

import (
	// kube-proxy, a cluster add-on of the full cluster (harness/build.go)
	_ "k8s.io/kubernetes/cmd/kube-proxy/app"
)

//go:build tools

// Package tools pins the upstream commands the labs build into the state
// folder (kube-apiserver, kube-controller-manager, etcd, kubectl), so that
// `go mod tidy` keeps them in go.mod and go.sum and they always build from
// this module's own dependency graph at the pinned versions.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)

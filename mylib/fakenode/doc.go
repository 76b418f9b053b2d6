// Package fakenode runs a whole node with the real kubelet (k8s.io/kubernetes
// v1.36.3) — unlike mycore/node (our Node object and join) and
// internal/labnode (our own kubelet's start-up) — as a "fake node": the kubelet's own start-up path (kubeletapp.Run: TLS
// bootstrap through a CSR, client certificate rotation, node registration,
// node status, the node lease, the pod workers, the kubelet server with
// authentication and authorization) with fakes only at the edges — our mock
// CRI (mylib/fakecri) on a unix socket, our fake cAdvisor
// (mylib/fakecadvisor), a stub container manager and fake mounts.
//
// This is what kubemark's hollow node does (pkg/kubemark/hollow_kubelet.go
// and cmd/kubemark/app/hollow_node.go, v1.36.3), rebuilt compactly so that
// on the mock CRI nothing writes outside the node's own folder (on a real
// runtime, hostPath volumes are on too: see volumePlugins); the kubelet
// server listens on the node's InternalIP only (where the apiserver
// reaches it for logs and exec; a real kubelet listens on all addresses)
// with TLS, authentication and webhook authorization, the mock CRI's
// streaming server stays on 127.0.0.1, and the node authenticates
// with its own system:node:NAME certificate obtained through the kubelet's
// real TLS bootstrap — the modern replacement for "patch the kubelet
// source".
//
// The kubelet's goroutines do not all stop when its context ends: a node
// lives as long as its process. Run one node per process (lab 01 does).
package fakenode

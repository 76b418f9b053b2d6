// Package server is our node's HTTPS server: the kubelet API that the
// apiserver calls when you run kubectl exec, attach, logs or port-forward.
// It is a compact rewrite of the kubelet's server (pkg/kubelet/server/
// server.go, Kubernetes v1.36.3; line numbers in comments refer to that
// version), whose constructor needs a 13-method host interface.
//
// The path of one `kubectl exec`:
//
//	kubectl ──WebSocket v5──▶ kube-apiserver ──HTTPS (SPDY or WebSocket)──▶ this server ──CRI Exec──▶ runtime
//	                                                                              │
//	                                                 upgrade-aware proxy ◀───────┘ streaming URL
//	                                                        │
//	                                                        └──SPDY──▶ the runtime's streaming server ──▶ process
//
// Who checks whom:
//   - TLS: the apiserver verifies our serving certificate against the
//     cluster CA (--kubelet-certificate-authority); we get that certificate
//     from a kubernetes.io/kubelet-serving CSR with the node's IP as a SAN
//     (servingcert.go).
//   - We require a client certificate that chains to the cluster CA
//     (tls.RequireAndVerifyClientCert): the apiserver presents its
//     --kubelet-client-certificate, whose CN and O become user and groups.
//   - Every request is then authorized by a SubjectAccessReview the node
//     sends to the apiserver, with the attributes the kubelet's webhook
//     mode uses (auth_attributes.go): verb from the HTTP method, resource nodes,
//     subresource proxy (or stats, log, pods, healthz…) by path — except
//     that exec, attach and port-forward need create whatever the method,
//     where the kubelet lets a WebSocket GET through with get.
//   - The runtime's streaming server has no authentication: it listens on
//     loopback, and its URLs carry a single-use token.
//
// Exec, attach and port-forward are served the kubelet's way (streams.go):
// a CRI call returns the runtime's streaming URL, and an upgrade-aware
// proxy joins the caller to it. Container logs are read from the CRI log
// file with the kubelet's own reader (logs.go).
//
// Lookups go through two small interfaces, so any kubelet can plug in its
// own parts: PodLookup (the pod manager knows which pods this node runs)
// and the CRI RuntimeService (the runtime knows their containers).
package server

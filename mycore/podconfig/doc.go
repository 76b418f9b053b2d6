// Package podconfig is the part of the kubelet that turns "the pods I
// should run" into a stream of operations — ADD, UPDATE, DELETE (graceful),
// RECONCILE, REMOVE — and hands each one to the right handler, as
// pkg/kubelet/config and syncLoopIteration do (Kubernetes v1.36.3).
//
// The kubelet's own apiserver source, config.NewSourceApiserver
// (pkg/kubelet/config/apiserver.go:36), cannot be used from outside: it
// sends on a channel of the unexported type sourceUpdate, and its reflector
// runs on wait.NeverStop (apiserver.go:66), so it never stops. Watch is
// a compact replacement that stops with its context: a client-go reflector,
// as upstream's, on the pods whose spec.nodeName is this node, whose store
// turns each change into a kubetypes.PodUpdate with the op semantics of
// podStorage.merge and checkAndUpdatePod (pkg/kubelet/config/config.go:
// 177-247, 362-401).
//
// Files is the other source a kubelet has: static pods, read from the
// manifest files of one folder (the kubelet's staticPodPath). Upstream's
// config.NewSourceFile (pkg/kubelet/config/file.go:62) has the same two
// problems — it sends sourceUpdate and its goroutines never stop — so
// Files is a compact version of it that ends with its context, sending
// the same ops PodConfig would (DecodeManifest is what one file becomes).
//
// Dispatch is the switch of syncLoopIteration (pkg/kubelet/kubelet.go:
// 2707-2730); ManagerHandler is what the kubelet's four handlers do to the
// pod manager before they involve the pod workers.
package podconfig

// Package fleet runs many of our nodes in one process, each on its own
// mock container runtime: the way to see what a kubelet costs when there
// are a thousand of them, and to compare with tools that fake nodes.
//
// Every node is a whole mycore/kubelet — pod manager, pod workers, the
// kubelet's own generic PLEG relisting its runtime every second, the
// runtime manager making real CRI calls (in process, to its own
// mylib/fakecri), the status manager — plus its own Node object, status
// reporter and Lease renewed by the kubelet's lease controller. What the
// nodes share is what a process can share without faking anything a node
// does:
//
//	                ┌──────────── one process ────────────────────────────┐
//	apiserver ◀───▶ │ one credential, one connection (HTTP/2)              │
//	                │   ├─ pod informer (1 list + 1 watch) ─▶ per-node ops │
//	                │   └─ node informer (read by the status reporters)    │
//	                │ node 0000: kubelet ─ PLEG ─ CRI ─▶ mock runtime 0000 │
//	                │ node 0001: kubelet ─ PLEG ─ CRI ─▶ mock runtime 0001 │
//	                │ …          + Lease, status reporter per node         │
//	                └──────────────────────────────────────────────────────┘
//
// # Identity
//
// All nodes act through one credential (the admin kubeconfig, or any
// other the caller passes), as KWOK does. A client per node would need a
// certificate per node (a CSR each), and would be N TLS connections and N
// rate limiters. What is lost is what the Node authorizer and the
// NodeRestriction admission plugin check for a real kubelet: that node X
// reads only the pods bound to X, writes only its own Node, Lease and pod
// statuses. Nothing here relies on that check being absent; it is simply
// not made.
//
// # Process-wide state
//
// Some of what the kubelet packages use is global to the process, and a
// fleet of nodes shares it:
//
//   - feature gates (utilfeature.DefaultFeatureGate): read, never set.
//     Run refuses to start with EventedPLEG on: that PLEG keeps its
//     "in use" flag in a package variable (pleg/evented.go), one for the
//     whole process, and needs a GetContainerEvents stream the in-process
//     runtime does not offer. PLEGOnDemandRelist (beta, on) is per PLEG.
//   - metrics: the kubelet's metrics (PLEG relist duration, running pods…)
//     are package globals in pkg/kubelet/metrics; nobody registers them
//     here, and an unregistered component-base metric is a no-op — so
//     N PLEGs do not overwrite one another's gauges in a registry. The
//     fleet's own numbers are the API calls it counts (Calls).
//   - klog: one logger for all; the PLEGs and lease controllers log only
//     errors at the default verbosity. Each node's step-by-step log goes
//     through its own Options.NodeLog function.
//   - no goroutine runs on wait.NeverStop / wait.Forever: every node's
//     loops end with the context, Run returns after all of them.
package fleet

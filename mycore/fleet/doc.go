// Package fleet runs many of our nodes in one process, each on its own
// mock container runtime: the way to see what a kubelet costs when there
// are a thousand of them, and to compare with tools that fake nodes.
//
// Every node is a whole mycore/mykubelet — pod manager, pod workers, the
// kubelet's own generic PLEG relisting its runtime every second, the
// runtime manager making real CRI calls (in process, to its own
// mylib/fakecri), the status manager — plus its own Node object, status
// reporter and Lease renewed by the kubelet's lease controller. What the
// nodes share is what a process can share without faking anything a node
// does:
//
//	                ┌──────────── one process ────────────────────────────┐
//	apiserver ◀───▶ │ one credential; HTTP/2 connections: 2 per 100 nodes  │
//	                │ (their requests; their pod watches), 1 for the Node  │
//	                │ informer (read by the status reporters);             │
//	                │ 16 event broadcasters (node i: i mod 16)             │
//	                │ 128 turns to write pod status (status.WriteTurns)    │
//	                │ node 0000: kubelet ─ PLEG ─ CRI ─▶ mock runtime 0000 │
//	                │ node 0001: kubelet ─ PLEG ─ CRI ─▶ mock runtime 0001 │
//	                │ …          + Lease, status reporter per node         │
//	                └──────────────────────────────────────────────────────┘
//
// # Identity
//
// The fleet holds one credential and a few connections: for every
// Options.NodesPerConnection nodes (default 100; a kubelet has a
// connection of its own) one for their requests and one for their pod
// watches — a watch holds one of the apiserver's 100 streams per
// connection for as long as it runs — and one for the Node informer. A
// connection lost under load takes only its own nodes' requests or
// watches with it, and each of those nodes lists its own few pods again
// (fleet.go, clients). The credential is
// its own, not the admin's: given the admin kubeconfig, the fleet uses it
// once, at start, to bind the user kubelet-labs:fleet to a ClusterRole
// that may impersonate exactly the fleet's nodes (and group system:nodes,
// no other) and list and watch nodes, and to get that user a
// client certificate whose key stays in the process (credential.go). Each
// node's requests impersonate that node — user system:node:NAME, group
// system:nodes — so the apiserver checks and schedules them exactly as a
// kubelet's: the Node authorizer and NodeRestriction let node X read and
// write only its own Node, Lease and pods, and API Priority and Fairness
// queues node X's requests in the node flow schemas, fairly against the
// other nodes (heartbeats first). A certificate per node would do the same
// at the cost of a CSR and a TLS session per node. Each node watches its
// own pods as itself, as a kubelet does (podconfig.Watch); only the shared
// Node informer (the fleet's Nodes) goes as kubelet-labs:fleet;
// a write that names no node is a bug, refused before it is sent
// (ErrNoNode), never sent as someone who may do more. Were the admin the
// credential, such a request would go as system:masters: no RBAC, no node
// rules, exempt from priority and fairness.
//
// With Options.SharedIdentity every request goes as the kubeconfig's user,
// as KWOK's do: then no per-node check is made, and an admin's requests
// are exempt from priority and fairness — nothing stops them from
// flooding the apiserver.
//
// # Status writes
//
// A node's status manager posts a pod's status as soon as it changes, as
// upstream's does. A thousand of them on one apiserver would have every
// post in flight at once, each waiting behind all the others — and a pod
// being deleted changes twice in a few milliseconds (its containers
// stopped, then its terminal phase), so both posts went out. The nodes
// share Options.StatusWrites turns (128): a post waits for a turn and
// then sends the newest status the node has, so what changed while it
// waited is written once (status.WriteTurns). That is upstream's rule —
// the sync writes the newest version, an older one is never sent — met
// under load; each node still writes each of its own statuses, as
// itself.
//
// # Registration
//
// Each node registers on its own, as a kubelet does, retrying for ever: a
// node whose Node create keeps failing holds up no other node's
// registration, Lease or pods; its kubelet runs (and reads its pods) after
// its first attempt, its heartbeats once its Node exists. Ready waits for
// every node.
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

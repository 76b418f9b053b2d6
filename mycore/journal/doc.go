// Package journal is our kubelet's one record of what it does: every step
// the labs print — config ops, the pod workers' states and waits,
// computePodActions' decisions, CRI calls and their latency, PLEG events
// and relists, probe results, status posts, crash-loop back-offs — is an
// Entry published on a Bus. The terminal printer and the live view in the
// browser (internal/liveview) both read the same Bus, so there is no second
// copy of what happened to drift from the first.
//
// The kubelet has no such bus: it logs with klog and counts with
// Prometheus metrics (pkg/kubelet/metrics/metrics.go at v1.36.3, e.g.
// PLEGRelistDuration and RuntimeOperationsDuration). An Entry carries the
// same facts a log line and those metrics would, typed, so a page can draw
// them without parsing text.
package journal

// Package prober is our kubelet's probe manager: liveness, readiness and
// startup probes, one goroutine per probe of each container, run with the
// kubelet's own probers (k8s.io/kubernetes/pkg/probe/exec, http, tcp).
//
// It is a compact rewrite of pkg/kubelet/prober (Kubernetes v1.36.3):
// prober_manager.go (the Manager), worker.go (one worker per probe) and
// prober.go (running one probe). Line numbers in comments refer to those
// files at v1.36.3.
//
// How results travel, as in the kubelet:
//
//	worker ──probe──▶ exec (CRI ExecSync) / HTTP GET / TCP connect, against the pod IP
//	   │ after failureThreshold failures (or successThreshold successes)
//	   ▼
//	results cache (proberesults.Manager: container ID → Success/Failure)
//	   ├─▶ Updates() ─▶ the kubelet's sync loop: readiness → status manager's
//	   │                SetContainerReadiness, startup → SetContainerStartup,
//	   │                and every change syncs the pod now
//	   └─▶ Get() ─────▶ computePodActions: liveness or startup Failure → kill and
//	                    restart the container (per the restart policy)
//
// A startup probe gates the others: until it succeeds, liveness and
// readiness workers do not probe (the container is not Started, so not
// Ready), and once it succeeded it stops probing until the container is
// replaced.
//
// Differences from upstream: every worker ends on Stop, and a probe in
// flight is cancelled with it (upstream workers run on until their pod is
// removed); the Unhealthy and ProbeWarning events go to Options.Recorder
// (none without one); no metrics. One thing is as upstream and outlives
// Stop for a moment: an HTTP probe cut short while connecting leaves
// net/http's dial running (the transport keeps the connection for a later
// request) until the connect succeeds or fails.
package prober

package mykubelet

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/journal"
)

// Journal is the node's record of every step (mycore/journal): what
// Options.Log prints, and what the live view draws.
func (k *Kubelet) Journal() *journal.Bus { return k.journal }

// log publishes a step of no particular kind as a printed line.
func (k *Kubelet) log(format string, args ...any) {
	k.journal.Printf(journal.Other, format, args...)
}

// say publishes a printed step of kind about pod (nil: no pod).
func (k *Kubelet) say(kind journal.Kind, pod *v1.Pod, call string, format string, args ...any) {
	e := journal.Entry{Kind: kind, Call: call}
	if pod != nil {
		e.Pod, e.UID = klog.KObj(pod).String(), string(pod.UID)
	}
	k.journal.Say(e, format, args...)
}

// sayPod is say for a pod known by namespace, name and UID only.
func (k *Kubelet) sayPod(kind journal.Kind, namespace, name string, uid types.UID, call string, format string, args ...any) {
	e := journal.Entry{Kind: kind, Call: call, Pod: namespace + "/" + name, UID: string(uid)}
	k.journal.Say(e, format, args...)
}

// relistWatch is the pod cache the PLEG writes, watched for the end of
// each relist: GenericPLEG.Relist calls UpdateTime(start of the relist)
// once every pod is in the cache (generic.go:329 at v1.36.3), the same
// moment its PLEGRelistDuration metric is observed (:306). The journal gets
// a Relist entry with the duration, the health threshold and, if anything
// reads the journal, the node's CRI calls so far (the CRI client's Meter).
type relistWatch struct {
	kubecontainer.Cache
	journal   *journal.Bus
	threshold time.Duration
	now       func() time.Time
	calls     *cri.Meter
}

func (c relistWatch) UpdateTime(start time.Time) {
	c.Cache.UpdateTime(start)
	e := journal.Entry{Kind: journal.Relist, Call: "relist", Took: c.now().Sub(start), Threshold: c.threshold}
	if c.journal.Heard() {
		counts := c.calls.Counts()
		e.Counts = make(map[string]uint64, len(counts))
		for _, n := range counts {
			e.Counts[n.Method] = n.Calls
		}
	}
	c.journal.Publish(e)
}

// probeLog prints the prober's own lines (a failed probe's output).
func (k *Kubelet) probeLog(format string, args ...any) {
	k.journal.Printf(journal.Probe, format, args...)
}

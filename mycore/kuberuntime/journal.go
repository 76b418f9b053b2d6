package kuberuntime

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"kubelet-labs/mycore/journal"
)

// log publishes a step of no particular kind (a detail under the step
// before it, an event that could not be recorded) as a printed line.
func (m *Manager) log(format string, args ...any) {
	m.journal.Printf(journal.Other, format, args...)
}

// say publishes e, printed as format says.
func (m *Manager) say(e journal.Entry, format string, args ...any) {
	m.journal.Say(e, format, args...)
}

// criCall is the entry of one CRI call for a pod's lane: method, the
// container it is about ("" for the sandbox) and how long it took (0: the
// call is about to be made, e.g. a StopContainer that may wait out the
// grace period).
func criCall(namespace, name string, uid string, method, container string, took time.Duration) journal.Entry {
	return journal.Entry{Kind: journal.CRI, Pod: namespace + "/" + name, UID: uid, Call: method, Container: container, Took: took}
}

// podCall is criCall for a pod object (nil: a pod only the runtime knows,
// named by the runtime pod).
func podCall(pod *v1.Pod, method, container string, took time.Duration) journal.Entry {
	return criCall(pod.Namespace, pod.Name, string(pod.UID), method, container, took)
}

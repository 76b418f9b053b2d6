package status

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"kubelet-labs/mycore/journal"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubestatus "k8s.io/kubernetes/pkg/kubelet/status"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
	"k8s.io/utils/clock"
)

// DefaultSyncPeriod: how often every cached status is checked against the
// apiserver, besides the immediate sync of each change (syncPeriod, :209).
const DefaultSyncPeriod = 10 * time.Second

// DeletionSafety is what the manager asks before the final delete and
// before posting a terminal phase (the kubelet's
// PodDeletionSafetyProvider, :120-124); *podworkers.Workers satisfies it.
type DeletionSafety interface{ CouldHaveRunningContainers(uid types.UID) bool }

// PodGetter finds the pod the kubelet knows by UID, with the status the
// apiserver last sent; kubepod.Manager (the pod manager) satisfies it.
type PodGetter interface {
	GetPodByUID(uid types.UID) (*v1.Pod, bool)
}

// MirrorPods pairs a static pod with its mirror pod: the status of a
// static pod is posted to its mirror pod, the only object of it the
// apiserver has (the PodManager the kubelet's status manager takes,
// :103-109). kubepod.Manager (the pod manager) satisfies it.
type MirrorPods interface {
	GetMirrorPodByPod(*v1.Pod) (*v1.Pod, bool)
	// TranslatePodUID is the static pod's UID for its mirror pod's UID,
	// and any other UID unchanged.
	TranslatePodUID(uid types.UID) kubetypes.ResolvedPodUID
}

// Options configure a Manager. Every field is optional.
type Options struct {
	// SyncPeriod: full reconcile of every cached status; default 10s.
	SyncPeriod time.Duration
	// Clock paces the periodic sync and stamps status.startTime and the
	// conditions' lastTransitionTime (nil: the real clock). Upstream reads
	// metav1.Now() for both (:899, :1031); the kubelet's active deadline
	// counts from that start time on the kubelet's clock
	// (active_deadline.go:95), so a node with a fake clock needs both on it.
	Clock clock.WithTicker
	// Journal gets one entry per post (its version and delay after the
	// change), delete and skipped write; Log, if Journal is nil, gets the
	// same as lines; neither: silent.
	Journal *journal.Bus
	Log     func(format string, args ...any)
	// Pods is the pod manager, as upstream's NewManager takes it (:212).
	// With it, the periodic sync sees a deletionTimestamp that arrived
	// after TerminatePod (a completed pod deleted later) and re-posts a
	// status that someone else overwrote (needsReconcile, :1269). Without
	// it, the manager knows only the pods handed to it.
	Pods PodGetter
	// Mirrors, if set, makes the manager post the status of each static
	// pod (kubernetes.io/config.source=file) to its mirror pod, and hold
	// it while the static pod has none yet (syncBatch :1102-1111). Without
	// it, static pods are left out: nothing is posted for them.
	Mirrors MirrorPods
	// ReadLastWrite makes a post patch from the pod as the apiserver last
	// answered this manager — the pod it was given for the first post,
	// then each PATCH's reply — instead of a GET before every PATCH as
	// upstream's syncPod does (:1160). A documented departure, for fleet
	// mode, where the GETs were a third of a thousand nodes' requests.
	// Why it loses nothing: the patch is a two-way merge from that copy to
	// the new status, so it names every field the kubelet changed since
	// its own last write; a field someone else wrote since then is not in
	// the patch and stays; the UID precondition still refuses a pod that
	// was replaced. A failed post, a static pod's mirror pod and a pod
	// whose copy shows no deletion while the kubelet knows of one read the
	// pod again with a GET. The reply is kept only until the pod manager
	// (Pods) has that write from the informer; then the pod manager's copy
	// is the base, so a running pod's status is not held twice.
	ReadLastWrite bool
	// Turns, if set, is shared with other managers: each post (with its
	// read and the final delete) waits for a turn, then sends the newest
	// version of the pod's status (see WriteTurns). Fleet mode's.
	Turns *WriteTurns
}

// versioned is upstream's versionedPodStatus (:52-65): a status, its
// version (grows with every change), and the pod it belongs to.
type versioned struct {
	status  v1.PodStatus
	version uint64
	// pod is the last pod passed in: name, namespace and spec for the
	// sync and the readiness conditions.
	pod *v1.Pod
	// finished: TerminatePod was called, no container will run again;
	// the pod may be deleted once it has a deletionTimestamp.
	finished bool
	// at is when this version was made (upstream keeps the time of the
	// first unsent one, for a metric; we log the delay of each post).
	at time.Time
}

// Manager caches the status of every pod of the node and writes changes
// to the apiserver. Its methods are safe for concurrent use.
type Manager struct {
	client  kubernetes.Interface
	safety  DeletionSafety
	o       Options
	journal *journal.Bus

	mu       sync.RWMutex
	statuses map[types.UID]versioned
	changed  chan struct{} // podStatusChannel (:218): one pending wake-up is enough

	// syncMu makes syncs one at a time (upstream: one goroutine, :282);
	// apiVersions is guarded by it.
	syncMu      sync.Mutex
	apiVersions map[types.UID]uint64 // the version the apiserver has
	// lastWrite is, with Options.ReadLastWrite, the pod as the apiserver
	// returned it after this manager's last PATCH (by the UID in the
	// apiserver); guarded by syncMu.
	lastWrite map[types.UID]*v1.Pod
}

// NewManager returns a manager that writes through client (the node's
// own client: the Node authorizer lets it patch the status of, and
// delete, only pods bound to it). Nothing is written until Run.
func NewManager(client kubernetes.Interface, safety DeletionSafety, o Options) *Manager {
	if o.SyncPeriod <= 0 {
		o.SyncPeriod = DefaultSyncPeriod
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &Manager{
		client: client, safety: safety, o: o, journal: journal.Or(o.Journal, o.Log),
		statuses:    map[types.UID]versioned{},
		changed:     make(chan struct{}, 1),
		apiVersions: map[types.UID]uint64{},
		lastWrite:   map[types.UID]*v1.Pod{},
	}
}

// Run writes each change at once and checks every status each SyncPeriod,
// until ctx is done; it then returns and leaves no goroutine behind.
// Upstream's Start (:267-295) runs the same loop under wait.Forever on a
// ticker it never stops.
func (m *Manager) Run(ctx context.Context) {
	t := m.o.Clock.NewTicker(m.o.SyncPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.changed:
			m.Sync(ctx, false)
		case <-t.C():
			m.Sync(ctx, true)
		}
	}
}

// GetPodStatus returns the cached status of a pod (:457).
func (m *Manager) GetPodStatus(uid types.UID) (v1.PodStatus, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s, ok := m.statuses[uid]
	return *s.status.DeepCopy(), ok
}

// SetPodStatus caches a new status for pod and schedules its write (:464).
// A pod with a deletionTimestamp is always scheduled, even when nothing
// changed, so the sync can delete it once it is safe.
func (m *Manager) SetPodStatus(pod *v1.Pod, status v1.PodStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	status = *status.DeepCopy()
	status.ObservedGeneration = podutil.CalculatePodStatusObservedGeneration(pod)
	m.updateLocked(pod, status, pod.DeletionTimestamp != nil, false)
}

// SetContainerReadiness sets one container's Ready, and the pod's Ready
// and ContainersReady conditions with it (:490-558). It is what the
// prober manager calls when a readiness probe changes its mind.
func (m *Manager) SetContainerReadiness(podUID types.UID, containerID kubecontainer.ContainerID, ready bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pod, old, ok := m.containerChange(podUID, containerID, "readiness")
	if !ok {
		return
	}
	st := *old.status.DeepCopy()
	cs := findContainerStatus(&st, containerID.String())
	if cs.Ready == ready {
		return
	}
	cs.Ready = ready
	all := append(append([]v1.ContainerStatus{}, st.InitContainerStatuses...), st.ContainerStatuses...)
	ready1 := kubestatus.GeneratePodReadyCondition(pod, &old.status, st.Conditions, all, st.Phase)
	ready2 := kubestatus.GenerateContainersReadyCondition(pod, &old.status, all, st.Phase)
	podutil.UpdatePodCondition(&st, &ready1)
	podutil.UpdatePodCondition(&st, &ready2)
	m.updateLocked(pod, st, false, false)
}

// SetContainerStartup sets one container's Started (:560-607): what the
// prober manager calls when a startup probe succeeds.
func (m *Manager) SetContainerStartup(podUID types.UID, containerID kubecontainer.ContainerID, started bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pod, old, ok := m.containerChange(podUID, containerID, "startup")
	if !ok {
		return
	}
	st := *old.status.DeepCopy()
	cs := findContainerStatus(&st, containerID.String())
	if cs.Started != nil && *cs.Started == started {
		return
	}
	cs.Started = &started
	m.updateLocked(pod, st, false, false)
}

// containerChange finds the pod and the cached status a container change
// applies to. Call with m.mu held.
func (m *Manager) containerChange(podUID types.UID, id kubecontainer.ContainerID, what string) (*v1.Pod, versioned, bool) {
	old, found := m.statuses[podUID]
	pod := old.pod
	if m.o.Pods != nil {
		pod, _ = m.o.Pods.GetPodByUID(podUID)
	}
	switch {
	case pod == nil:
		return nil, old, false // deleted: nothing to update
	case !found:
		m.logf("status  %s of %s changed before the pod's first status: ignored", what, klog.KObj(pod))
		return nil, old, false
	case findContainerStatus(&old.status, id.String()) == nil:
		m.logf("status  %s changed for unknown container %s of %s: ignored", what, id, klog.KObj(pod))
		return nil, old, false
	}
	return pod, old, true
}

// findContainerStatus: the status of the container with this ID (:609).
func findContainerStatus(st *v1.PodStatus, id string) *v1.ContainerStatus {
	for i := range st.ContainerStatuses {
		if st.ContainerStatuses[i].ContainerID == id {
			return &st.ContainerStatuses[i]
		}
	}
	for i := range st.InitContainerStatuses {
		if st.InitContainerStatuses[i].ContainerID == id {
			return &st.InitContainerStatuses[i]
		}
	}
	return nil
}

// statusUnknown is what a container whose end nobody saw is reported as
// (TerminatePod :660-669, and convertToAPIContainerStatuses).
func statusUnknown() v1.ContainerState {
	return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
		Reason:   kubecontainer.ContainerReasonStatusUnknown,
		Message:  "The container could not be located when the pod was terminated",
		ExitCode: 137,
	}}
}

// TerminatePod is called once the pod's containers are all stopped
// (SyncTerminatedPod). Every container not known to be terminated is
// reported terminated with exit code 137 — the kubelet could not see how
// it ended, so it must not look like a success — and a pod not yet in a
// terminal phase becomes Failed (:637-710). From then on the pod may be
// deleted (podIsFinished).
func (m *Manager) TerminatePod(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := &pod.Status
	cached, isCached := m.statuses[pod.UID]
	if isCached {
		old = &cached.status
	}
	st := *old.DeepCopy()
	if hasPodInitialized(pod) {
		for i := range st.ContainerStatuses {
			if st.ContainerStatuses[i].State.Terminated == nil {
				st.ContainerStatuses[i].State = statusUnknown()
			}
		}
	}
	for i := range initializedContainers(st.InitContainerStatuses) {
		if st.InitContainerStatuses[i].State.Terminated == nil {
			st.InitContainerStatuses[i].State = statusUnknown()
		}
	}
	if !kubetypes.IsStaticPod(pod) && !podutil.IsPodPhaseTerminal(st.Phase) {
		st.Phase = v1.PodFailed
	}
	m.updateLocked(pod, st, true, true)
}

// RemoveOrphanedStatuses forgets every pod not in podUIDs (:1055); the
// kubelet's housekeeping calls it with the pods it still knows.
func (m *Manager) RemoveOrphanedStatuses(podUIDs map[types.UID]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for uid := range m.statuses {
		if !podUIDs[uid] {
			delete(m.statuses, uid)
		}
	}
}

// updateLocked caches status as the pod's next version unless it is
// illegal or changes nothing (updateStatusInternal, :849-1012). force
// makes a new version even for an equal status (a pod being deleted, a
// terminated pod). Call with m.mu held.
func (m *Manager) updateLocked(pod *v1.Pod, status v1.PodStatus, force, finished bool) bool {
	cached, isCached := m.statuses[pod.UID]
	old := pod.Status
	if isCached {
		old = cached.status
		if cached.finished && !kubetypes.IsStaticPod(pod) {
			finished = true // once finished, always finished (:852-860)
		}
	} else if mirror, ok := m.mirrorOf(pod); ok {
		// A static pod's last posted status is its mirror pod's (:861-862).
		old = mirror.Status
	}
	if err := checkContainerStateTransition(&old, &status, &pod.Spec); err != nil {
		m.logf("status  %s: not updated: %v", klog.KObj(pod), err)
		return false
	}
	// Upstream leaves this to generateAPIPodStatus (kubelet_pods.go:1942-
	// 1950); a status set by hand must not revive a finished pod either.
	if podutil.IsPodPhaseTerminal(old.Phase) && status.Phase != old.Phase {
		m.logf("status  %s: not updated: phase %s is terminal, %s refused", klog.KObj(pod), old.Phase, status.Phase)
		return false
	}
	// A condition keeps its transition time while its status stays the
	// same: what changes is a fact, not the moment we looked (:873-892).
	now := metav1.NewTime(m.o.Clock.Now())
	for _, t := range []v1.PodConditionType{v1.ContainersReady, v1.PodReady, v1.PodInitialized,
		v1.PodReadyToStartContainers, v1.PodScheduled, v1.DisruptionTarget, v1.AllContainersRestarting, v1.PodResizeInProgress} {
		updateLastTransitionTimeAt(&status, &old, t, now)
	}
	// The start time is set once (:894-901).
	if old.StartTime != nil && !old.StartTime.IsZero() {
		status.StartTime = old.StartTime.DeepCopy()
	} else if status.StartTime.IsZero() {
		status.StartTime = now.DeepCopy()
	}
	if old.ObservedGeneration > status.ObservedGeneration {
		status.ObservedGeneration = old.ObservedGeneration
	}
	normalizeStatus(pod, &status)

	// Equal, ignoring what the kubelet does not own: not a new version (:969-974).
	if isCached && isPodStatusByKubeletEqual(&cached.status, &status) && !force {
		return false
	}
	next := versioned{status: status, version: cached.version + 1, pod: pod, finished: finished, at: time.Now()}
	m.statuses[pod.UID] = next
	select {
	case m.changed <- struct{}{}:
	default: // a sync is already pending; it will take the newest version
	}
	return true
}

// updateLastTransitionTime (:1025-1038), at the real time as upstream's:
// the stage file's mergePodStatus (terminal.go) calls it.
func updateLastTransitionTime(status, old *v1.PodStatus, t v1.PodConditionType) {
	updateLastTransitionTimeAt(status, old, t, metav1.Now())
}

// updateLastTransitionTimeAt is updateLastTransitionTime at now, the
// manager's clock (Options.Clock).
func updateLastTransitionTimeAt(status, old *v1.PodStatus, t v1.PodConditionType, now metav1.Time) {
	_, c := podutil.GetPodCondition(status, t)
	if c == nil {
		return
	}
	c.LastTransitionTime = now
	if _, o := podutil.GetPodCondition(old, t); o != nil && o.Status == c.Status {
		c.LastTransitionTime = o.LastTransitionTime
	}
}

// mirrorOf is the mirror pod of a static pod, if Options.Mirrors knows
// one.
func (m *Manager) mirrorOf(pod *v1.Pod) (*v1.Pod, bool) {
	if m.o.Mirrors == nil || !kubetypes.IsStaticPod(pod) {
		return nil, false
	}
	return m.o.Mirrors.GetMirrorPodByPod(pod)
}

// deleteStatus forgets one pod (deletePodStatus, :1040).
func (m *Manager) deleteStatus(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.statuses, uid)
}

// Describe is a one-line summary of a status: phase, then each container's
// state, e.g. "Running [main running ready]" or "Failed [main exited 3 Error]".
func Describe(st v1.PodStatus) string {
	var b strings.Builder
	b.WriteString(string(st.Phase))
	if st.Phase == "" {
		b.WriteString("(no phase)")
	}
	var cs []string
	for _, c := range append(append([]v1.ContainerStatus{}, st.InitContainerStatuses...), st.ContainerStatuses...) {
		s := c.Name + " "
		switch {
		case c.State.Running != nil:
			s += "running"
			if c.Ready {
				s += " ready"
			}
		case c.State.Terminated != nil:
			s += fmt.Sprintf("exited %d", c.State.Terminated.ExitCode)
			if r := c.State.Terminated.Reason; r != "" {
				s += " " + r
			}
		case c.State.Waiting != nil:
			s += "waiting"
			if r := c.State.Waiting.Reason; r != "" {
				s += " " + r
			}
		}
		cs = append(cs, s)
	}
	if len(cs) > 0 {
		b.WriteString(" [" + strings.Join(cs, ", ") + "]")
	}
	return b.String()
}

// logf publishes a status step that is no post (a skipped write, a
// failure) as a printed line.
func (m *Manager) logf(format string, args ...any) {
	m.journal.Printf(journal.Status, format, args...)
}

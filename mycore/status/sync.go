package status

import (
	"context"
	"fmt"

	"kubelet-labs/mycore/journal"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/klog/v2"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
	statusutil "k8s.io/kubernetes/pkg/util/pod"
)

// Sync is one pass of the sync loop (syncBatch, :1075-1148): with all
// false, only pods with a version the apiserver has not seen; with all
// true, also pods that can be deleted now and pods whose status in the
// apiserver differs from ours. It returns how many pods it synced. Run
// calls it; tests and labs that step by hand may call it directly.
//
// A static pod's status goes to its mirror pod: the version the apiserver
// has is kept per mirror pod UID (apiStatusVersions is keyed by
// MirrorPodUID, :79), so a mirror pod deleted and made again gets the
// status posted anew. A static pod without a mirror pod yet is skipped
// (:1105-1111): its status waits, cached, for the next pass.
func (m *Manager) Sync(ctx context.Context, all bool) int {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	type job struct {
		uid       types.UID // the pod's own UID (the static pod's)
		statusUID types.UID // the UID of the object in the apiserver (its mirror pod's)
		st        versioned
	}
	var jobs []job
	m.mu.RLock()
	live := make(map[types.UID]bool, len(m.statuses))
	for uid, st := range m.statuses {
		statusUID := uid
		if kubetypes.IsStaticPod(st.pod) {
			mirror, ok := m.mirrorOf(st.pod)
			if !ok {
				continue // no mirror pod (yet), or no Mirrors: nothing to post to
			}
			statusUID = mirror.UID
		}
		live[statusUID] = true
		switch {
		case !all:
			if m.apiVersions[statusUID] < st.version {
				jobs = append(jobs, job{uid, statusUID, st})
			}
		case m.needsUpdate(uid, statusUID, st):
			jobs = append(jobs, job{uid, statusUID, st})
		case m.needsReconcile(uid, st):
			// Someone else changed the status in the apiserver: the
			// kubelet is the source of truth, post ours again (:1119-1128),
			// on the pod as it is now.
			delete(m.apiVersions, statusUID)
			delete(m.lastWrite, statusUID)
			jobs = append(jobs, job{uid, statusUID, st})
		}
	}
	if all {
		for uid := range m.apiVersions { // forget versions of forgotten pods and mirror pods
			if !live[uid] {
				delete(m.apiVersions, uid)
			}
		}
		for uid, lw := range m.lastWrite {
			if !live[uid] || m.informerHas(uid, lw) {
				delete(m.lastWrite, uid)
			}
		}
	}
	m.mu.RUnlock()
	for _, j := range jobs {
		if ctx.Err() != nil {
			break
		}
		if m.o.Turns == nil {
			m.syncPod(ctx, j.uid, j.statusUID, j.st)
			continue
		}
		done, err := m.o.Turns.take(ctx)
		if err != nil {
			break
		}
		// What changed while this post waited for its turn is posted
		// with it: the version it was queued with is never sent.
		if st, ok := m.newest(j.uid, j.st); ok {
			m.syncPod(ctx, j.uid, j.statusUID, st)
		}
		done()
	}
	return len(jobs)
}

// syncPod writes one status to the apiserver, then deletes the pod if it
// is finished and being deleted (:1151-1227). statusUID is the UID the
// object in the apiserver should have: uid, or for a static pod its mirror
// pod's. Call with syncMu held.
func (m *Manager) syncPod(ctx context.Context, uid, statusUID types.UID, st versioned) {
	name := klog.KObj(st.pod).String()
	if statusUID != uid {
		name += " (mirror pod of the static pod)"
	}
	pod, err := m.readPod(ctx, statusUID, st)
	switch {
	case apierrors.IsNotFound(err):
		// Gone: RemoveOrphanedStatuses will forget it (a mirror pod: the
		// kubelet makes it again, then this status goes to the new one).
		m.logf("status  %s: not posted: the pod no longer exists", name)
		return
	case err != nil:
		m.logf("status  %s: not posted: get pod: %v (retried at the next sync)", name, err)
		return
	case m.translate(pod.UID) != uid:
		// Deleted and created again under the same name: this status
		// belongs to a pod that is gone (:1170-1179). For a static pod:
		// the name now belongs to a mirror pod of another static pod (the
		// manifest was edited), to one the pod manager does not know yet,
		// or to a pod that is no mirror pod.
		if statusUID != uid {
			m.logf("status  %s: not posted: pod %s is not the mirror pod of static pod %s (any more); status dropped", name, pod.UID, uid)
		} else {
			m.logf("status  %s: not posted: the name now belongs to another pod (uid %s, ours was %s); status dropped", name, pod.UID, uid)
		}
		m.deleteStatus(uid)
		return
	}

	couldRun := m.safety.CouldHaveRunningContainers(uid)
	merged := mergePodStatus(pod, pod.Status, st.status, couldRun)
	heldBack := merged.Phase != st.status.Phase
	hold := ""
	if heldBack {
		hold = fmt.Sprintf("; phase %s held back while its containers could still run (retried at the next sync)", st.status.Phase)
	}
	// A strategic merge patch of status with metadata.uid in it: the
	// apiserver refuses it (409 Conflict) if the pod is another one by now.
	// No resourceVersion, so a concurrent writer of other fields (a
	// controller adding a condition) is never a conflict.
	newPod, _, unchanged, err := statusutil.PatchPodStatus(ctx, m.client, pod.Namespace, pod.Name, pod.UID, pod.Status, merged)
	if err != nil {
		delete(m.lastWrite, statusUID) // the next try reads the pod anew
		m.logf("status  %s: patch failed (retried at the next sync): %v", name, err)
		return
	}
	if m.o.ReadLastWrite && !unchanged {
		m.lastWrite[statusUID] = lastWritten(newPod)
	}
	switch {
	case !unchanged:
		delay := roundMS(st.at)
		m.journal.Say(journal.Entry{Kind: journal.Status, Pod: klog.KObj(st.pod).String(), UID: string(uid), Call: "PatchPodStatus",
			State: string(merged.Phase), Version: st.version, Took: delay},
			"status  %s v%d posted: %s (%s after the change)%s", name, st.version, Describe(merged), delay, hold)
		pod = newPod
	case heldBack:
		m.logf("status  %s v%d: nothing to post%s", name, st.version, hold)
	}
	// A version posted with its phase held back is not the apiserver's
	// yet: the next sync tries again. (Upstream records it and relies on
	// needsReconcile, which needs the pod manager.)
	if !heldBack {
		m.apiVersions[pod.UID] = st.version
	}

	// Never true for a mirror pod: a static pod is not deleted through
	// the apiserver, and its mirror pod is the kubelet's to remove.
	if !m.canBeDeleted(pod, st) {
		return
	}
	// The last word on a pod is the kubelet's: grace 0, and the UID as a
	// precondition so a new pod with the same name is never hit (:1210-1223).
	err = m.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64),
		Preconditions:      metav1.NewUIDPreconditions(string(pod.UID)),
	})
	if err != nil {
		m.logf("status  %s: final delete failed (retried at the next sync): %v", name, err)
		return
	}
	m.journal.Say(journal.Entry{Kind: journal.Status, Pod: klog.KObj(st.pod).String(), UID: string(uid), Call: "DeletePod"},
		"status  %s: terminated and deleted → DELETE grace 0, uid precondition %s", name, pod.UID)
	delete(m.lastWrite, statusUID)
	m.deleteStatus(uid)
}

// readPod is the pod a post starts from: by default a GET, as upstream's
// syncPod (:1160); with Options.ReadLastWrite, the apiserver's reply to
// this manager's last PATCH until the informer has delivered that write,
// otherwise the newest pod it was given (the pod manager's, else the one
// handed over with the status: as the pod source delivered it). A deletion that came after the last write is taken from the pod
// given: its deletionTimestamp is set once and never unset, and the
// informer delivered it. A static pod's mirror pod and a pod after a
// failed post are read with a GET. Call with syncMu held.
func (m *Manager) readPod(ctx context.Context, statusUID types.UID, st versioned) (*v1.Pod, error) {
	if m.o.ReadLastWrite && !kubetypes.IsStaticPod(st.pod) && st.pod.UID == statusUID {
		if pod, ok := m.lastWrite[statusUID]; ok {
			if pod.DeletionTimestamp == nil && st.pod.DeletionTimestamp != nil {
				marked := *pod
				marked.DeletionTimestamp, marked.DeletionGracePeriodSeconds = st.pod.DeletionTimestamp, st.pod.DeletionGracePeriodSeconds
				pod = &marked
			}
			return pod, nil
		}
		if pod := m.newestGiven(statusUID, st); pod.ResourceVersion != "" {
			return pod, nil
		}
	}
	pod, err := m.client.CoreV1().Pods(st.pod.Namespace).Get(ctx, st.pod.Name, metav1.GetOptions{})
	if err != nil {
		delete(m.lastWrite, statusUID)
	}
	return pod, err
}

// informerHas: the pod manager holds our last write — its pod, from the
// pod informer, is at least as new as that write (resourceVersions of one
// object compare as numbers: apimachinery's CompareResourceVersion) — so
// the copy kept in lastWrite says nothing the pod manager's does not.
// Forgetting it then is what keeps ReadLastWrite from holding a second
// copy of every running pod's status for its whole life (issue 23: 62 MB
// at 10,000 pods). Call with syncMu held.
func (m *Manager) informerHas(uid types.UID, lw *v1.Pod) bool {
	if m.o.Pods == nil {
		return false
	}
	pod, ok := m.o.Pods.GetPodByUID(uid)
	if !ok {
		return false
	}
	cmp, err := resourceversion.CompareResourceVersion(pod.ResourceVersion, lw.ResourceVersion)
	return err == nil && cmp >= 0
}

// newestGiven is the newest copy of the pod this manager can read without
// a request: the pod manager's (it follows the informer), else the pod
// handed over with the status.
func (m *Manager) newestGiven(uid types.UID, st versioned) *v1.Pod {
	if m.o.Pods != nil {
		if pod, ok := m.o.Pods.GetPodByUID(uid); ok {
			return pod
		}
	}
	return st.pod
}

// lastWritten is what the next post needs of the apiserver's reply (see
// readPod): the status, and of the metadata what mergePodStatus,
// canBeDeleted and the final delete read. Not the spec or managed fields:
// a fleet keeps one of these for each of its 10,000 pods (issue 23).
func lastWritten(p *v1.Pod) *v1.Pod {
	kept := &v1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion, Generation: p.Generation,
		DeletionTimestamp: p.DeletionTimestamp, DeletionGracePeriodSeconds: p.DeletionGracePeriodSeconds,
	}, Status: p.Status}
	if v, ok := p.Annotations[kubetypes.ConfigMirrorAnnotationKey]; ok {
		kept.Annotations = map[string]string{kubetypes.ConfigMirrorAnnotationKey: v}
	}
	return kept
}

// translate is TranslatePodUID (:1170): the static pod's UID for a mirror
// pod's UID the pod manager knows, any other UID unchanged.
func (m *Manager) translate(uid types.UID) types.UID {
	if m.o.Mirrors == nil {
		return uid
	}
	return types.UID(m.o.Mirrors.TranslatePodUID(uid))
}

// needsUpdate: a version the apiserver has not seen, or a pod that can be
// deleted now (:1229-1239). Call with syncMu and mu held.
func (m *Manager) needsUpdate(uid, statusUID types.UID, st versioned) bool {
	if v, ok := m.apiVersions[statusUID]; !ok || v < st.version {
		return true
	}
	if m.o.Pods == nil {
		// The pod we were last given may be older than the apiserver's:
		// let syncPod decide on the pod it reads.
		return st.finished && st.pod.DeletionTimestamp != nil && !m.safety.CouldHaveRunningContainers(uid)
	}
	pod, ok := m.o.Pods.GetPodByUID(uid)
	return ok && m.canBeDeleted(pod, st)
}

// needsReconcile: the apiserver's status (as the pod manager last saw it)
// differs from ours (:1269-1304). Only with Options.Pods. Call with
// syncMu and mu held.
func (m *Manager) needsReconcile(uid types.UID, st versioned) bool {
	if m.o.Pods == nil {
		return false
	}
	pod, ok := m.o.Pods.GetPodByUID(uid)
	if !ok {
		return false
	}
	if lw, ok := m.lastWrite[uid]; ok && !m.informerHas(uid, lw) {
		// The pod manager's copy is older than our last write: it shows
		// our own earlier status, not someone else's. Upstream compares
		// anyway and posts again; with the reply at hand we wait until the
		// informer delivers our write (the next pass), and spare a
		// thousand nodes' redundant posts.
		return false
	}
	if kubetypes.IsStaticPod(pod) {
		// Only the mirror pod's status means anything (:1276-1283).
		if pod, ok = m.mirrorOf(pod); !ok {
			return false
		}
	}
	api := pod.Status.DeepCopy()
	normalizeStatus(pod, api)
	return !isPodStatusByKubeletEqual(api, &st.status)
}

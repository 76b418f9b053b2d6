package kuberuntime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"kubelet-labs/mycore/cri"
)

// DefaultGCPolicy is the kubelet's default container GC policy
// (cmd/kubelet/app/options/options.go:142-144): dead containers may go at
// any age, one dead instance per container of a living pod is kept — the
// one `kubectl logs --previous` reads — and there is no global cap.
var DefaultGCPolicy = kubecontainer.GCPolicy{MinAge: 0, MaxPerPodContainer: 1, MaxContainers: -1}

// PodStateProvider tells the collector which pods are over
// (podStateProvider, kuberuntime_manager.go:103). The kubelet's pod
// workers answer it from what they know, never from the apiserver
// (pod_workers.go:704-724 at v1.36.3): a pod's content — dead containers,
// their logs, sandboxes, its log folder — may go once its worker has seen
// it deleted (a deletionTimestamp, or a pod found only in the runtime,
// :875-884) and it is terminated (SyncTerminatingPod returned: nothing
// runs), or once it was evicted; its runtime part as soon as it is
// terminated. A pod no worker knows is over once the pod sources have
// synced. So the next collection frees a deleted pod even while its object
// is still in the apiserver (lab 16).
type PodStateProvider interface {
	ShouldPodContentBeRemoved(uid types.UID) bool
	ShouldPodRuntimeBeRemoved(uid types.UID) bool
}

// PodsGone answers both questions of PodStateProvider with one function:
// true for a pod that is over. It fits a caller that knows only that, e.g.
// a node shutting down (everything is over); one that tells deleted from
// terminated implements the interface itself, as lab 16 does.
type PodsGone func(uid types.UID) bool

// ShouldPodContentBeRemoved implements PodStateProvider.
func (f PodsGone) ShouldPodContentBeRemoved(uid types.UID) bool { return f(uid) }

// ShouldPodRuntimeBeRemoved implements PodStateProvider.
func (f PodsGone) ShouldPodRuntimeBeRemoved(uid types.UID) bool { return f(uid) }

// GCOptions are GarbageCollect's inputs (its parameters upstream, plus
// the pod state provider the collector is built with).
type GCOptions struct {
	Policy kubecontainer.GCPolicy
	Pods   PodStateProvider
	// AllSourcesReady: every pod source (apiserver, files, http) has been
	// seen once. Before that an unknown pod may simply not be listed yet,
	// so nothing of pods that look gone is removed (kubelet.go:2460).
	AllSourcesReady bool
	// EvictNonDeletedPods: also remove what belongs to pods that are
	// terminated but not yet deleted (the kubelet sets it under disk
	// pressure, eviction manager).
	EvictNonDeletedPods bool
	// Selector, if set, limits the collection to sandboxes and containers
	// with these labels (e.g. io.kubernetes.pod.namespace). A kubelet owns
	// its runtime and collects everything; the course's containerd is shared
	// by every lab, so a lab collects only what it made.
	Selector map[string]string
}

// GCResult names what one collection removed.
type GCResult struct {
	Containers []string // IDs
	Sandboxes  []string // IDs
	LogDirs    []string // paths
}

// GarbageCollect removes what is dead: containerGC.GarbageCollect
// (kuberuntime_gc.go:401-430) in three steps.
//
//  1. Containers that are not running (and older than Policy.MinAge), in
//     evict units of (pod UID, container name): all of a pod that is over;
//     else the oldest beyond MaxPerPodContainer, then beyond MaxContainers
//     overall (evictContainers, :229-273).
//  2. Sandboxes that are not ready and hold no container any more: all of
//     a pod that is over, else all but the newest (evictSandboxes,
//     :281-326).
//  3. The log folders (NAMESPACE_NAME_UID) of pods that are over
//     (evictPodLogsDirectories, :330-399).
//
// The kubelet runs this every minute (ContainerGCPeriod, kubelet.go:231);
// KillPod leaves everything to it, which is why a stopped pod's containers
// — exit codes, logs — are still there after the kill. Errors of single
// removals are collected and the collection goes on, as upstream's
// log-and-continue does.
func (m *Manager) GarbageCollect(ctx context.Context, o GCOptions) (GCResult, error) {
	if o.Pods == nil {
		return GCResult{}, errors.New("GarbageCollect needs a PodStateProvider: which pods are over")
	}
	g := &gc{m: m, o: o}
	g.evictContainers(ctx)
	g.evictSandboxes(ctx)
	g.evictPodLogDirs()
	return g.res, errors.Join(g.errs...)
}

type gc struct {
	m    *Manager
	o    GCOptions
	res  GCResult
	errs []error
}

func (g *gc) fail(err error) { g.errs = append(g.errs, err) }

// podOver is the test both eviction steps share (:245, :317).
func (g *gc) podOver(uid types.UID) bool {
	return g.o.Pods.ShouldPodContentBeRemoved(uid) || (g.o.EvictNonDeletedPods && g.o.Pods.ShouldPodRuntimeBeRemoved(uid))
}

type deadContainer struct {
	id, name string
	created  time.Time
	unknown  bool // state UNKNOWN: may still run, so kill before removing
	podUID   types.UID
	about    about // its pod and name, from its labels
}

// evictContainers is :192-273.
func (g *gc) evictContainers(ctx context.Context) {
	all, err := g.m.cri.ListContainers(ctx, onNode, &runtimeapi.ContainerFilter{LabelSelector: g.o.Selector})
	if err != nil {
		g.fail(fmt.Errorf("ListContainers: %w", err))
		return
	}
	type unit struct {
		uid  types.UID
		name string
	}
	units := map[unit][]deadContainer{}
	newest := time.Now().Add(-g.o.Policy.MinAge)
	for _, c := range all {
		created := time.Unix(0, c.CreatedAt)
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING || created.After(newest) {
			continue
		}
		d := deadContainer{id: c.Id, name: c.GetMetadata().GetName(), created: created,
			unknown: c.State == runtimeapi.ContainerState_CONTAINER_UNKNOWN,
			podUID:  types.UID(c.Labels[kubetypes.KubernetesPodUIDLabel]), about: labelsAbout(c.Labels)}
		k := unit{d.podUID, d.name}
		units[k] = append(units[k], d)
	}
	for k, u := range units {
		sortNewestFirst(u)
		units[k] = u
	}

	if g.o.AllSourcesReady {
		for k, u := range units {
			if g.podOver(k.uid) {
				g.removeOldest(ctx, u, len(u))
				delete(units, k)
			}
		}
	}
	keepPerUnit := func(n int) {
		for k, u := range units {
			if len(u) > n {
				units[k] = g.removeOldest(ctx, u, len(u)-n)
			}
		}
	}
	if g.o.Policy.MaxPerPodContainer >= 0 {
		keepPerUnit(g.o.Policy.MaxPerPodContainer)
	}
	total := 0
	for _, u := range units {
		total += len(u)
	}
	if g.o.Policy.MaxContainers >= 0 && total > g.o.Policy.MaxContainers {
		// an equal share per unit (at least 1), then the oldest overall (:251-270)
		keepPerUnit(max(g.o.Policy.MaxContainers/len(units), 1))
		var flat []deadContainer
		for _, u := range units {
			flat = append(flat, u...)
		}
		if len(flat) > g.o.Policy.MaxContainers {
			sortNewestFirst(flat)
			g.removeOldest(ctx, flat, len(flat)-g.o.Policy.MaxContainers)
		}
	}
}

func sortNewestFirst(cs []deadContainer) {
	slices.SortStableFunc(cs, func(a, b deadContainer) int { return b.created.Compare(a.created) })
}

// removeOldest is removeOldestN (:129-157): cs is newest first; remove the
// last n and return the rest.
func (g *gc) removeOldest(ctx context.Context, cs []deadContainer, n int) []deadContainer {
	keep := len(cs) - n
	for _, c := range cs[keep:] {
		if c.unknown {
			id := kubecontainer.ContainerID{Type: "cri", ID: c.id}
			if err := g.m.killContainer(ctx, nil, id, c.name, ReasonUnknown, nil, nil, ""); err != nil {
				g.fail(fmt.Errorf("stop container %s (state unknown) before removing it: %w", cri.ShortID(c.id), err))
				continue
			}
		}
		if err := g.m.removeContainer(ctx, c.about, c.id); err != nil {
			g.fail(err)
			continue
		}
		g.res.Containers = append(g.res.Containers, c.id)
	}
	return cs[:keep]
}

// removeContainer is removeContainer (kuberuntime_container.go:1381-1426):
// the container's log first — the runtime writes it, but only the kubelet
// deletes it — then the container. Gone already is fine. a names its pod.
func (m *Manager) removeContainer(ctx context.Context, a about, id string) error {
	st, err := m.cri.ContainerStatus(ctx, a, id)
	switch {
	case isNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("ContainerStatus %s: %w", cri.ShortID(id), err)
	}
	if p := st.GetLogPath(); p != "" {
		// the log and its rotations (logManager.Clean)
		rotated, _ := filepath.Glob(p + ".*")
		for _, f := range append(rotated, p) {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("remove log of container %s: %w", cri.ShortID(id), err)
			}
		}
	}
	a = a.saying("CRI RemoveContainer %s/%s %s (and its log)", st.GetLabels()[kubetypes.KubernetesPodNameLabel], st.GetMetadata().GetName(), cri.ShortID(id))
	if err := m.cri.RemoveContainer(ctx, a, id); err != nil && !isNotFound(err) {
		return fmt.Errorf("RemoveContainer %s: %w", cri.ShortID(id), err)
	}
	return nil
}

// evictSandboxes is :281-326 with removeOldestNSandboxes and removeSandbox
// (:161-188).
func (g *gc) evictSandboxes(ctx context.Context) {
	containers, err := g.m.cri.ListContainers(ctx, onNode, &runtimeapi.ContainerFilter{LabelSelector: g.o.Selector})
	if err != nil {
		g.fail(fmt.Errorf("ListContainers: %w", err))
		return
	}
	sandboxes, err := g.m.cri.ListPodSandbox(ctx, onNode, &runtimeapi.PodSandboxFilter{LabelSelector: g.o.Selector})
	if err != nil {
		g.fail(fmt.Errorf("ListPodSandbox: %w", err))
		return
	}
	hasContainers := map[string]bool{}
	for _, c := range containers {
		hasContainers[c.PodSandboxId] = true
	}
	byPod := map[types.UID][]*runtimeapi.PodSandbox{}
	for _, s := range sandboxes {
		uid := types.UID(s.GetMetadata().GetUid())
		byPod[uid] = append(byPod[uid], s)
	}
	for uid, sbs := range byPod {
		slices.SortStableFunc(sbs, func(a, b *runtimeapi.PodSandbox) int { return cmp.Compare(b.CreatedAt, a.CreatedAt) })
		keep := 1 // a living pod keeps its newest sandbox, dead or not
		if g.podOver(uid) {
			keep = 0
		}
		for _, s := range sbs[min(keep, len(sbs)):] {
			if s.State == runtimeapi.PodSandboxState_SANDBOX_READY || hasContainers[s.Id] {
				continue // active
			}
			// StopPodSandbox first, in case nobody did (:176-182).
			on := sandboxAbout(s.GetMetadata())
			if err := g.m.cri.StopPodSandbox(ctx, on, s.Id); err != nil && !isNotFound(err) {
				g.fail(fmt.Errorf("StopPodSandbox %s before removing it: %w", cri.ShortID(s.Id), err))
				continue
			}
			on = on.saying("CRI RemovePodSandbox %s/%s %s", s.GetMetadata().GetNamespace(), s.GetMetadata().GetName(), cri.ShortID(s.Id))
			if err := g.m.cri.RemovePodSandbox(ctx, on, s.Id); err != nil && !isNotFound(err) {
				g.fail(fmt.Errorf("RemovePodSandbox %s: %w", cri.ShortID(s.Id), err))
				continue
			}
			g.res.Sandboxes = append(g.res.Sandboxes, s.Id)
		}
	}
}

// evictPodLogDirs is :330-346: the folder NAMESPACE_NAME_UID of each pod
// that is over (and only once all sources are ready). With a Selector,
// only folders whose namespace, name and UID match it.
func (g *gc) evictPodLogDirs() {
	if !g.o.AllSourcesReady || g.m.podLogsDir == "" {
		return
	}
	entries, err := os.ReadDir(g.m.podLogsDir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			g.fail(fmt.Errorf("pod log folder: %w", err))
		}
		return
	}
	for _, e := range entries {
		parts := strings.Split(e.Name(), "_") // parsePodUIDFromLogsDirectory (helpers.go:231)
		if len(parts) != 3 || !g.logDirInScope(parts[0], parts[1], parts[2]) || !g.o.Pods.ShouldPodContentBeRemoved(types.UID(parts[2])) {
			continue
		}
		p := filepath.Join(g.m.podLogsDir, e.Name())
		if err := os.RemoveAll(p); err != nil {
			g.fail(fmt.Errorf("remove pod logs: %w", err))
			continue
		}
		g.m.log("removed pod log folder %s", p)
		g.res.LogDirs = append(g.res.LogDirs, p)
	}
}

// logDirInScope checks a pod log folder (NAMESPACE_NAME_UID) against the
// selector's pod labels. Other keys (a node's label) cannot be read from a
// folder name: the caller keeps those pods' logs in a folder of their own
// (mycore/mykubelet gives each node one).
func (g *gc) logDirInScope(namespace, name, uid string) bool {
	fields := map[string]string{
		kubetypes.KubernetesPodNamespaceLabel: namespace,
		kubetypes.KubernetesPodNameLabel:      name,
		kubetypes.KubernetesPodUIDLabel:       uid,
	}
	for k, v := range g.o.Selector {
		if got, known := fields[k]; known && got != v {
			return false
		}
	}
	return true
}

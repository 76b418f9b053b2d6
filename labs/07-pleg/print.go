package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/pleg"
	"k8s.io/utils/clock"

	"kubelet-labs/mycore/runtime"
)

// printer keeps lines whole: the PLEG goroutine and ours both print.
type printer struct {
	mu sync.Mutex
	w  io.Writer
}

func newPrinter(w io.Writer) *printer { return &printer{w: w} }

func (p *printer) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *printer) section(title string) { p.printf("\n== %s ==", title) }

func stamp(t time.Time) string { return t.Format("15:04:05.000") }

// observedCache is the kubelet's pod cache (kubecontainer.NewCache) with
// its two writes made visible: Set, the status of one pod the PLEG
// re-inspected, and UpdateTime, "every pod is known up to this time". A pod
// worker's GetNewerThan(uid, t) returns once either is newer than t.
type observedCache struct {
	kubecontainer.Cache
	out   *printer
	clock clock.Clock
	quiet bool

	mu    sync.Mutex
	names map[string]string       // container or sandbox ID → "ns/pod container"
	set   map[types.UID]time.Time // last Set per pod
}

func observe(c kubecontainer.Cache, out *printer, clk clock.Clock) *observedCache {
	return &observedCache{Cache: c, out: out, clock: clk, names: map[string]string{}, set: map[types.UID]time.Time{}}
}

func (c *observedCache) Set(uid types.UID, st *kubecontainer.PodStatus, err error, t time.Time) bool {
	updated := c.Cache.Set(uid, st, err, t)
	c.mu.Lock()
	c.set[uid] = t
	if st != nil {
		for _, sb := range st.SandboxStatuses {
			c.names[sb.Id] = st.Namespace + "/" + st.Name + " sandbox"
		}
		for _, cs := range st.ContainerStatuses {
			c.names[cs.ID.ID] = st.Namespace + "/" + st.Name + " " + cs.Name
		}
	}
	c.mu.Unlock()
	if !c.quiet {
		what := "err " + fmt.Sprint(err)
		if st != nil {
			what = fmt.Sprintf("%s/%s: %d sandbox(es), %d container(s)", st.Namespace, st.Name, len(st.SandboxStatuses), len(st.ContainerStatuses))
		}
		c.out.printf("    cache.Set(%s) with the list's time %s", what, stamp(t))
	}
	return updated
}

func (c *observedCache) UpdateTime(t time.Time) {
	c.Cache.UpdateTime(t)
	if !c.quiet {
		c.out.printf("    cache.UpdateTime(%s): every pod's status is now known up to the relist's start", stamp(t))
	}
}

func (c *observedCache) name(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.names[id]; ok {
		return n
	}
	return "?"
}

func (c *observedCache) lastSet(uid types.UID) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.set[uid]
}

// event prints one live PLEG event with the cache entry it follows: the
// PLEG writes the pod's status first, then sends the event, so a pod
// worker woken by it finds the new status in the cache.
func (p *printer) event(ev *pleg.PodLifecycleEvent, cache *observedCache) {
	id, _ := ev.Data.(string)
	p.printf("%s  %-16s %-22s %.13s  (cache: status of %s)", stamp(time.Now()), ev.Type, cache.name(id), id, stamp(cache.lastSet(ev.ID)))
}

// differ shows what one relist compares: each container's state in the
// previous list and in this one, in the PLEG's four words (convertState,
// pkg/kubelet/pleg/generic.go:102-116), and the events that came out.
type differ struct {
	rt     *runtime.Runtime
	out    *printer
	events chan *pleg.PodLifecycleEvent
	prev   map[string]row
}

type row struct {
	pod, name string
	state     string
}

func newDiffer(rt *runtime.Runtime, out *printer, events chan *pleg.PodLifecycleEvent) *differ {
	return &differ{rt: rt, out: out, events: events, prev: map[string]row{}}
}

func (d *differ) relist(ctx context.Context, g *pleg.GenericPLEG, title string) {
	d.out.printf("\n%s", title)
	d.out.printf("  Relist(): GetPods(all) over CRI, diff with the last list, GetPodStatus of changed pods")
	g.Relist()
	now := d.snapshot(ctx)

	ids := map[string]bool{}
	for id := range now {
		ids[id] = true
	}
	for id := range d.prev {
		ids[id] = true
	}
	var sorted []string
	for id := range ids {
		sorted = append(sorted, id)
	}
	sort.Slice(sorted, func(i, j int) bool {
		a, b := rowOf(sorted[i], d.prev, now), rowOf(sorted[j], d.prev, now)
		return a.pod+a.name < b.pod+b.name
	})
	if len(sorted) == 0 {
		d.out.printf("  (the runtime has no pods)")
	} else {
		d.out.printf("  %-12s %-10s %-15s %-13s %s", "pod", "container", "id", "last relist", "this relist")
	}
	for _, id := range sorted {
		r := rowOf(id, d.prev, now)
		old, cur := stateOr(d.prev, id), stateOr(now, id)
		mark := ""
		if old != cur {
			mark = "  <- changed"
		}
		d.out.printf("  %-12s %-10s %-15.13s %-13s %s%s", r.pod, r.name, id, old, cur, mark)
	}
	var got []string
	for len(d.events) > 0 {
		ev := <-d.events
		id, _ := ev.Data.(string)
		got = append(got, fmt.Sprintf("%s(%.13s)", ev.Type, id))
	}
	if len(got) == 0 {
		got = []string{"none"}
	}
	d.out.printf("  events sent: %s", strings.Join(got, ", "))
	d.prev = now
}

// rowOf names a container from whichever list has it (a removed one is
// only in the previous list).
func rowOf(id string, lists ...map[string]row) row {
	for _, l := range lists {
		if r, ok := l[id]; ok {
			return r
		}
	}
	return row{}
}

// snapshot is the list the PLEG just saw, in its own words.
func (d *differ) snapshot(ctx context.Context) map[string]row {
	rows := map[string]row{}
	pods, err := d.rt.GetPods(ctx, true)
	if err != nil {
		d.out.printf("  GetPods: %v", err)
		return rows
	}
	for _, p := range pods {
		name := p.Namespace + "/" + p.Name
		for _, sb := range p.Sandboxes {
			rows[sb.ID.ID] = row{pod: name, name: "(sandbox)", state: plegState(sb.State)}
		}
		for _, c := range p.Containers {
			rows[c.ID.ID] = row{pod: name, name: c.Name, state: plegState(c.State)}
		}
	}
	return rows
}

// plegState is convertState (generic.go:102-116): CREATED counts as
// unknown, because the kubelet acts only on running and exited.
func plegState(s kubecontainer.State) string {
	switch s {
	case kubecontainer.ContainerStateRunning:
		return "running"
	case kubecontainer.ContainerStateExited:
		return "exited"
	}
	return "unknown"
}

func stateOr(m map[string]row, id string) string {
	if r, ok := m[id]; ok {
		return r.state
	}
	return "non-existent"
}

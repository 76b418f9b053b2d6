// Package plegview makes the kubelet's PLEG visible for lab 07: the pod
// cache with its two writes printed (Cache), what one relist compared, in
// the PLEG's own four states (Differ), one line per live event (Event), and
// the mock runtime the lab watches with the commands that make the PLEG
// speak from a second terminal (Mock, Guide). The PLEG itself is the
// kubelet's, imported; nothing here changes what it does.
package plegview

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/pleg"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/mycore/plegruntime"
)

// Stamp is the wall-clock (or fake-clock) time of a line, to the millisecond.
func Stamp(t time.Time) string { return t.Format("15:04:05.000") }

// Section prints a part's title.
func Section(out *labenv.Printer, title string) { out.Printf("\n== %s ==", title) }

// Cache is the kubelet's pod cache (kubecontainer.NewCache) with its two
// writes made visible: Set, the status of one pod the PLEG re-inspected,
// and UpdateTime, "every pod is known up to this time". A pod worker's
// GetNewerThan(uid, t) returns once either is newer than t.
type Cache struct {
	kubecontainer.Cache
	out *labenv.Printer
	// Quiet stops printing the writes (live: the event lines say which
	// cache entry they follow).
	Quiet bool

	mu    sync.Mutex
	names map[string]string       // container or sandbox ID → "ns/pod container"
	set   map[types.UID]time.Time // last Set per pod
}

// Observe wraps c.
func Observe(c kubecontainer.Cache, out *labenv.Printer) *Cache {
	return &Cache{Cache: c, out: out, names: map[string]string{}, set: map[types.UID]time.Time{}}
}

// Set is the PLEG writing one pod's status, stamped with the time of the
// list it came from.
func (c *Cache) Set(uid types.UID, st *kubecontainer.PodStatus, err error, t time.Time) bool {
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
	if !c.Quiet {
		what := "err " + fmt.Sprint(err)
		if st != nil {
			what = fmt.Sprintf("%s/%s: %d sandbox(es), %d container(s)", st.Namespace, st.Name, len(st.SandboxStatuses), len(st.ContainerStatuses))
		}
		c.out.Printf("    cache.Set(%s) with the list's time %s", what, Stamp(t))
	}
	return updated
}

// UpdateTime is the PLEG's last write of a relist.
func (c *Cache) UpdateTime(t time.Time) {
	c.Cache.UpdateTime(t)
	if !c.Quiet {
		c.out.Printf("    cache.UpdateTime(%s): every pod's status is now known up to the relist's start", Stamp(t))
	}
}

func (c *Cache) name(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.names[id]; ok {
		return n
	}
	return "?"
}

func (c *Cache) lastSet(uid types.UID) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.set[uid]
}

// Event prints one live PLEG event with the cache entry it follows: the
// PLEG writes the pod's status first, then sends the event, so a pod
// worker woken by it finds the new status in the cache.
func (c *Cache) Event(ev *pleg.PodLifecycleEvent) {
	id, _ := ev.Data.(string)
	c.out.Printf("%s  %-16s %-22s %.13s  (cache: status of %s)", Stamp(time.Now()), ev.Type, c.name(id), id, Stamp(c.lastSet(ev.ID)))
}

// Differ shows what one relist compares: each container's state in the
// previous list and in this one, in the PLEG's four words (convertState,
// pkg/kubelet/pleg/generic.go:102-116), and the events that came out.
type Differ struct {
	rt     *plegruntime.Runtime
	out    *labenv.Printer
	events chan *pleg.PodLifecycleEvent
	prev   map[string]row
	// prevPods is the previous list as pods, for plegruntime.RelistEvents
	// (the build-it stage pleg-relist): a line is printed only when it
	// disagrees with the events the kubelet's PLEG sent.
	prevPods map[types.UID]*kubecontainer.Pod
	// Sent has, per relist so far, the types of the events it sent
	// ("none" for none): what the lab records for make check LAB=07.
	Sent [][]string
}

type row struct {
	pod, name string
	state     string
}

// NewDiffer reads the same runtime as the PLEG and drains its events.
func NewDiffer(rt *plegruntime.Runtime, out *labenv.Printer, events chan *pleg.PodLifecycleEvent) *Differ {
	return &Differ{rt: rt, out: out, events: events, prev: map[string]row{}, prevPods: map[types.UID]*kubecontainer.Pod{}}
}

// Relist calls the PLEG's Relist() once and prints the table of what it
// compared and the events it sent.
func (d *Differ) Relist(ctx context.Context, g *pleg.GenericPLEG, title string) {
	d.out.Printf("\n%s", title)
	d.out.Printf("  Relist(): GetPods(all) over CRI, diff with the last list, GetPodStatus of changed pods")
	g.Relist()
	now, nowPods := d.snapshot(ctx)

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
		d.out.Printf("  (the runtime has no pods)")
	} else {
		d.out.Printf("  %-12s %-10s %-15s %-13s %s", "pod", "container", "id", "last relist", "this relist")
	}
	for _, id := range sorted {
		r := rowOf(id, d.prev, now)
		old, cur := stateOr(d.prev, id), stateOr(now, id)
		mark := ""
		if old != cur {
			mark = "  <- changed"
		}
		d.out.Printf("  %-12s %-10s %-15.13s %-13s %s%s", r.pod, r.name, id, old, cur, mark)
	}
	var got, kinds []string
	for len(d.events) > 0 {
		ev := <-d.events
		id, _ := ev.Data.(string)
		got = append(got, fmt.Sprintf("%s(%.13s)", ev.Type, id))
		kinds = append(kinds, string(ev.Type))
	}
	ours := d.relistEvents(nowPods)
	if !sameEvents(got, ours) {
		d.out.Printf("  plegruntime.RelistEvents (stage pleg-relist) computes %s; the kubelet's PLEG sent %s", orNone(ours), orNone(got))
	}
	if len(got) == 0 {
		got, kinds = []string{"none"}, []string{"none"}
	}
	d.Sent = append(d.Sent, kinds)
	d.out.Printf("  events sent: %s", strings.Join(got, ", "))
	d.prev, d.prevPods = now, nowPods
}

// relistEvents is what plegruntime.RelistEvents makes of the previous list
// and this one, pod by pod, without ContainerChanged, which the PLEG does
// not send (pkg/kubelet/pleg/generic.go:391-394).
func (d *Differ) relistEvents(now map[types.UID]*kubecontainer.Pod) []string {
	uids := map[types.UID]bool{}
	for uid := range d.prevPods {
		uids[uid] = true
	}
	for uid := range now {
		uids[uid] = true
	}
	var out []string
	for uid := range uids {
		for _, ev := range plegruntime.RelistEvents(d.prevPods[uid], now[uid]) {
			if ev.Type == pleg.ContainerChanged {
				continue
			}
			id, _ := ev.Data.(string)
			out = append(out, fmt.Sprintf("%s(%.13s)", ev.Type, id))
		}
	}
	return out
}

// sameEvents compares two lists of events regardless of the order of pods
// (the PLEG walks its records in map order).
func sameEvents(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func orNone(events []string) string {
	if len(events) == 0 {
		return "none"
	}
	return strings.Join(events, ", ")
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

// snapshot is the list the PLEG just saw, in its own words, and as pods.
func (d *Differ) snapshot(ctx context.Context) (map[string]row, map[types.UID]*kubecontainer.Pod) {
	rows := map[string]row{}
	byUID := map[types.UID]*kubecontainer.Pod{}
	pods, err := d.rt.GetPods(ctx, true)
	if err != nil {
		d.out.Printf("  GetPods: %v", err)
		return rows, d.prevPods // a failed list changes nothing, as for the PLEG
	}
	for _, p := range pods {
		byUID[p.ID] = p
		name := p.Namespace + "/" + p.Name
		for _, sb := range p.Sandboxes {
			rows[sb.ID.ID] = row{pod: name, name: "(sandbox)", state: plegState(sb.State)}
		}
		for _, c := range p.Containers {
			rows[c.ID.ID] = row{pod: name, name: c.Name, state: plegState(c.State)}
		}
	}
	return rows, byUID
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

package mykubelet

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// podRequests records, in order, the requests a client sends on pods as
// "VERB path".
type podRequests struct {
	rt   http.RoundTripper
	mu   sync.Mutex
	on   bool
	seen []string
}

func (p *podRequests) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.Contains(r.URL.Path, "/pods") {
		p.mu.Lock()
		if p.on {
			p.seen = append(p.seen, r.Method+" "+r.URL.Path)
		}
		p.mu.Unlock()
	}
	return p.rt.RoundTrip(r)
}

func (p *podRequests) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.on, p.seen = true, nil
}

func (p *podRequests) list() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

// TestDeletedPodKeepsItsIPAndCostsNoExtraPatch: a running pod deleted
// with its default grace keeps its IP in the API until it is gone, and
// costs the node the writes upstream's kubelet makes (issue 41): at
// most a PATCH as it starts terminating (the delete bumped
// metadata.generation, so observedGeneration changes), a PATCH of the
// terminal status, and the DELETE once it is terminated — no PATCH after
// the terminal one; each after a GET. The stopped sandbox has no IPs: upstream's
// SyncTerminatingPod keeps the ones from before the kill
// (preserveDataFromBeforeStopping, kubelet.go:2361); without that the
// terminal status cleared podIP and SyncTerminatedPod's status, from the
// pod cache that still has the IP, put it back with one more PATCH.
func TestDeletedPodKeepsItsIPAndCostsNoExtraPatch(t *testing.T) {
	n := newNode(t, "t-delete-requests")
	cfg := rest.CopyConfig(n.config)
	rec := &podRequests{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { rec.rt = rt; return rec })
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.client = client
	// No housekeeping, so no container GC: the pod's dead sandbox stays
	// in the runtime (and the pod cache) until long after it is gone, as
	// with the kubelet's 1-minute GC period.
	n.start(t, Options{HousekeepingPeriod: time.Hour})
	ns := n.namespace(t)
	// Ends at once on SIGTERM, with 0: Succeeded, as hack/kubeletbench's pods.
	n.createPod(t, ns, "web", 30, "trap 'exit 0' TERM; while true; do sleep 1; done")
	running := n.runningPod(t, ns, "web")
	if running.Status.PodIP == "" {
		t.Fatalf("pod web Running without a podIP: %+v", running.Status)
	}

	ctx, cancel := context.WithTimeout(context.Background(), patient)
	defer cancel()
	w, err := n.admin.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", "web").String(), ResourceVersion: running.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	rec.start()
	if err := n.admin.CoreV1().Pods(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var seen []string // each version of the pod: phase and podIP
	lostIP := ""
	for gone := false; !gone; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch ended before pod web was gone; versions seen:\n%s", strings.Join(seen, "\n"))
			}
			p, isPod := ev.Object.(*v1.Pod)
			if !isPod {
				t.Fatalf("watch: %v %+v", ev.Type, ev.Object)
			}
			line := fmt.Sprintf("%s phase %s podIP %q", ev.Type, p.Status.Phase, p.Status.PodIP)
			seen = append(seen, line)
			if p.Status.PodIP == "" && lostIP == "" {
				lostIP = line
			}
			gone = ev.Type == watch.Deleted
		case <-ctx.Done():
			t.Fatalf("pod web not gone within %s; versions seen:\n%s", patient, strings.Join(seen, "\n"))
		}
	}
	got := rec.list()
	t.Logf("the node's requests on pods, from the delete until the pod was gone:\n%s", strings.Join(got, "\n"))
	if lostIP != "" {
		t.Errorf("pod web lost its IP (%s) before it was gone (was %s); versions seen:\n%s", lostIP, running.Status.PodIP, strings.Join(seen, "\n"))
	}
	count := map[string]int{}
	for _, r := range got {
		count[strings.Fields(r)[0]]++
	}
	// Coalesced syncs may send fewer; upstream sends no more writes than
	// these. Reads may be one more: SyncTerminatedPod posts its final
	// status, then calls TerminatePod (kubelet.go:2474, :2521) — two
	// versions, and when the status manager syncs between them it reads
	// the pod, finds nothing to post and may not delete it yet (not
	// finished), as upstream's does. So the bound on GETs is 4, the one on
	// writes exact.
	if count[http.MethodPatch] > 2 || count[http.MethodDelete] != 1 || count[http.MethodGet] > 4 || len(got) != count[http.MethodGet]+count[http.MethodPatch]+count[http.MethodDelete] {
		t.Errorf("the node sent %d PATCHes, %d DELETEs and %d GETs on pods (%d requests), want at most 2 PATCHes, one DELETE and 4 GETs (upstream's GET+PATCH, GET+PATCH terminal, GET+DELETE, and a GET of a sync between the final status and TerminatePod):\n%s",
			count[http.MethodPatch], count[http.MethodDelete], count[http.MethodGet], len(got), strings.Join(got, "\n"))
	}
	if len(got) == 0 || !strings.HasPrefix(got[len(got)-1], http.MethodDelete) {
		t.Errorf("want the node's final DELETE last:\n%s", strings.Join(got, "\n"))
	}
}

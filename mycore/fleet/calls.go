package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// Call is one kind of API request: the verb as the apiserver's audit log
// and metrics name it, the resource (with subresource, "pods/status") and
// the HTTP status code of the answer (0: no answer — a timeout or a
// transport error; -1: cancelled by its caller, as when a node stops).
type Call struct {
	Verb     string `json:"verb"`
	Resource string `json:"resource"`
	Code     int    `json:"code"`
}

// CallCount is how many requests of one kind were made.
type CallCount struct {
	Call
	Count int64 `json:"count"`
}

// Calls counts every request made through the rest.Configs it wraps: what
// fleet mode costs the apiserver, and which of it was wasted.
type Calls struct {
	mu sync.Mutex
	n  map[Call]int64
}

// NewCalls returns an empty counter.
func NewCalls() *Calls { return &Calls{n: map[Call]int64{}} }

// Wrap makes every client built from cfg count its requests here.
func (c *Calls) Wrap(cfg *rest.Config) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return wrap(rt, func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			code := 0
			switch {
			case err == nil:
				code = resp.StatusCode
			case errors.Is(err, context.Canceled):
				code = -1
			}
			verb, resource := Classify(req.Method, req.URL.Path, req.URL.Query().Get("watch") == "true")
			c.mu.Lock()
			c.n[Call{Verb: verb, Resource: resource, Code: code}]++
			c.mu.Unlock()
			return resp, err
		})
	})
}

// wrapper is a RoundTripper around another, as client-go's own wrappers
// are: it names the one it wraps (utilnet.RoundTripperWrapper), so that
// client-go can reach the transport underneath to cancel a request whose
// timeout expired. Without that, every timed-out request logs "Warning:
// unable to cancel request" — a thousand nodes' heartbeats timing out on
// a busy apiserver logged 1,600 of those lines in one benchmark run.
type wrapper struct {
	next http.RoundTripper
	f    func(*http.Request) (*http.Response, error)
}

func wrap(next http.RoundTripper, f func(*http.Request) (*http.Response, error)) http.RoundTripper {
	return &wrapper{next: next, f: f}
}

func (w *wrapper) RoundTrip(r *http.Request) (*http.Response, error) { return w.f(r) }

// WrappedRoundTripper implements utilnet.RoundTripperWrapper.
func (w *wrapper) WrappedRoundTripper() http.RoundTripper { return w.next }

// Counts is a sorted copy of the counters.
func (c *Calls) Counts() []CallCount {
	c.mu.Lock()
	out := make([]CallCount, 0, len(c.n))
	for k, v := range c.n {
		out = append(out, CallCount{Call: k, Count: v})
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Resource != b.Resource {
			return a.Resource < b.Resource
		}
		if a.Verb != b.Verb {
			return a.Verb < b.Verb
		}
		return a.Code < b.Code
	})
	return out
}

// Wasted are the requests that did nothing: deletes of objects that were
// already gone (404) and writes refused because someone else changed the
// object first (409 Conflict).
type Wasted struct {
	DeletesOfGone int64 `json:"deletesOfGone"`
	Conflicts     int64 `json:"conflicts"`
}

// WastedOf sums the wasted requests among counts.
func WastedOf(counts []CallCount) Wasted {
	var w Wasted
	for _, c := range counts {
		switch {
		case c.Verb == "DELETE" && c.Code == http.StatusNotFound:
			w.DeletesOfGone += c.Count
		case c.Code == http.StatusConflict:
			w.Conflicts += c.Count
		}
	}
	return w
}

// Total is the number of requests among counts.
func Total(counts []CallCount) int64 {
	var n int64
	for _, c := range counts {
		n += c.Count
	}
	return n
}

// MarshalJSON writes the counts as a list.
func (c *Calls) MarshalJSON() ([]byte, error) { return json.Marshal(c.Counts()) }

// Classify names a request the way the apiserver's metrics do
// (apiserver_request_total's verb and resource labels): GET of a named
// object is GET, of a collection LIST (WATCH with ?watch=true), DELETE of a
// collection DELETECOLLECTION; the resource carries its subresource.
func Classify(method, path string, watch bool) (verb, resource string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	// /api/v1/... or /apis/GROUP/VERSION/...
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return method, path // /healthz, /metrics, /version ...
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:] // namespaces/NS/RESOURCE/...
	}
	named := len(parts) >= 2
	if len(parts) > 0 {
		resource = parts[0]
	}
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	verb = method
	switch {
	case method == http.MethodGet && watch:
		verb = "WATCH"
	case method == http.MethodGet && !named:
		verb = "LIST"
	case method == http.MethodDelete && !named:
		verb = "DELETECOLLECTION"
	}
	return verb, resource
}

// String is one line per kind of request, for logs.
func (c CallCount) String() string {
	return fmt.Sprintf("%-16s %-22s %3d  %d", c.Verb, c.Resource, c.Code, c.Count)
}

var _ utilnet.RoundTripperWrapper = (*wrapper)(nil)

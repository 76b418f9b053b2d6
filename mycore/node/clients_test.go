package node

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// countingLimiter is a client's rate limiter that lets every call through
// at once and counts the calls that asked it.
type countingLimiter struct{ n atomic.Int32 }

func (l *countingLimiter) TryAccept() bool { l.n.Add(1); return true }
func (l *countingLimiter) Accept()         { l.n.Add(1) }
func (l *countingLimiter) Stop()           {}
func (l *countingLimiter) QPS() float32    { return KubeAPIQPS }
func (l *countingLimiter) Wait(context.Context) error {
	l.n.Add(1)
	return nil
}

// answerAll is an apiserver in a RoundTripper: every call gets an empty
// object of the kind asked, so no server or port is needed.
type answerAll struct{}

func (answerAll) RoundTrip(r *http.Request) (*http.Response, error) {
	body := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`
	if strings.Contains(r.URL.Path, "/events") {
		body = `{"apiVersion":"v1","kind":"Event","metadata":{"name":"e"}}`
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
}

// TestEventsHaveTheirOwnLimiter: the node's client sends its events
// through a limiter of their own, as the kubelet's EventClient
// (cmd/kubelet/app/server.go:727-730): an event takes nothing from the
// bucket the status manager's pod GETs and PATCHes wait on, so a hundred
// pods' Pulled, Created and Started do not delay their status posts.
func TestEventsHaveTheirOwnLimiter(t *testing.T) {
	limiter := &countingLimiter{}
	cfg := &rest.Config{Host: "https://apiserver.invalid", Transport: answerAll{}, RateLimiter: limiter}
	a, err := NewAgent(cfg, AgentOptions{Node: Config{Name: "n1"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := a.Client.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := limiter.n.Load(); got != 1 {
		t.Fatalf("a pod GET asked the node's limiter %d times, want 1", got)
	}
	ev := &v1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "default"}, Reason: "Started"}
	if _, err := a.Client.CoreV1().Events("default").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Client.EventsV1().Events("default").Get(ctx, "e", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := limiter.n.Load(); got != 1 {
		t.Fatalf("events asked the node's limiter too (%d calls, want the pod GET's 1 only): events and pod status posts share one rate limit; the kubelet gives events a client of their own (eventRecordQPS %d, eventBurst %d)", got, EventRecordQPS, EventBurst)
	}
	if qps := a.Client.EventsV1().RESTClient().GetRateLimiter().QPS(); qps != EventRecordQPS {
		t.Errorf("the events' own limiter allows %g a second, want the kubelet's eventRecordQPS %d", qps, EventRecordQPS)
	}
}

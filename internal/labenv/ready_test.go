package labenv

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// notReadyBody is what kube-apiserver's /readyz says while its etcd check
// fails (as it did for kind under QEMU's emulator).
const notReadyBody = "[+]ping ok\n[+]log ok\n[-]etcd failed: reason withheld\n[+]etcd-readiness ok\nreadyz check failed\n"

// readyzServer answers /readyz "not ready" notReady times, then ok; it
// counts the asks.
func readyzServer(t *testing.T, notReady int32) (rest.Interface, *atomic.Int32) {
	var asks atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		if asks.Add(1) <= notReady {
			http.Error(w, notReadyBody, http.StatusInternalServerError)
			return
		}
		w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}})
	if err != nil {
		t.Fatal(err)
	}
	return client.Discovery().RESTClient(), &asks
}

func patience(t *testing.T, wait, retry time.Duration) {
	oldWait, oldRetry := readyPatience, readyRetry
	readyPatience, readyRetry = wait, retry
	t.Cleanup(func() { readyPatience, readyRetry = oldWait, oldRetry })
}

// TestWaitReadyWaitsForAnApiserverThatAnswersNotReady: a lab started while
// the apiserver settles does not fail on its first "not ready".
func TestWaitReadyWaitsForAnApiserverThatAnswersNotReady(t *testing.T) {
	patience(t, time.Hour, time.Millisecond)
	c, asks := readyzServer(t, 2)
	if err := waitReady(context.Background(), c); err != nil {
		t.Fatalf("waitReady: %v, want it to wait out two 'not ready' answers", err)
	}
	if n := asks.Load(); n != 3 {
		t.Errorf("asked /readyz %d times, want 3", n)
	}
}

// TestWaitReadyNamesTheFailedCheck: when the patience is spent, the error
// is one line that names what /readyz said failed, not its whole body.
func TestWaitReadyNamesTheFailedCheck(t *testing.T) {
	patience(t, 0, time.Millisecond)
	c, asks := readyzServer(t, 1000)
	err := waitReady(context.Background(), c)
	if err == nil || !strings.Contains(err.Error(), "/readyz says [-]etcd failed: reason withheld") || strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "[+]") {
		t.Errorf("waitReady = %v, want one line naming the failed check", err)
	}
	if n := asks.Load(); n != 1 {
		t.Errorf("asked /readyz %d times with no patience, want 1", n)
	}
}

// TestWaitReadyDoesNotWaitForNoAnswer: nothing listening is lab 00 not
// running — say so at once rather than retry.
func TestWaitReadyDoesNotWaitForNoAnswer(t *testing.T) {
	patience(t, time.Hour, time.Hour) // a retry would hang the test
	closed := httptest.NewTLSServer(http.NotFoundHandler())
	closed.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: closed.URL})
	if err != nil {
		t.Fatal(err)
	}
	if err := waitReady(context.Background(), client.Discovery().RESTClient()); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("waitReady on a closed port = %v, want connection refused at once", err)
	}
}

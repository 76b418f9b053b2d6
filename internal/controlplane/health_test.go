package controlplane

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// readyz answers like kube-apiserver's /readyz with failing[0] checks still
// failing; each answer after every `step` answers turns one more ok.
func readyz(failing, step int) http.HandlerFunc {
	var calls atomic.Int64
	return func(w http.ResponseWriter, _ *http.Request) {
		n := calls.Add(1)
		left := failing
		if step > 0 {
			left = max(0, failing-int(n)/step)
		}
		if left == 0 {
			fmt.Fprint(w, "[+]ping ok\nreadyz check passed")
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, "[+]ping ok\n")
		for i := range left {
			fmt.Fprintf(w, "[-]poststarthook/hook-%d failed: not finished\n", i)
		}
		fmt.Fprint(w, "readyz check failed")
	}
}

// An apiserver whose start-up hooks finish one by one, more slowly in all
// than the timeout (as under QEMU without KVM), is waited for; one stuck on
// a hook fails, and the error names the hook.
func TestWaitHealthyWaitsWhileChecksTurnOK(t *testing.T) {
	alive := &process{name: "kube-apiserver", logPath: "/x/kube-apiserver.log", done: make(chan struct{})}
	const timeout = time.Second
	// 4 hooks, one every 8 polls (~0.8 s at the 100 ms tick): ~3.2 s > timeout
	slow := httptest.NewServer(readyz(4, 8))
	defer slow.Close()
	start := time.Now()
	if err := waitHealthy(context.Background(), alive, slow.Client(), slow.URL, "ok", timeout); err != nil {
		t.Fatalf("a slow but progressing apiserver: %v", err)
	}
	if took := time.Since(start); took < timeout {
		t.Logf("progress outran the timeout: %s (the test shows nothing on so fast a run)", took)
	}

	stuck := httptest.NewServer(readyz(2, 0))
	defer stuck.Close()
	err := waitHealthy(context.Background(), alive, stuck.Client(), stuck.URL, "ok", timeout)
	if err == nil || !strings.Contains(err.Error(), "[-]poststarthook/hook-1 failed") || !strings.Contains(err.Error(), "/x/kube-apiserver.log") {
		t.Fatalf("a stuck apiserver: %v, want an error naming the failing checks and the log", err)
	}
}

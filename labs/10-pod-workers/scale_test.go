package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mylib/fakecri"
)

// TestThousandPods measures the built lab with 1,000 pods bound to its
// node: how fast they go through the workers into the mock runtime and
// out again, and the lab's memory. It logs numbers and asserts only that
// every pod arrives and leaves.
func TestThousandPods(t *testing.T) {
	if testing.Short() {
		t.Skip("a measurement with 1,000 pods; run without -short")
	}
	const n, nodeName, ns = 1000, "t10-thousand", "t10-scale"
	ctx := context.Background()
	cp := testenv.ControlPlane(t)
	bin := testenv.BuildLab(t, "./labs/10-pod-workers")
	lab := testenv.StartProgram(t, bin, []string{state.EnvVar + "=" + t.TempDir(), "KUBECONFIG=" + cp.AdminKubeconfig()},
		"-node-name", nodeName, "-quiet")
	lab.WaitFor(t, "watching pods", 2*time.Minute)
	m := regexp.MustCompile(`control API: (\S+)\)`).FindStringSubmatch(lab.Output())
	if m == nil {
		t.Fatalf("no control socket in the output:\n%s", lab.Output())
	}
	mock := fakecri.NewControlClient(m[1])
	defer mock.Close()
	pid := lab.Cmd.Process.Pid
	idle := memory(t, pid)

	// The test's own client is not the bottleneck: no client-side limit.
	cfg := testenv.AdminConfig(t)
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		_ = admin.CoreV1().Nodes().Delete(ctx, nodeName, metav1.DeleteOptions{})
	})
	testenv.WaitServiceAccount(t, admin, ns)

	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				p := testPod("p"+strconv.Itoa(i), nodeName, v1.RestartPolicyAlways, 1, "while true; do sleep 1; done")
				p.Namespace = ns
				if _, err := admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	created := time.Since(start)

	count := func() (sandboxes, running int) {
		s, err := mock.State(ctx)
		if err != nil {
			t.Fatalf("mock state: %v", err)
		}
		for _, sb := range s.Sandboxes {
			if sb.Namespace == ns && sb.State == "SANDBOX_READY" {
				sandboxes++
			}
		}
		for _, c := range s.Containers {
			if c.State == "CONTAINER_RUNNING" {
				running++
			}
		}
		return sandboxes, running
	}
	testenv.PollTrue(t, "1,000 pods running in the mock", 5*time.Minute, func() bool { sb, c := count(); return sb == n && c == n })
	up := time.Since(start)
	busy := memory(t, pid)

	start = time.Now()
	if err := admin.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.PollTrue(t, "every pod stopped and removed from the mock", 5*time.Minute, func() bool {
		s, err := mock.State(ctx)
		return err == nil && len(s.Sandboxes) == 0 && len(s.Containers) == 0
	})
	down := time.Since(start)
	testenv.PollTrue(t, "every pod deleted from the apiserver", 5*time.Minute, func() bool {
		l, err := admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0
	})
	gone := time.Since(start)
	lab.WaitFor(t, "workers: 0 sync, 0 terminating, 0 terminated", time.Minute)
	after := memory(t, pid)

	if raceBuilt {
		t.Logf("the lab was built with -race (as this test runs): the numbers below are the race detector's, several times the lab's own memory and slower; run without -race to measure the lab")
	}
	t.Logf("%d pods: created in the apiserver in %s; all running in the mock %s after the first create (%.0f pods/s)",
		n, created.Round(time.Millisecond), up.Round(time.Millisecond), n/up.Seconds())
	t.Logf("delete: all stopped and removed from the mock in %s (%.0f pods/s); gone from the apiserver in %s (%.0f pods/s; the lab deletes at the kubelet's 50 requests/s)",
		down.Round(time.Millisecond), n/down.Seconds(), gone.Round(time.Millisecond), n/gone.Seconds())
	t.Logf("lab 10 memory: RSS %s idle, %s with %d pods running, %s after they left; peak RSS %s",
		mib(idle.rss), mib(busy.rss), n, mib(after.rss), mib(after.peak))

	lab.Signal(syscall.SIGTERM)
	if !lab.WaitExit(time.Minute) || lab.ExitCode() != 0 {
		t.Errorf("lab did not exit cleanly on SIGTERM:\n%s", lab.Output())
	}
}

type mem struct{ rss, peak int64 }

// memory reads the process's resident set (VmRSS) and its peak (VmHWM).
func memory(t *testing.T, pid int) mem {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	var m mem
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			m.rss = kb << 10
		case "VmHWM:":
			m.peak = kb << 10
		}
	}
	return m
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

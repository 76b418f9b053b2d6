package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"kubelet-labs/hack/internal/benchkit"
	"kubelet-labs/hack/internal/benchkit/benchtest"
	"kubelet-labs/internal/containerdenv"
	"kubelet-labs/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// small is a run at the test's size: 4 pods, one round, on the test
// control plane; a busy CI machine is said, not refused.
func small(t *testing.T, runtimes string) options {
	return options{cp: testenv.ControlPlane(t), dir: t.TempDir(), out: filepath.Join(t.TempDir(), "table.txt"),
		pods: 4, RoundFlags: benchkit.RoundFlags{Rounds: 1}, runtimes: runtimes, kubelets: "real,ours", idle: 2 * time.Second, timeout: 3 * time.Minute,
		qps: 100, burst: 100, LoadFlags: benchkit.LoadFlags{MaxLoad: 1, AllowBusy: true}}
}

// TestMockSmall runs both kubelets on the mock CRI at 4 pods: each pod
// goes Running, Ready and, deleted, gone; the proxy saw one RunPodSandbox
// per pod from each kubelet; the table has a column for each, with a
// non-zero number in every row that must have one. Timings are logged,
// not asserted.
func TestMockSmall(t *testing.T) {
	runSmall(t, small(t, "mock"))
}

// TestContainerdSmall is the same on containerd 2.2, as root; it skips,
// saying why, where containerd is not up or the test is not root.
func TestContainerdSmall(t *testing.T) {
	// go test ./... runs other packages' tests beside this one, and they
	// start pods on the same containerd at any moment: the real kubelet
	// would stop them (and the guard this one). Run alone, on request.
	if os.Getenv("KUBELETBENCH_CONTAINERD") != "1" {
		t.Skip("the real kubelet stops every pod of its runtime it does not run, and other packages' tests run pods on the same containerd: run it alone, as root, with KUBELETBENCH_CONTAINERD=1 go test ./hack/kubeletbench -run TestContainerdSmall")
	}
	env, err := checkContainerd()
	if err != nil {
		t.Skipf("no containerd run here: %v", err)
	}
	// The real kubelet stops every pod of its runtime it does not run:
	// a containerd that runs anyone else's pods is not the test's.
	ctx0, cancel0 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel0()
	if err := prepareContainerd(ctx0, strings.TrimPrefix(env.Endpoint, "unix://")); err != nil {
		t.Skipf("no containerd run here: %v", err)
	}
	runSmall(t, small(t, "containerd"))
}

// runSmall runs the benchmark as o says, then checks its results and its
// table: each pod Running, Ready and gone under each kubelet, one
// RunPodSandbox per pod, and a non-zero number in every row of a
// kubelet's own work.
func runSmall(t *testing.T, o options) {
	t.Helper()
	results := benchtest.Run(t, 12*time.Minute, func(ctx context.Context, w io.Writer) ([]*result, error) { return run(ctx, o, w) })
	if len(results) != 2 || results[0].kubelet != "real" || results[1].kubelet != "ours" {
		t.Fatalf("want the real kubelet's run, then ours; got %d runs", len(results))
	}
	for _, r := range results {
		if r.running != o.pods || r.ready != o.pods || r.gone != o.pods {
			t.Errorf("%s: %d pods seen Running, %d Ready, %d gone; want %d each", r.kubelet, r.running, r.ready, r.gone, o.pods)
		}
		if n := r.cri[methodRunSandbox]; n != int64(o.pods) {
			t.Errorf("%s: the proxy counted %d RunPodSandbox calls for %d pods; want one per pod\n%s", r.kubelet, n, o.pods, methodCounts(r.cri))
		}
	}

	raw, err := os.ReadFile(o.out)
	if err != nil {
		t.Fatal(err)
	}
	table := string(raw)
	rows, ok := benchtest.Rows(table, func(l string) bool { return strings.Contains(l, "real kubelet, ") && strings.Contains(l, "ours, ") })
	if !ok {
		t.Fatalf("no header naming both kubelets:\n%s", table)
	}
	// Every measure of a kubelet's own work is non-zero in both columns.
	nonZero := []string{"pod create → Running, p50", "pod create → Ready, p50", "all Running and Ready", "all gone",
		"API requests per pod, create", "API requests per pod, delete", "CRI calls per pod, create", "CRI calls per pod, delete",
		"of them RunPodSandbox", "ListPodSandbox per second, idle", "peak RSS", "heap and stacks (RssAnon)",
		"the program's own pages (RssFile)", "CPU seconds, start → all gone"}
	zero := regexp.MustCompile(`^0(\.0+)?( ms| s| MiB)?$`)
	for _, want := range nonZero {
		found := false
		for _, cells := range rows {
			if !strings.Contains(cells[0], want) {
				continue
			}
			found = true
			if len(cells) != 3 {
				t.Errorf("row %q: want a label and a value per kubelet", cells)
				continue
			}
			for _, c := range cells[1:] {
				if zero.MatchString(c) {
					t.Errorf("row %q: a zero", cells)
				}
			}
		}
		if !found {
			t.Errorf("the table lacks the row %q:\n%s", want, table)
		}
	}
	if !strings.Contains(table, "ours ÷ real kubelet") {
		t.Errorf("the table lacks ours against the real kubelet:\n%s", table)
	}
}

// TestRefusesContainerd: without containerd's socket, or without root,
// a run on containerd stops before anything starts, in one line that
// says what to do.
func TestRefusesContainerd(t *testing.T) {
	defer func(l func() (containerdenv.Env, error), u func() int) { loadContainerd, geteuid = l, u }(loadContainerd, geteuid)
	missing := filepath.Join(t.TempDir(), "containerd.sock")
	loadContainerd = func() (containerdenv.Env, error) { return containerdenv.Env{Endpoint: "unix://" + missing}, nil }
	geteuid = func() int { return 0 }
	o := options{pods: 1, RoundFlags: benchkit.RoundFlags{Rounds: 1}, runtimes: "containerd", kubelets: "real", idle: time.Second, timeout: time.Minute, qps: 1, burst: 1, LoadFlags: benchkit.LoadFlags{MaxLoad: 1}}
	_, err := run(context.Background(), o, &testenv.SyncBuffer{})
	if err == nil || !strings.Contains(err.Error(), missing+" is missing") || !strings.Contains(err.Error(), "sudo scripts/containerd-up.sh") || strings.Contains(err.Error(), "\n") {
		t.Errorf("no socket: got %v, want one line naming the socket and `sudo scripts/containerd-up.sh`", err)
	}

	if err := os.WriteFile(missing, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	geteuid = func() int { return 1000 }
	_, err = run(context.Background(), o, &testenv.SyncBuffer{})
	if err == nil || !strings.Contains(err.Error(), "not root") || strings.Contains(err.Error(), "\n") {
		t.Errorf("not root: got %v, want one line saying root is needed", err)
	}

	loadContainerd = func() (containerdenv.Env, error) { return containerdenv.Env{}, errors.New("no env file") }
	if _, err := run(context.Background(), o, &testenv.SyncBuffer{}); err == nil || !strings.Contains(err.Error(), "sudo scripts/containerd-up.sh") {
		t.Errorf("no env file: got %v", err)
	}
}

// TestBadFlags: a clear error before anything starts.
func TestBadFlags(t *testing.T) {
	valid := options{pods: 1, RoundFlags: benchkit.RoundFlags{Rounds: 1}, runtimes: "mock", kubelets: "real", idle: time.Second, timeout: time.Minute, qps: 1, burst: 1, LoadFlags: benchkit.LoadFlags{MaxLoad: 1}}
	benchtest.CheckRefused(t, valid, run, []benchtest.Refused[options]{
		{Edit: func(o *options) { o.pods = 0 }, Want: "--pods 0"},
		{Edit: func(o *options) { o.pods = 111 }, Want: "maxPods"},
		{Edit: func(o *options) { o.Rounds = 0 }, Want: "--rounds 0"},
		{Edit: func(o *options) { o.runtimes = "containerd,docker" }, Want: `--runtimes "containerd,docker"`},
		{Edit: func(o *options) { o.kubelets = "real,real" }, Want: `--kubelets "real,real"`},
		{Edit: func(o *options) { o.idle = 0 }, Want: "--idle 0s"},
		{Edit: func(o *options) { o.MaxLoad = 0 }, Want: "--max-load 0"},
	})
}

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelet-labs/internal/controlplane"
	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/node"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The demo, fast: our own control plane with a 20 s grace period, nodes
// with a 20 s lease renewed every 5 s (the grace must stay well above the
// renew interval, or nodes flap NotReady between beats), 6 s of
// heartbeats, then silence.
const (
	grace        = 20 * time.Second
	leaseSeconds = 20
)

func ownControlPlane(t *testing.T) *controlplane.ControlPlane {
	return testenv.OwnControlPlane(t, grace)
}

// TestReadyUnknownReady: True → (heartbeats stop) → Unknown after about the
// grace period → (heartbeats resume) → True, once in-process and once as the
// built program, side by side.
func TestReadyUnknownReady(t *testing.T) {
	cp := ownControlPlane(t)
	stateDir := t.TempDir()
	old, had := os.LookupEnv("LABS_STATE_DIR")
	os.Setenv("LABS_STATE_DIR", stateDir)
	t.Cleanup(func() {
		if had {
			os.Setenv("LABS_STATE_DIR", old)
		} else {
			os.Unsetenv("LABS_STATE_DIR")
		}
	})
	args := []string{"--node-lease-duration-seconds=" + strconv.Itoa(leaseSeconds), "--renew-for=6s", "--timeout=90s"}

	t.Run("in-process", func(t *testing.T) {
		t.Parallel()
		var out bytes.Buffer
		tl, err := run(context.Background(), options{
			kubeconfig: cp.AdminKubeconfig(), nodeName: "t02-a", leaseSeconds: leaseSeconds,
			renewFor: 6 * time.Second, resume: true, timeout: 90 * time.Second,
		}, labenv.NewPrinter(&out))
		t.Logf("output:\n%s", out.String())
		if err != nil {
			t.Fatal(err)
		}
		if tl.RenewInterval != 5*time.Second {
			t.Errorf("renew interval %s, want 5s (0.25 × 20s)", tl.RenewInterval)
		}
		var before []time.Time // renewals before the stop
		for _, r := range tl.Renewals {
			if r.Before(tl.StoppedAt) {
				before = append(before, r)
			}
		}
		for i := 1; i < len(before); i++ {
			if d := before[i].Sub(before[i-1]); d < 4500*time.Millisecond || d > 6*time.Second {
				t.Errorf("renewals %s apart, want ~5s", d)
			}
		}
		if len(before) < 2 || len(before) > 3 {
			t.Errorf("%d renewals in 6s, want 2 (at 0s and 5s)", len(before))
		}
		if tl.Unknown.Status != v1.ConditionUnknown || tl.Unknown.Reason != "NodeStatusUnknown" {
			t.Errorf("after the stop: %+v, want Unknown/NodeStatusUnknown", tl.Unknown)
		}
		d := tl.NotReadyAfter()
		t.Logf("lease stop → Ready=Unknown: %.1fs with a %s grace period", d.Seconds(), grace)
		if d < grace-time.Second || d > grace+5*time.Second {
			t.Errorf("Unknown %s after the last renewal, want about the grace period %s", d, grace)
		}
		if back := tl.ReadyAt.Sub(tl.ResumedAt); back > 5*time.Second {
			t.Errorf("Ready again %s after resuming", back)
		}
		admin, err := cp.AdminClient()
		if err != nil {
			t.Fatal(err)
		}
		n, err := admin.CoreV1().Nodes().Get(context.Background(), "t02-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c := node.GetCondition(&n.Status, v1.NodeReady); c == nil || c.Status != v1.ConditionTrue {
			t.Errorf("Ready at the end: %+v", c)
		}
		for _, ct := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
			if c := node.GetCondition(&n.Status, ct); c == nil || c.Status != v1.ConditionFalse {
				t.Errorf("%s at the end: %+v (the lifecycle controller set it Unknown; the node must set it back)", ct, c)
			}
		}
	})

	// The program renews with our Renewer (mycore/lease, the lease-renew
	// build-it stage's code), the in-process run with upstream's lease
	// controller: the story must be the same.
	t.Run("program", func(t *testing.T) {
		t.Parallel()
		bin := testenv.BuildLab(t, "./labs/02-node-lease")
		out, code := testenv.RunProgram(t, bin, []string{"KUBECONFIG=" + cp.AdminKubeconfig(), "LABS_STATE_DIR=" + stateDir},
			append(args, "--node-name=t02-b", "--lease-renewer=ours")...)
		t.Logf("output:\n%s", out)
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
		m := regexp.MustCompile(`Ready=Unknown at \S+ \(\+([0-9.]+)s\); Ready=True again ([0-9.]+)s after`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no summary line")
		}
		secs, _ := strconv.ParseFloat(m[1], 64)
		t.Logf("lease stop → Ready=Unknown: %ss with a %s grace period", m[1], grace)
		if d := time.Duration(secs * float64(time.Second)); d < grace-time.Second || d > grace+5*time.Second {
			t.Errorf("Unknown %s after the last renewal, want about %s", d, grace)
		}
		for _, want := range []string{"renewed every 5s (0.25 × 20s)", "lease updated", "NodeStatusUnknown: Kubelet stopped posting node status.", "Ready=True  KubeletReady"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q", want)
			}
		}
	})
}

// TestBadInput: clear errors, nothing started.
func TestBadInput(t *testing.T) {
	t.Setenv("LABS_STATE_DIR", t.TempDir())
	t.Setenv("KUBECONFIG", "")
	for _, tc := range []struct {
		o    options
		want string
	}{
		{options{leaseSeconds: 0, timeout: time.Minute}, "want 1..3600"},
		{options{leaseSeconds: 40, renewFor: -time.Second, timeout: time.Minute}, "must not be negative"},
		{options{leaseSeconds: 40, timeout: time.Minute, renewer: "mine"}, "want kubelet or ours"},
		{options{leaseSeconds: 40, timeout: time.Minute}, "no cluster"},
		{options{leaseSeconds: 40, timeout: time.Minute, kubeconfig: "/nonexistent"}, "bad kubeconfig"},
	} {
		tc.o.nodeName = "t02-bad"
		if _, err := run(context.Background(), tc.o, labenv.NewPrinter(&bytes.Buffer{})); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.o, err, tc.want)
		}
	}
}

// TestNodeNameIsCheckedFirst: a name that is no Node name (or that would
// climb out of the state folder) is refused before any folder exists.
func TestNodeNameIsCheckedFirst(t *testing.T) {
	stateDir := t.TempDir()
	t.Setenv("LABS_STATE_DIR", stateDir)
	for _, name := range []string{"../x", "Bad_Name"} {
		_, err := run(context.Background(), options{nodeName: name, leaseSeconds: 40, timeout: time.Minute}, labenv.NewPrinter(&bytes.Buffer{}))
		if err == nil || !strings.Contains(err.Error(), "not a valid Node name") {
			t.Errorf("--node-name=%s: %v, want it refused", name, err)
		}
	}
	if entries, _ := os.ReadDir(stateDir); len(entries) != 0 {
		t.Errorf("a refused name left files in the state folder: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(stateDir), "x")); err == nil {
		t.Error("../x was created next to the state folder")
	}
}

// TestNodeWithoutReadyCondition: a Node that has no Ready condition (made
// by hand, or before its kubelet posted status) is waited on, not a panic.
func TestNodeWithoutReadyCondition(t *testing.T) {
	admin := testenv.AdminClient(t)
	ctx := context.Background()
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "t02-no-conditions"}}
	if _, err := admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer admin.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
	notTrue := func(c *v1.NodeCondition) bool { return !isTrue(c) }
	_, _, err := waitReady(ctx, admin, n.Name, 2*time.Second, notTrue)
	if err == nil || !strings.Contains(err.Error(), "did not change as expected") {
		t.Errorf("waitReady on a Node without conditions: %v, want a timeout", err)
	}
}

package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelet-labs/internal/critest"
	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labpod/labpodtest"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/cri"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func find(t *testing.T, part []stopped, name string) stopped {
	t.Helper()
	for _, s := range part {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no container %s in %+v", name, part)
	return stopped{}
}

// TestLab: what the README shows, on each runtime. polite exits on
// SIGTERM (143) without waiting; stubborn is SIGKILLed (137) after the
// pod's 3 s, then after the deletion's 1 s raised to 2 s. Afterwards
// neither the pod object nor anything of it in the runtime is left, and
// no goroutine.
func TestLab(t *testing.T) {
	admin := testenv.AdminClient(t)
	for _, rc := range critest.Cases() {
		t.Run(rc.Name, func(t *testing.T) {
			o := options{Options: labpodtest.Options(t, rc, "lab-node-15"), deleteGrace: 1}
			ignore := goleak.IgnoreCurrent()
			var out testenv.SyncBuffer
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			rep, err := run(ctx, o, labenv.NewPrinter(&out))
			t.Logf("lab output:\n%s", out.String())
			if err != nil {
				t.Fatal(err)
			}

			for i, want := range []struct{ grace int64 }{{3}, {2}} {
				polite, stubborn := find(t, rep.Parts[i], "polite"), find(t, rep.Parts[i], "stubborn")
				t.Logf("%s part %d: polite %d in %s, stubborn %d in %s (grace %ds)", rc.Name, i+1,
					polite.ExitCode, polite.Took, stubborn.ExitCode, stubborn.Took, stubborn.Grace)
				if polite.ExitCode != 143 || stubborn.ExitCode != 137 {
					t.Errorf("part %d: exit codes polite %d stubborn %d, want 143 and 137", i+1, polite.ExitCode, stubborn.ExitCode)
				}
				if stubborn.Grace != want.grace {
					t.Errorf("part %d: stubborn got %ds of grace, want %ds", i+1, stubborn.Grace, want.grace)
				}
				g := time.Duration(want.grace) * time.Second
				// Exit codes say how each ended (143: at SIGTERM, without
				// waiting for the grace; 137: SIGKILL); the one duration
				// checked is the lower bound a loaded machine cannot break:
				// the runtime waited the grace before the SIGKILL.
				if stubborn.Took < g-500*time.Millisecond {
					t.Errorf("part %d: stubborn's stop took %s, less than its %s grace", i+1, stubborn.Took, g)
				}
			}
			for _, s := range []string{
				"timeout=3s (3s from spec.terminationGracePeriodSeconds)",
				"metadata.deletionGracePeriodSeconds=1s",
				"timeout=2s (1s from metadata.deletionGracePeriodSeconds, raised to the 2s minimum)",
				"got SIGTERM, bye",
				"gracePeriodSeconds=0 (uid precondition): pod default/stop-demo is gone",
			} {
				if !strings.Contains(out.String(), s) {
					t.Errorf("output lacks %q", s)
				}
			}

			if _, err := admin.CoreV1().Pods("default").Get(ctx, "stop-demo", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("pod stop-demo still exists after the lab: %v", err)
			}
			if rc.Name != "fakecri" {
				c, err := cri.Dial(ctx, o.Endpoint)
				if err != nil {
					t.Fatal(err)
				}
				if left, err := c.Pods(ctx, map[string]string{cri.LabelPodName: "stop-demo", cri.LabelPodNamespace: "default"}); err != nil || len(left) != 0 {
					t.Errorf("sandboxes of stop-demo left in %s: %d (%v)", rc.Name, len(left), err)
				}
				c.Close()
			}
			// the record make check LAB=15 reads (record.go)
			kind := "mock"
			if rc.Name != "fakecri" {
				kind = "containerd"
			}
			if path, err := state.Path("15-stop-escalation", RecordFile(kind)); err != nil {
				t.Error(err)
			} else if b, err := os.ReadFile(path); err != nil || !strings.Contains(string(b), "part 2 stubborn exit 137 grace 2s") {
				t.Errorf("the lab's record %s: %q (%v), want a line %q", path, b, err, "part 2 stubborn exit 137 grace 2s")
			}
			labpodtest.NoLeaks(t, ignore)
		})
	}
}

// Bad input fails in one clear line, before anything is created.
func TestLabBadInput(t *testing.T) {
	base := options{Options: labpodtest.Mock(t, "lab-node-15"), deleteGrace: 1}
	missing := t.TempDir() + "/nothing"
	for _, tc := range []struct {
		name string
		edit func(*options)
		want string
	}{
		{"grace 0", func(o *options) { o.deleteGrace = 0 }, "--delete-grace-period must be at least 1"},
		{"bad node name", func(o *options) { o.NodeName = "Bad_Name" }, "is not a valid Node name"},
		{"unknown runtime", func(o *options) { o.Kind = "docker" }, `--runtime "docker": want one of containerd`},
		{"no containerd", func(o *options) { o.Kind, o.Endpoint = labruntime.Containerd, "unix://"+missing+".sock" }, "not reachable"},
		{"missing pod file", func(o *options) { o.PodFile = missing + ".yaml" }, "--pod: open"},
		{"no cluster", func(o *options) { o.Kubeconfig = missing }, "bad kubeconfig"},
	} {
		o := base
		tc.edit(&o)
		// the flag check first, as labenv.Main does, then the run
		err := o.check()
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err = run(ctx, o, labenv.NewPrinter(&testenv.SyncBuffer{}))
			cancel()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

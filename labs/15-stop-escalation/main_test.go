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

	"kubelet-labs/internal/labpod"
	"kubelet-labs/internal/state"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/cri/critest"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// shortStateDir: the mock's socket lives in the state folder, and a
// socket path must stay under 108 bytes (t.TempDir() paths may not).
func shortStateDir(t *testing.T) {
	dir, err := os.MkdirTemp("", "lab15-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Setenv(state.EnvVar, dir)
}

// optionsFor runs the lab on one runtime of the shared table: the mock in
// the lab's own process, or a containerd.
func optionsFor(t *testing.T, rc critest.Case) options {
	o := options{kubeconfig: testenv.ControlPlane(t).AdminKubeconfig(), runtime: labpod.Mock,
		nodeName: "lab-node-15", deleteGrace: 1, podLogsDir: t.TempDir()}
	if rc.Name != "fakecri" {
		rt := rc.Setup(t) // before shortStateDir: it finds containerd in the real state folder
		o.runtime, o.endpoint, o.image = labpod.Containerd, rt.Endpoint, rt.BusyboxImage
	}
	shortStateDir(t)
	return o
}

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
			o := optionsFor(t, rc)
			ignore := goleak.IgnoreCurrent()
			var out testenv.SyncBuffer
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			rep, err := run(ctx, o, &out)
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
				if stubborn.Took < g-500*time.Millisecond || stubborn.Took > g+5*time.Second {
					t.Errorf("part %d: stubborn's stop took %s, want about its %s grace", i+1, stubborn.Took, g)
				}
				if polite.Took >= g {
					t.Errorf("part %d: polite's stop took %s: it exits on SIGTERM and should not wait for the grace", i+1, polite.Took)
				}
			}
			for _, s := range []string{
				"timeout=3s (3s from spec.terminationGracePeriodSeconds)",
				"metadata.deletionGracePeriodSeconds=1s",
				"timeout=2s (1s from metadata.deletionGracePeriodSeconds, raised to the 2s minimum)",
				"got SIGTERM, bye",
				"pod default/stop-demo is gone",
			} {
				if !strings.Contains(out.String(), s) {
					t.Errorf("output lacks %q", s)
				}
			}

			if _, err := admin.CoreV1().Pods("default").Get(ctx, "stop-demo", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("pod stop-demo still exists after the lab: %v", err)
			}
			if rc.Name != "fakecri" {
				c, err := cri.Dial(ctx, o.endpoint)
				if err != nil {
					t.Fatal(err)
				}
				if left, err := c.Pods(ctx, map[string]string{cri.LabelPodName: "stop-demo", cri.LabelPodNamespace: "default"}); err != nil || len(left) != 0 {
					t.Errorf("sandboxes of stop-demo left in %s: %d (%v)", rc.Name, len(left), err)
				}
				c.Close()
			}
			goleak.VerifyNone(t, ignore,
				goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
				goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
				goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"))
		})
	}
}

// Bad input fails in one clear line, before anything is created.
func TestLabBadInput(t *testing.T) {
	shortStateDir(t)
	kubeconfig := testenv.ControlPlane(t).AdminKubeconfig()
	missing := t.TempDir() + "/nothing.sock"
	for _, tc := range []struct {
		name string
		o    options
		want string
	}{
		{"grace 0", options{kubeconfig: kubeconfig, runtime: labpod.Mock, nodeName: "n", deleteGrace: 0}, "--delete-grace-period must be at least 1"},
		{"bad node name", options{kubeconfig: kubeconfig, runtime: labpod.Mock, nodeName: "Bad_Name", deleteGrace: 1}, "is not a valid Node name"},
		{"unknown runtime", options{kubeconfig: kubeconfig, runtime: "docker", nodeName: "n", deleteGrace: 1}, `--runtime "docker": want mock or containerd`},
		{"no containerd", options{kubeconfig: kubeconfig, runtime: labpod.Containerd, endpoint: "unix://" + missing, nodeName: "n", deleteGrace: 1}, "not reachable"},
		{"missing pod file", options{kubeconfig: kubeconfig, runtime: labpod.Mock, nodeName: "n", deleteGrace: 1, podFile: missing + ".yaml"}, "--pod: open"},
		{"no cluster", options{kubeconfig: t.TempDir() + "/none", runtime: labpod.Mock, nodeName: "n", deleteGrace: 1}, "bad kubeconfig"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := run(ctx, tc.o, &testenv.SyncBuffer{})
		cancel()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

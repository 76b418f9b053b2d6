package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"kubelet-labs/internal/containerdenv"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/mycore/cri"
	"kubelet-labs/mylib/fakecri"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The runtimes: the course's containerd 2.2 (scripts/containerd-up.sh),
// shared by every run of the benchmark, and the mock CRI (mylib/fakecri),
// a fresh one per run, served by the benchmark itself — not inside either
// kubelet, so that neither's memory and CPU hold the runtime's.

const (
	runtimeContainerd = "containerd"
	runtimeMock       = "mock"
	flavour           = containerdenv.Flavour22
)

// nsPrefix starts every namespace the benchmark makes: the runtime's
// sandboxes of those namespaces are the benchmark's, any other's belong to
// someone else.
const nsPrefix = "kbench-"

// loadContainerd is containerd 2.2's env file; a test replaces it.
var loadContainerd = func() (containerdenv.Env, error) { return containerdenv.LoadFlavour(flavour) }

// geteuid is this process's user; a test replaces it.
var geteuid = os.Geteuid

// checkContainerd refuses, in one line, a run on containerd that cannot
// work: its socket missing, or not root. The real kubelet needs root on a
// real runtime (it writes the pods' folders and log files as root, and the
// course's containerd socket is root's alone).
func checkContainerd() (containerdenv.Env, error) {
	env, err := loadContainerd()
	if err != nil {
		return env, fmt.Errorf("--runtimes containerd: %v; start it with `%s`, or pass --runtimes mock", err, containerdenv.UpHint)
	}
	sock := strings.TrimPrefix(env.Endpoint, "unix://")
	if _, err := os.Stat(sock); err != nil {
		return env, fmt.Errorf("--runtimes containerd: containerd %s's socket %s is missing: start it with `%s`, or pass --runtimes mock", flavour, sock, containerdenv.UpHint)
	}
	if geteuid() != 0 {
		return env, fmt.Errorf("--runtimes containerd: not root: the real kubelet needs root on a real runtime (and containerd's socket is root's); run the benchmark as root, or pass --runtimes mock")
	}
	if env.BusyboxImage == "" {
		env.BusyboxImage = labruntime.BusyboxImage
	}
	return env, nil
}

// backend is the runtime of one run, behind its proxy.
type backend struct {
	kind   string
	socket string          // the runtime's own socket
	mock   *fakecri.Server // the mock, this run's alone
	image  string          // the busybox image it has
}

// openBackend starts the mock in dir, or names containerd's socket.
func openBackend(kind, dir string, env containerdenv.Env) (*backend, error) {
	if kind == runtimeContainerd {
		return &backend{kind: kind, socket: strings.TrimPrefix(env.Endpoint, "unix://"), image: env.BusyboxImage}, nil
	}
	// The same images as lab 18's own mock (labruntime.openMock), so the
	// one pod manifest runs on both runtimes.
	m, err := fakecri.Start(filepath.Join(dir, "mock.sock"), fakecri.WithPauseImage(labruntime.PauseImage), fakecri.WithImages(labruntime.BusyboxImage))
	if err != nil {
		return nil, fmt.Errorf("start the mock CRI: %w", err)
	}
	return &backend{kind: kind, socket: m.SocketPath(), mock: m, image: labruntime.BusyboxImage}, nil
}

func (b *backend) close() {
	if b.mock != nil {
		b.mock.Stop()
	}
}

// ours reports whether a sandbox is the benchmark's: its pod's namespace.
func ours(s interface{ GetLabels() map[string]string }) bool {
	return strings.HasPrefix(s.GetLabels()["io.kubernetes.pod.namespace"], nsPrefix)
}

// prepareContainerd empties containerd of the benchmark's sandboxes (an
// interrupted run's, or the kubelet before's: the real kubelet leaves its
// stopped sandboxes to its garbage collector, and on SIGTERM its running
// ones too), and refuses a containerd that runs anyone else's pods: the
// real kubelet stops every pod of its runtime it does not run itself
// (HandlePodCleanups, pkg/kubelet/kubelet_pods.go:1398-1425 in
// v1.36.3: a one-second grace, as orphans), and so would the benchmark's
// real kubelet stop them.
func prepareContainerd(ctx context.Context, socket string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	c, err := cri.Dial(ctx, "unix://"+socket, cri.WithStartHint(containerdenv.UpHint))
	if err != nil {
		return err
	}
	defer c.Close()
	pods, err := c.Pods(ctx, nil)
	if err != nil {
		return fmt.Errorf("list containerd's pod sandboxes: %w", err)
	}
	var others []string
	running := 0
	var errs []error
	for _, p := range pods {
		if !ours(p) {
			others = append(others, p.GetMetadata().GetNamespace()+"/"+p.GetMetadata().GetName())
			if p.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
				running++
			}
			continue
		}
		// Stop, then remove: containerd removes a sandbox's containers with it.
		if err := c.Runtime.StopPodSandbox(ctx, p.Id); err != nil {
			errs = append(errs, err)
		} else if err := c.Runtime.RemovePodSandbox(ctx, p.Id); err != nil {
			errs = append(errs, err)
		}
	}
	if len(others) > 0 {
		// Stopped ones count too: the real kubelet's garbage collector
		// removes the sandboxes of pods it does not know.
		return fmt.Errorf("containerd %s has %d pod sandboxes that are not the benchmark's (%d of them running; first: %s): the real kubelet would stop the running ones, as it stops every pod of its runtime it does not run, and remove the stopped ones; wait until their owner is done, or remove them (crictl rmp -f ID)",
			flavour, len(others), running, others[0])
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove the benchmark's sandboxes from containerd: %w", err)
	}
	left, err := c.Pods(ctx, nil)
	if err != nil {
		return err
	}
	if n := len(left); n > 0 {
		return fmt.Errorf("containerd still has %d of the benchmark's sandboxes after removing them", n)
	}
	return nil
}

// guardContainerd watches containerd while a kubelet runs on it: the
// check before the run cannot stop someone from starting pods on the
// same containerd during it, and the real kubelet would stop them within
// its housekeeping period (2 s, pkg/kubelet/kubelet.go:183). So every
// `every` it lists the sandboxes on containerd's own socket (not through
// the proxy: these calls are not the kubelet's), and on the first one
// that is not the benchmark's calls found once, with its name — the run
// then stops its kubelet at once. It returns when ctx ends.
func guardContainerd(ctx context.Context, socket string, every time.Duration, found func(string)) {
	c, err := cri.Dial(ctx, "unix://"+socket)
	if err != nil {
		return
	}
	defer c.Close()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pods, err := c.Pods(ctx, nil)
		if err != nil {
			continue
		}
		for _, p := range pods {
			if !ours(p) {
				found(p.GetMetadata().GetNamespace() + "/" + p.GetMetadata().GetName())
				return
			}
		}
	}
}

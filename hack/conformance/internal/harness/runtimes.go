package harness

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"kubelet-labs/hack/conformance/internal/images"
	"kubelet-labs/internal/labruntime"
)

// Runtime is one of the course's containerds, as scripts/containerd-up.sh
// left it.
type Runtime struct {
	Env labruntime.Env
	// Ctr is containerd's own client, Sock its socket.
	Ctr, Sock string
}

func startHint() string {
	return "start it with: sudo scripts/containerd-up.sh (LABS_ROOT_DIR=" + labruntime.RootDir() + ")"
}

// FindRuntime reads the env file of the containerd the labs use and checks
// that it answers; the error says how to start it.
func FindRuntime() (Runtime, error) {
	env, err := labruntime.Load()
	if err != nil {
		return Runtime{}, err
	}
	if env.File == "" {
		return Runtime{}, fmt.Errorf("the course's containerd is not up (no env file in %s): %s", labruntime.RootDir(), startHint())
	}
	return answering(env)
}

// FindRuntimes is every containerd flavour that is up (the default first),
// each checked to answer.
func FindRuntimes() ([]Runtime, error) {
	flavours, err := labruntime.StartedFlavours()
	if err != nil {
		return nil, err
	}
	if len(flavours) == 0 {
		return nil, fmt.Errorf("no containerd of the course is up (no env file in %s): %s, or --version 2.2,1.6 for nodes on both", labruntime.RootDir(), startHint())
	}
	var rts []Runtime
	for _, f := range flavours {
		env, err := labruntime.LoadFlavour(f)
		if err != nil {
			return nil, err
		}
		rt, err := answering(env)
		if err != nil {
			return nil, err
		}
		rts = append(rts, rt)
	}
	return rts, nil
}

// answering reads the ctr the env file names and asks the containerd its
// version.
func answering(env labruntime.Env) (Runtime, error) {
	r := Runtime{Env: env, Sock: strings.TrimPrefix(env.Endpoint, "unix://")}
	f, err := os.Open(env.File)
	if err != nil {
		return r, err
	}
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if v, ok := strings.CutPrefix(sc.Text(), "CTR="); ok {
			r.Ctr = v
		}
	}
	if r.Ctr == "" {
		r.Ctr = "ctr"
	}
	if out, err := exec.Command(r.Ctr, "-a", r.Sock, "version").CombinedOutput(); err != nil {
		return r, fmt.Errorf("the course's containerd does not answer on %s (%v: %s): %s", r.Sock, err, strings.TrimSpace(string(out)), startHint())
	}
	return r, nil
}

// clusterImages makes the full cluster's add-on images (kube-proxy,
// CoreDNS) and imports them into rt.
func (l *Layout) clusterImages(rt Runtime, progress io.Writer) error {
	var src images.ClusterSources
	var err error
	if src.KubeProxy, err = l.Build("kube-proxy", progress); err != nil {
		return err
	}
	if src.CoreDNS, err = l.Build("coredns", progress); err != nil {
		return err
	}
	for _, spec := range images.ClusterSpecs(src) {
		tar, err := l.imageTar(spec, progress)
		if err != nil {
			return err
		}
		if out, err := exec.Command(rt.Ctr, "-a", rt.Sock, "-n", "k8s.io", "images", "import", tar).CombinedOutput(); err != nil {
			return fmt.Errorf("ctr images import %s: %v: %s", tar, err, out)
		}
	}
	return nil
}

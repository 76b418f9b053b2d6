package plegview

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/state"
	"kubelet-labs/mycore/cri"
	"kubelet-labs/mylib/fakecri"
)

// ControlSocket is the control API next to the mock CRI at endpoint, or
// an error saying this lab needs one: the PLEG is shown by making
// containers die, which only the mock's control API can do on demand.
func ControlSocket(endpoint string) (string, error) {
	endpoint = cri.NormalizeEndpoint(endpoint)
	control := fakecri.ControlSocketFor(cri.SocketPath(endpoint))
	if _, err := os.Stat(control); err != nil {
		return "", fmt.Errorf("%s has no control API at %s (%w): --cri-endpoint must be our mock runtime (lab 06's); the PLEG over containerd is lab 12", endpoint, control, err)
	}
	return control, nil
}

// Mock is the runtime the lab watches — one this lab started, or lab 06's
// — with its control API, the "something happened to a container" button.
type Mock struct {
	Endpoint string // the CRI
	Control  string // the control API's unix socket
	Dir      string // where crictl.yaml and the request files go
	Ours     bool   // started by this lab
	ctl      *fakecri.ControlClient
}

// NewMock finds the control API of the mock rt is connected to.
func NewMock(rt *labruntime.Runtime, dir string) (*Mock, error) {
	m := &Mock{Endpoint: rt.CRI.Endpoint, Dir: dir, Ours: rt.Mock != nil}
	if rt.Mock != nil {
		m.Control = rt.Mock.ControlSocketPath()
	} else {
		var err error
		if m.Control, err = ControlSocket(rt.CRI.Endpoint); err != nil {
			return nil, err
		}
	}
	m.ctl = fakecri.NewControlClient(m.Control)
	return m, nil
}

// Describe says whose mock it is.
func (m *Mock) Describe() string {
	if m.Ours {
		return "our mock CRI runtime, started by this lab"
	}
	return "a mock CRI runtime started by someone else"
}

// Exit makes a running container's process exit, as a crash would.
func (m *Mock) Exit(ctx context.Context, id string, code int32) error {
	return m.ctl.SetContainerExited(ctx, id, code, "")
}

// Close closes the control client (the runtime is closed by its owner).
func (m *Mock) Close() { m.ctl.Close() }

// DemoPod is a pod as the kubelet would create it, labelled so the PLEG
// (and crictl) group its containers under it: the PLEG files a container
// under the pod whose UID its io.kubernetes.pod.uid label names.
func DemoPod(name string) cri.Pod {
	return cri.Pod{Name: name, Namespace: "lab07", UID: fmt.Sprintf("lab07-%s-%d", name, time.Now().UnixNano())}
}

// RemovePod stops and removes a demo pod and its containers, even after
// the lab's context has ended.
func RemovePod(c *cri.Client, sandboxID string, out *labenv.Printer) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.RemovePod(ctx, sandboxID, 0); err != nil {
		out.Printf("removing demo pod %.13s: %v", sandboxID, err)
	}
}

// Guide writes crictl's config and the requests for one more container
// of pod (whose sandbox is sandboxID, made from sbCfg), then prints the
// commands that make the PLEG speak, with this run's paths and IDs. The
// requests are JSON in the CRI's own field names, which is what `crictl
// create` reads; extra.json carries pod's UID in its labels, so the new
// container joins that pod.
func (m *Mock) Guide(out *labenv.Printer, pod cri.Pod, image, sandboxID string, sbCfg *runtimeapi.PodSandboxConfig, containerIDs []string) {
	crictl, _ := state.Path("bin", "crictl")
	if _, err := os.Stat(crictl); err != nil {
		out.Printf("(crictl is not built yet: run scripts/build-crictl.sh)")
	}
	cfgFile := filepath.Join(m.Dir, "crictl.yaml")
	extraFile, sandboxFile := filepath.Join(m.Dir, "extra.json"), filepath.Join(m.Dir, "sandbox.json")
	extra := pod.ContainerConfig(cri.Container{Name: "extra", Image: image, Command: []string{"sh", "-c", "while true; do sleep 1; done"}})
	err := errors.Join(
		os.WriteFile(cfgFile, fmt.Appendf(nil, "runtime-endpoint: %s\nimage-endpoint: %s\ntimeout: 30\n", m.Endpoint, m.Endpoint), 0o644),
		writeJSON(extraFile, extra),
		writeJSON(sandboxFile, sbCfg),
	)
	if err != nil {
		out.Printf("could not write the crictl files into %s: %v", m.Dir, err)
	}
	out.Printf(`Demo pod %s/%s (uid %s): sandbox %.13s, containers nginx %.13s and sidecar %.13s.
In another terminal, from the repository root:

  C="%s --config %s"
  $C ps -a
  curl -s --unix-socket %s -X POST http://fakecri/v1/containers/%.13s/exit -d '{"exitCode":137,"reason":"OOMKilled"}'
  $C rm %.13s
  $C create %.13s %s %s     # prints the new container's ID
  $C start <ID>

Expect ContainerDied after the curl, ContainerRemoved after rm, and
ContainerStarted after start (none after create: a CREATED container is
"unknown" to the PLEG and its ContainerChanged event is dropped).
Events (Ctrl-C to stop):
`, pod.Namespace, pod.Name, pod.UID, sandboxID, containerIDs[0], containerIDs[1], rel(crictl), rel(cfgFile), rel(m.Control), containerIDs[0], containerIDs[0],
		sandboxID, rel(extraFile), rel(sandboxFile))
}

// rel shortens p to a path relative to the working folder when it lies
// under it (the default state folder, .labs/, in the repository root).
func rel(p string) string {
	if wd, err := os.Getwd(); err == nil {
		if r, err := filepath.Rel(wd, p); err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator)) {
			return r
		}
	}
	return p
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

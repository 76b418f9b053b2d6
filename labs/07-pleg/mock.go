package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/internal/state"
	"kubelet-labs/mycore/cri"
	"kubelet-labs/mylib/fakecri"
)

// demoImage is an image name the mock "pulls" instantly; it runs no real
// image, only its little shell (see mylib/fakecri).
const demoImage = "busybox"

// mock is the runtime the lab watches: one we started, or lab 06's.
type mock struct {
	endpoint string
	control  string // the control API's unix socket
	dir      string // where crictl.yaml and the JSON requests are written
	srv      *fakecri.Server
	ctl      *fakecri.ControlClient
}

func startMock(endpoint string) (*mock, error) {
	dir, err := state.Ensure("07-pleg")
	if err != nil {
		return nil, err
	}
	m := &mock{dir: dir}
	if endpoint == "" {
		m.srv, err = fakecri.Start(filepath.Join(dir, "cri.sock"), fakecri.WithImages(demoImage))
		if err != nil {
			return nil, err
		}
		m.endpoint, m.control = m.srv.Endpoint(), m.srv.ControlSocketPath()
	} else {
		m.endpoint = cri.NormalizeEndpoint(endpoint)
		m.control = fakecri.ControlSocketFor(cri.SocketPath(m.endpoint))
		if _, err := os.Stat(m.control); err != nil {
			return nil, fmt.Errorf("%s has no control API at %s (%w): --cri-endpoint must be our mock runtime (lab 06); the PLEG over containerd is lab 12", m.endpoint, m.control, err)
		}
	}
	m.ctl = fakecri.NewControlClient(m.control)
	return m, nil
}

func (m *mock) describe() string {
	if m.srv != nil {
		return "our mock CRI runtime, started by this lab"
	}
	return "a mock CRI runtime started by someone else"
}

// exit makes a running container's process exit, as a crash would.
func (m *mock) exit(ctx context.Context, id string, code int32) error {
	return m.ctl.SetContainerExited(ctx, id, code, "")
}

func (m *mock) stop() {
	m.ctl.Close()
	if m.srv != nil {
		m.srv.Stop()
	}
}

// demoPod is a pod as the kubelet would create it, labelled so the PLEG
// (and crictl) group its containers under it.
func demoPod(name string) cri.Pod {
	return cri.Pod{Name: name, Namespace: "lab07", UID: fmt.Sprintf("lab07-%s-%d", name, time.Now().UnixNano())}
}

// removePod stops and removes a demo pod and its containers.
func removePod(c *cri.Client, sandboxID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.RemovePod(ctx, sandboxID, 0); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "removing demo pod %.13s: %v\n", sandboxID, err)
	}
}

// guide prints the commands that make the PLEG speak, with this run's
// real paths and IDs. The container request is written as JSON in the CRI's
// own field names, which is what `crictl create` reads.
func (m *mock) guide(out *printer, sandboxID string, containerIDs []string) {
	crictl, _ := state.Path("bin", "crictl")
	if _, err := os.Stat(crictl); err != nil {
		out.printf("(crictl is not built yet: run scripts/build-crictl.sh)")
	}
	cfgFile := filepath.Join(m.dir, "crictl.yaml")
	pod := cri.Pod{Name: "web", Namespace: "lab07"}
	extra := pod.ContainerConfig(cri.Container{Name: "extra", Image: demoImage, Command: []string{"sh", "-c", "while true; do sleep 1; done"}})
	sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "lab07"}}
	err := errors.Join(
		os.WriteFile(cfgFile, fmt.Appendf(nil, "runtime-endpoint: %s\nimage-endpoint: %s\ntimeout: 30\n", m.endpoint, m.endpoint), 0o644),
		writeJSON(filepath.Join(m.dir, "extra.json"), extra),
		writeJSON(filepath.Join(m.dir, "sandbox.json"), sbCfg),
	)
	if err != nil {
		out.printf("could not write the crictl files into %s: %v", m.dir, err)
	}
	out.printf(`Demo pod lab07/web: sandbox %.13s, containers nginx %.13s and sidecar %.13s.
In another terminal, from the repository root:

  export CRI_CONFIG_FILE=%s
  C=%s
  $C ps -a
  curl -s --unix-socket %s -X POST http://fakecri/v1/containers/%.13s/exit -d '{"exitCode":137,"reason":"OOMKilled"}'
  $C rm %.13s
  $C create %.13s %s %s     # prints the new container's ID
  $C start <ID>

Expect ContainerDied after the curl, ContainerRemoved after rm, and
ContainerStarted after start (none after create: a CREATED container is
"unknown" to the PLEG and its ContainerChanged event is dropped).
Events (Ctrl-C to stop):
`, sandboxID, containerIDs[0], containerIDs[1], cfgFile, crictl, m.control, containerIDs[0], containerIDs[0],
		sandboxID, filepath.Join(m.dir, "extra.json"), filepath.Join(m.dir, "sandbox.json"))
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

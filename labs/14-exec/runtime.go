package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"kubelet-labs/mycore/cri"
	"kubelet-labs/mylib/fakecri"
)

// nodeRuntime is the container runtime the node runs its pods on.
type nodeRuntime struct {
	cri        *cri.Client
	podLogsDir string
	describe   string
	close      func()
}

// openRuntime starts the mock CRI in this process (its socket and its
// containers' logs in the node's folder), or connects to the course's
// containerd.
func openRuntime(ctx context.Context, kind, endpoint, nodeDir string) (*nodeRuntime, error) {
	switch kind {
	case "mock":
		mock, err := fakecri.Start(filepath.Join(nodeDir, "mockcri.sock"), fakecri.WithPortForwardHook(mockHTTP))
		if err != nil {
			return nil, err
		}
		crc, err := cri.Dial(ctx, mock.Endpoint())
		if err != nil {
			mock.Stop()
			return nil, err
		}
		logs := filepath.Join(nodeDir, "pod-logs")
		if err := os.MkdirAll(logs, 0o755); err != nil {
			crc.Close()
			mock.Stop()
			return nil, err
		}
		return &nodeRuntime{cri: crc, podLogsDir: logs,
			describe: fmt.Sprintf("the mock CRI (mylib/fakecri) in this process on %s, its streaming server on %s", mock.Endpoint(), streamingAddr(mock)),
			close:    func() { crc.Close(); mock.Stop() }}, nil
	case "containerd":
		env, err := cri.Load()
		if err != nil {
			return nil, err
		}
		if endpoint != "" {
			env.Endpoint = cri.NormalizeEndpoint(endpoint)
		}
		crc, err := cri.Dial(ctx, env.Endpoint)
		if err != nil {
			return nil, fmt.Errorf("%w\n(start it with: %s)", err, cri.UpHint)
		}
		info, err := crc.Info(ctx)
		if err != nil {
			crc.Close()
			return nil, err
		}
		if !info.Ready("NetworkReady") {
			crc.Close()
			return nil, fmt.Errorf("%s is up but its pod network is not ready (no CNI config?): restart it with %s", env.Endpoint, cri.UpHint)
		}
		return &nodeRuntime{cri: crc, podLogsDir: env.PodLogDir,
			describe: fmt.Sprintf("%s %s on %s", info.RuntimeName, info.RuntimeVersion, env.Endpoint),
			close:    func() { crc.Close() }}, nil
	}
	return nil, fmt.Errorf("--runtime %q: want mock (the mock CRI, in this process) or containerd (the course's, started by %s)", kind, cri.UpHint)
}

func streamingAddr(m *fakecri.Server) string {
	a, err := m.Runtime().StreamingAddr()
	if err != nil {
		return "(not started: " + err.Error() + ")"
	}
	return a
}

// mockHTTP answers one HTTP request on any forwarded port of the mock. The
// mock runs no processes, so nothing listens in its "pods"; this stands in
// for the busybox httpd that the pod's web container runs on containerd.
// (Without a hook the mock echoes every byte back.)
func mockHTTP(_ context.Context, sandboxID string, port int32, stream io.ReadWriteCloser) error {
	req, err := http.ReadRequest(bufio.NewReader(stream))
	if err != nil {
		return nil // the client went away
	}
	body := fmt.Sprintf("<p>hello from the mock CRI: port %d of sandbox %.13s, %s %s</p>\n", port, sandboxID, req.Method, req.URL)
	resp := &http.Response{StatusCode: http.StatusOK, ProtoMajor: 1, ProtoMinor: 1, Close: true,
		Header: http.Header{"Content-Type": {"text/html"}}, ContentLength: int64(len(body)), Body: io.NopCloser(strings.NewReader(body))}
	return resp.Write(stream)
}

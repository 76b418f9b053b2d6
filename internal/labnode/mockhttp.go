package labnode

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"kubelet-labs/mylib/fakecri"
)

// MockHTTP answers one HTTP request on any forwarded port of the mock CRI
// (fakecri.WithPortForwardHook). The mock runs no processes, so nothing
// listens in its pods; this stands in for the web server a pod's container
// runs on containerd, so `kubectl port-forward` and curl show the whole
// path — apiserver, node server, the runtime's streaming server — on the
// mock too. (Without a hook the mock echoes every byte back.)
func MockHTTP(_ context.Context, sandboxID string, port int32, stream io.ReadWriteCloser) error {
	req, err := http.ReadRequest(bufio.NewReader(stream))
	if err != nil {
		return nil // the client went away
	}
	body := fmt.Sprintf("<p>hello from the mock CRI: port %d of sandbox %.13s, %s %s</p>\n", port, sandboxID, req.Method, req.URL)
	resp := &http.Response{StatusCode: http.StatusOK, ProtoMajor: 1, ProtoMinor: 1, Close: true,
		Header: http.Header{"Content-Type": {"text/html"}}, ContentLength: int64(len(body)), Body: io.NopCloser(strings.NewReader(body))}
	return resp.Write(stream)
}

// streamingAddr is where the mock's streaming server listens: the URL the
// node server proxies exec, attach and port-forward to.
func streamingAddr(m *fakecri.Server) string {
	a, err := m.Runtime().StreamingAddr()
	if err != nil {
		return "(not started: " + err.Error() + ")"
	}
	return a
}

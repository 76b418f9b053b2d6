package fakecri

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The control API over HTTP/JSON on a unix socket (mode 0600, next to the
// CRI socket as NAME-control.sock; never on the network). Try it with curl:
//
//	S=.labs/mockcri-control.sock
//	curl -s --unix-socket $S http://fakecri/v1/state
//	curl -s --unix-socket $S -X POST http://fakecri/v1/containers/ID/exit -d '{"exitCode":1,"reason":"Error"}'
//	curl -s --unix-socket $S -X POST http://fakecri/v1/containers/ID/signal -d '{"signal":"TERM"}'
//	curl -s --unix-socket $S -X POST http://fakecri/v1/sandboxes/ID/notready
//	curl -s --unix-socket $S -X PUT  http://fakecri/v1/conditions/NetworkReady -d '{"status":false,"reason":"NoCNI"}'
//
// IDs may be unique prefixes. Success is 200 with a JSON body; errors are
// {"error": "..."} with 400 (bad input), 404 (unknown ID), 409 (wrong
// state, e.g. the container is not running) or 500.

type exitBody struct {
	ExitCode int32  `json:"exitCode"`
	Reason   string `json:"reason"`
}

type signalBody struct {
	Signal string `json:"signal"`
}

type conditionBody struct {
	Status  bool   `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func newControlHandler(r *Runtime) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/state", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, r.Snapshot())
	})
	mux.HandleFunc("POST /v1/containers/{id}/exit", func(w http.ResponseWriter, req *http.Request) {
		var b exitBody
		if !readJSON(w, req, &b) {
			return
		}
		reply(w, r.SetContainerExited(req.PathValue("id"), b.ExitCode, b.Reason))
	})
	mux.HandleFunc("POST /v1/containers/{id}/signal", func(w http.ResponseWriter, req *http.Request) {
		var b signalBody
		if !readJSON(w, req, &b) {
			return
		}
		reply(w, r.SignalContainer(req.PathValue("id"), b.Signal))
	})
	mux.HandleFunc("POST /v1/sandboxes/{id}/notready", func(w http.ResponseWriter, req *http.Request) {
		reply(w, r.SetSandboxNotReady(req.PathValue("id")))
	})
	mux.HandleFunc("PUT /v1/conditions/{type}", func(w http.ResponseWriter, req *http.Request) {
		var b conditionBody
		if !readJSON(w, req, &b) {
			return
		}
		reply(w, r.SetRuntimeCondition(req.PathValue("type"), b.Status, b.Reason, b.Message))
	})
	return mux
}

func readJSON(w http.ResponseWriter, req *http.Request, v any) bool {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err == nil && len(bytes.TrimSpace(body)) > 0 {
		err = json.Unmarshal(body, v)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad JSON body: " + err.Error()})
		return false
	}
	return true
}

func reply(w http.ResponseWriter, err error) {
	if err == nil {
		writeJSON(w, http.StatusOK, map[string]string{"result": "ok"})
		return
	}
	code := http.StatusInternalServerError
	switch status.Code(err) {
	case codes.InvalidArgument:
		code = http.StatusBadRequest
	case codes.NotFound:
		code = http.StatusNotFound
	case codes.FailedPrecondition:
		code = http.StatusConflict
	}
	writeJSON(w, code, map[string]string{"error": status.Convert(err).Message()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// ControlClient talks to a Server's control socket from another process
// (the PLEG lab's "make this container die" button).
type ControlClient struct {
	http *http.Client
}

// NewControlClient returns a client for the control socket at path.
func NewControlClient(socketPath string) *ControlClient {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socketPath)
		},
	}
	return &ControlClient{http: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// SetContainerExited asks the server to make a container exit.
func (c *ControlClient) SetContainerExited(ctx context.Context, id string, exitCode int32, reason string) error {
	return c.do(ctx, http.MethodPost, "/v1/containers/"+id+"/exit", exitBody{ExitCode: exitCode, Reason: reason}, nil)
}

// SignalContainer sends a signal ("TERM", "KILL", "15" …) to a container.
func (c *ControlClient) SignalContainer(ctx context.Context, id, signal string) error {
	return c.do(ctx, http.MethodPost, "/v1/containers/"+id+"/signal", signalBody{Signal: signal}, nil)
}

// SetSandboxNotReady flips a sandbox to NOTREADY.
func (c *ControlClient) SetSandboxNotReady(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/v1/sandboxes/"+id+"/notready", nil, nil)
}

// SetRuntimeCondition sets a runtime Status condition.
func (c *ControlClient) SetRuntimeCondition(ctx context.Context, condType string, ok bool, reason, message string) error {
	return c.do(ctx, http.MethodPut, "/v1/conditions/"+condType, conditionBody{Status: ok, Reason: reason, Message: message}, nil)
}

// State returns the server's sandboxes and containers.
func (c *ControlClient) State(ctx context.Context) (Snapshot, error) {
	var s Snapshot
	err := c.do(ctx, http.MethodGet, "/v1/state", nil, &s)
	return s, err
}

// Close releases idle connections.
func (c *ControlClient) Close() { c.http.CloseIdleConnections() }

func (c *ControlClient) do(ctx context.Context, method, p string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	// The host part is ignored by the unix dialer; "fakecri" reads well in logs.
	req, err := http.NewRequestWithContext(ctx, method, "http://fakecri"+p, body)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		json.Unmarshal(data, &e)
		return &ControlError{StatusCode: resp.StatusCode, Message: e.Error}
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// ControlError is a non-200 answer from the control API.
type ControlError struct {
	StatusCode int
	Message    string
}

func (e *ControlError) Error() string {
	return fmt.Sprintf("fakecri control: %d %s: %s", e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

package server

import (
	"net/http"
	"net/url"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	"k8s.io/apimachinery/pkg/util/proxy"
	translator "k8s.io/apiserver/pkg/util/proxy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"

	"kubelet-labs/mycore/journal"
)

// exec is getExec (server.go:1016-1050) with the kubelet's GetExec
// (kubelet_pods.go:2801-2810) and the runtime manager's
// (kuberuntime_container.go:1332-1347) folded in: which streams, which
// pod, which running container; then CRI Exec, which only returns a URL
// of the runtime's streaming server; then a proxy to it.
func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	opts, err := remotecommandserver.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	pod, err := s.pod(r.PathValue("ns"), r.PathValue("pod"), types.UID(r.PathValue("uid")))
	if err != nil {
		writeError(w, err)
		return
	}
	id, err := s.runningContainer(r.Context(), pod, r.PathValue("container"))
	if err != nil {
		writeError(w, err)
		return
	}
	start := time.Now()
	resp, err := s.cfg.Runtime.Exec(r.Context(), &runtimeapi.ExecRequest{
		ContainerId: id,
		Cmd:         r.URL.Query()["command"], // api.ExecCommandParam
		Tty:         opts.TTY, Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr,
	})
	s.journalCall(pod, r.PathValue("container"), "Exec", start, err)
	if err != nil {
		_ = streaming.WriteError(err, w) // NotFound → 404, the rest → 500, as the kubelet
		return
	}
	s.proxyStream(w, r, resp.Url, opts)
}

// attach is getAttach (server.go:979-1013) with GetAttach
// (kubelet_pods.go:2813-2836): whether the stream is a terminal is the
// container's own setting (spec tty), which cannot change after it started.
func (s *Server) attach(w http.ResponseWriter, r *http.Request) {
	opts, err := remotecommandserver.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	pod, err := s.pod(r.PathValue("ns"), r.PathValue("pod"), types.UID(r.PathValue("uid")))
	if err != nil {
		writeError(w, err)
		return
	}
	spec, err := s.containerSpec(pod, r.PathValue("container"))
	if err != nil {
		writeError(w, err)
		return
	}
	id, err := s.runningContainer(r.Context(), pod, spec.Name)
	if err != nil {
		writeError(w, err)
		return
	}
	start := time.Now()
	resp, err := s.cfg.Runtime.Attach(r.Context(), &runtimeapi.AttachRequest{
		ContainerId: id, Tty: spec.TTY, Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr,
	})
	s.journalCall(pod, spec.Name, "Attach", start, err)
	if err != nil {
		_ = streaming.WriteError(err, w)
		return
	}
	s.proxyStream(w, r, resp.Url, opts)
}

// proxyStream joins the caller to the runtime's streaming server
// (server.go:1037-1049, 1000-1012). The plain case is a byte-for-byte
// proxy of an upgraded connection: SPDY from the apiserver, SPDY to the
// runtime, nothing decoded here. With WebSockets on, a WebSocket v5
// request is decoded here and re-encoded as SPDY for the runtime, whose
// streaming server speaks SPDY (and WebSocket only up to v4).
func (s *Server) proxyStream(w http.ResponseWriter, r *http.Request, rawURL string, opts *remotecommandserver.Options) {
	u, err := url.Parse(rawURL)
	if err != nil {
		http.Error(w, "the runtime returned a bad streaming URL: "+err.Error(), http.StatusInternalServerError)
		return
	}
	var h http.Handler = proxy.NewUpgradeAwareHandler(u, nil /*transport*/, false /*wrapTransport*/, true /*upgradeRequired*/, responder{s})
	if s.cfg.WebSockets && wsstream.IsWebSocketRequestWithStreamCloseProtocol(r) {
		h = translator.NewStreamTranslatorHandler(u, nil, 0, translator.Options{
			Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr, Tty: opts.TTY,
		})
	}
	h.ServeHTTP(w, r)
}

// portForward is getPortForward (server.go:1087-1127) with GetPortForward
// (kubelet_pods.go:2839-2854, kuberuntime_sandbox.go:339-356): the ports
// travel inside the stream for SPDY (one stream pair per port) and in the
// query for WebSockets; CRI PortForward gets the pod's sandbox.
func (s *Server) portForward(w http.ResponseWriter, r *http.Request) {
	tunnel := s.cfg.WebSockets && wsstream.IsWebSocketRequestWithTunnelingProtocol(r)
	opts := &portforward.V4Options{}
	if !tunnel {
		var err error
		if opts, err = portforward.NewV4Options(r); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	pod, err := s.pod(r.PathValue("ns"), r.PathValue("pod"), types.UID(r.PathValue("uid")))
	if err != nil {
		writeError(w, err)
		return
	}
	sandbox, err := s.readySandbox(r.Context(), pod)
	if err != nil {
		writeError(w, err)
		return
	}
	start := time.Now()
	resp, err := s.cfg.Runtime.PortForward(r.Context(), &runtimeapi.PortForwardRequest{PodSandboxId: sandbox, Port: opts.Ports})
	s.journalCall(pod, "", "PortForward", start, err)
	if err != nil {
		_ = streaming.WriteError(err, w)
		return
	}
	u, err := url.Parse(resp.Url)
	if err != nil {
		http.Error(w, "the runtime returned a bad streaming URL: "+err.Error(), http.StatusInternalServerError)
		return
	}
	var h http.Handler = proxy.NewUpgradeAwareHandler(u, nil, false, true, responder{s})
	if tunnel {
		// The WebSocket carries SPDY frames ("tunneling"); unwrapped here,
		// the SPDY goes on to the runtime unchanged.
		h = translator.NewTunnelingHandler(h)
	}
	h.ServeHTTP(w, r)
}

// responder reports a stream that could not be proxied — the request was
// no upgrade, or the runtime's streaming server did not answer — with a
// 500, as the kubelet's (server.go:968-976).
type responder struct{ s *Server }

func (r responder) Error(w http.ResponseWriter, req *http.Request, err error) {
	r.s.logf("stream %s not proxied to the runtime: %v", req.URL.Path, err)
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// journalCall puts a CRI call this server made for pod on the pod's lane
// of the live view, as the runtime manager's calls are: the call, its
// latency (the runtime only hands back a URL; the stream that follows is
// not the call), whether it failed. No Text: the request's own Log line
// is what the terminal prints.
func (s *Server) journalCall(pod *v1.Pod, container, call string, start time.Time, err error) {
	if !s.cfg.Journal.Heard() {
		return
	}
	s.cfg.Journal.Publish(journal.Entry{
		Kind: journal.CRI, Pod: pod.Namespace + "/" + pod.Name, UID: string(pod.UID), Container: container,
		Call: call, Took: time.Since(start), Failed: err != nil,
	})
}

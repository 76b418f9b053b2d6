package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/util/flushwriter"
	"k8s.io/cri-client/pkg/logs"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/core/install" // v1 query-parameter conversions for PodLogOptions
	"k8s.io/kubernetes/pkg/apis/core/v1/validation"
)

// containerLogs is getContainerLogs (server.go:782-899): options from the
// query, the pod and container checked, then the container's CRI log file
// read with the kubelet's reader, following it if asked.
func (s *Server) containerLogs(w http.ResponseWriter, r *http.Request) {
	query := r.URL.Query()
	// The old "tail" parameter, kept by the kubelet for compatibility.
	if tail := query.Get("tail"); tail != "" {
		query["tailLines"] = []string{tail}
		if tail == "all" {
			delete(query, "tailLines")
		}
	}
	opts := &v1.PodLogOptions{}
	if err := legacyscheme.ParameterCodec.DecodeParameters(query, v1.SchemeGroupVersion, opts); err != nil {
		http.Error(w, "unable to decode the query: "+err.Error(), http.StatusBadRequest)
		return
	}
	if errs := validation.ValidatePodLogOptions(opts); len(errs) > 0 {
		http.Error(w, "invalid request: "+errs.ToAggregate().Error(), http.StatusUnprocessableEntity)
		return
	}
	// Stdout or stderr alone needs the alpha feature PodLogsQuerySplitStreams
	// (server.go:854-876); off, as in a default kubelet.
	if opts.Stream != nil && *opts.Stream != v1.LogStreamAll {
		http.Error(w, fmt.Sprintf("unable to return the given log stream: %q", *opts.Stream), http.StatusBadRequest)
		return
	}
	pod, err := s.pod(r.PathValue("ns"), r.PathValue("pod"), "")
	if err != nil {
		writeError(w, err)
		return
	}
	name := r.PathValue("container")
	if _, err := s.containerSpec(pod, name); err != nil {
		writeError(w, err)
		return
	}
	id, err := s.logContainer(r, pod, name, opts.Previous)
	if err != nil {
		writeError(w, err)
		return
	}
	st, err := s.cfg.Runtime.ContainerStatus(r.Context(), id, false)
	if err != nil {
		http.Error(w, fmt.Sprintf("unable to retrieve container logs for %s: %v", id, err), http.StatusInternalServerError)
		return
	}
	// Headers go now, before the first line: a followed log may wait long
	// for one (the kubelet writes zero bytes for the same reason,
	// kubelet_pods.go:1645-1651).
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	out := flushwriter.Wrap(w)
	if err := logs.ReadLogs(r.Context(), st.GetStatus().GetLogPath(), id, toLogOptions(opts), s.cfg.Runtime, out, out); err != nil && !errors.Is(err, r.Context().Err()) {
		_, _ = io.WriteString(out, "\nerror reading the log: "+err.Error()+"\n")
	}
}

// logContainer picks the container whose log is wanted. The kubelet reads
// the pod's status from its status manager (validateContainerLogStatus,
// kubelet_pods.go:1528-1590); we ask the runtime, which has the same
// containers: the newest for the current log, the one before it for
// previous=true.
func (s *Server) logContainer(r *http.Request, pod *v1.Pod, name string, previous bool) (string, error) {
	cs, err := s.containers(r.Context(), pod, name)
	if err != nil {
		return "", err
	}
	if previous {
		// lastState.terminated: the attempt before the current one, whether
		// the current one runs or has exited too.
		if len(cs) < 2 {
			return "", &httpError{code: http.StatusBadRequest, msg: fmt.Sprintf("previous terminated container %q in pod %q not found", name, pod.Name)}
		}
		return cs[1].Id, nil
	}
	if len(cs) == 0 {
		return "", &httpError{code: http.StatusBadRequest, msg: fmt.Sprintf("container %q in pod %q is waiting to start - no logs yet", name, pod.Name)}
	}
	return cs[0].Id, nil
}

// toLogOptions is ReadLogs's conversion (kuberuntime_logs.go:31-51).
func toLogOptions(o *v1.PodLogOptions) *logs.LogOptions {
	opts := &logs.LogOptions{TailLines: o.TailLines, LimitBytes: o.LimitBytes, Follow: o.Follow, Timestamp: o.Timestamps}
	now := time.Now()
	if o.SinceSeconds != nil {
		opts.Since = now.Add(-time.Duration(*o.SinceSeconds) * time.Second)
	}
	if o.SinceTime != nil && o.SinceTime.After(opts.Since) {
		opts.Since = o.SinceTime.Time
	}
	return opts
}

package server

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/kubernetes/scheme"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubelettypes "k8s.io/kubelet/pkg/types"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
)

// routes are the kubelet's, as registered in server.go:483-497 (/pods),
// 586-665 (exec, attach, portForward, containerLogs) and healthz at
// :472-479. Each streaming route exists with and without the pod's UID;
// the apiserver uses the short form, the UID form pins one pod
// incarnation.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		mux.HandleFunc(m+" /exec/{ns}/{pod}/{container}", s.exec)
		mux.HandleFunc(m+" /exec/{ns}/{pod}/{uid}/{container}", s.exec)
		mux.HandleFunc(m+" /attach/{ns}/{pod}/{container}", s.attach)
		mux.HandleFunc(m+" /attach/{ns}/{pod}/{uid}/{container}", s.attach)
		mux.HandleFunc(m+" /portForward/{ns}/{pod}", s.portForward)
		mux.HandleFunc(m+" /portForward/{ns}/{pod}/{uid}", s.portForward)
	}
	mux.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", s.containerLogs)
	mux.HandleFunc("GET /pods", s.getPods)
	healthz.InstallHandler(mux, append([]healthz.HealthChecker{healthz.PingHealthz}, s.cfg.HealthChecks...)...)
	return mux
}

// getPods lists the pods this node is told to run (server.go:902-911):
// the pod manager's view, not the runtime's.
func (s *Server) getPods(w http.ResponseWriter, _ *http.Request) {
	list := &v1.PodList{}
	for _, p := range s.cfg.Pods.GetPods() {
		list.Items = append(list.Items, *p)
	}
	data, err := runtime.Encode(scheme.Codecs.LegacyCodec(v1.SchemeGroupVersion), list)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
}

// httpError is an error with the HTTP status it should be answered with.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func notFound(format string, args ...any) error {
	return &httpError{code: http.StatusNotFound, msg: fmt.Sprintf(format, args...)}
}

func writeError(w http.ResponseWriter, err error) {
	if he, ok := err.(*httpError); ok {
		http.Error(w, he.msg, he.code)
		return
	}
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// uidTranslator is the pod manager's mapping of a mirror pod's UID to its
// static pod's (pod_manager.go:266): the apiserver knows only the mirror.
type uidTranslator interface {
	TranslatePodUID(uid types.UID) kubetypes.ResolvedPodUID
}

// pod finds a pod this node runs. The kubelet answers "pod does not
// exist" (server.go:1026); we say which pod and which node.
func (s *Server) pod(ns, name string, uid types.UID) (*v1.Pod, error) {
	pod, ok := s.cfg.Pods.GetPodByName(ns, name)
	if !ok {
		return nil, notFound("pod %s/%s is not on node %s", ns, name, s.cfg.NodeName)
	}
	if uid != "" && uid != pod.UID {
		t, ok := s.cfg.Pods.(uidTranslator)
		if !ok || types.UID(t.TranslatePodUID(uid)) != pod.UID {
			return nil, notFound("pod %s/%s on node %s has UID %s, not %s", ns, name, s.cfg.NodeName, pod.UID, uid)
		}
	}
	return pod, nil
}

// containerSpec checks that the pod declares a container of that name:
// regular, init or ephemeral (kubecontainer.GetContainerSpec).
func (s *Server) containerSpec(pod *v1.Pod, name string) (*v1.Container, error) {
	if c := kubecontainer.GetContainerSpec(pod, name); c != nil {
		return c, nil
	}
	var names []string
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		names = append(names, c.Name)
	}
	return nil, notFound("container %q is not in pod %s/%s (its containers: %s)", name, pod.Namespace, pod.Name, strings.Join(names, ", "))
}

// runningContainer finds the running container of that name in the
// runtime, as the kubelet's findContainer (kubelet_pods.go:2775-2786):
// the runtime's running pods, found by pod UID, then the container by
// name. We ask the runtime with label filters instead of listing every
// pod.
func (s *Server) runningContainer(ctx context.Context, pod *v1.Pod, name string) (string, error) {
	if _, err := s.containerSpec(pod, name); err != nil {
		return "", err
	}
	cs, err := s.cfg.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{
			kubelettypes.KubernetesPodUIDLabel:        string(pod.UID),
			kubelettypes.KubernetesContainerNameLabel: name,
		},
	})
	if err != nil {
		return "", fmt.Errorf("CRI ListContainers: %w", err)
	}
	if len(cs) == 0 {
		return "", notFound("container %q of pod %s/%s is not running on node %s", name, pod.Namespace, pod.Name, s.cfg.NodeName)
	}
	newestFirst(cs)
	return cs[0].Id, nil
}

// containers lists every container of that name of the pod, running or
// exited, newest first: the current one, then earlier attempts.
func (s *Server) containers(ctx context.Context, pod *v1.Pod, name string) ([]*runtimeapi.Container, error) {
	cs, err := s.cfg.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{
			kubelettypes.KubernetesPodUIDLabel:        string(pod.UID),
			kubelettypes.KubernetesContainerNameLabel: name,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("CRI ListContainers: %w", err)
	}
	newestFirst(cs)
	return cs, nil
}

func newestFirst(cs []*runtimeapi.Container) {
	sort.SliceStable(cs, func(i, j int) bool {
		if a, b := cs[i].GetMetadata().GetAttempt(), cs[j].GetMetadata().GetAttempt(); a != b {
			return a > b
		}
		return cs[i].CreatedAt > cs[j].CreatedAt
	})
}

// readySandbox finds the pod's ready sandbox, which port-forward enters
// (GetPortForward, kuberuntime_sandbox.go:339-356).
func (s *Server) readySandbox(ctx context.Context, pod *v1.Pod) (string, error) {
	sbs, err := s.cfg.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: map[string]string{kubelettypes.KubernetesPodUIDLabel: string(pod.UID)},
	})
	if err != nil {
		return "", fmt.Errorf("CRI ListPodSandbox: %w", err)
	}
	if len(sbs) == 0 {
		return "", notFound("pod %s/%s has no ready sandbox on node %s", pod.Namespace, pod.Name, s.cfg.NodeName)
	}
	sort.SliceStable(sbs, func(i, j int) bool { return sbs[i].CreatedAt > sbs[j].CreatedAt })
	return sbs[0].Id, nil
}

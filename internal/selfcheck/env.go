package main

import (
	"context"
	"sync"

	"k8s.io/client-go/kubernetes"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/state"
	"kubelet-labs/mycore/cri"
)

// Env is where a lab's checks look: the learner's state folder and cluster
// (the same ones the labs use: LABS_STATE_DIR, KUBECONFIG or lab 00's admin
// kubeconfig).
type Env struct {
	once    sync.Once
	kube    kubernetes.Interface
	kubeErr error
}

// Kube returns a client of the learner's cluster, or an error that says to
// start lab 00 (labenv's own words).
func (e *Env) Kube(ctx context.Context) (kubernetes.Interface, error) {
	e.once.Do(func() {
		cfg, err := labenv.RESTConfig(ctx, "")
		if err != nil {
			e.kubeErr = err
			return
		}
		e.kube, e.kubeErr = kubernetes.NewForConfig(cfg)
	})
	return e.kube, e.kubeErr
}

// StatePath is a path in the learner's state folder (which may not exist).
func (e *Env) StatePath(elem ...string) string {
	p, err := state.Path(elem...)
	if err != nil {
		return ""
	}
	return p
}

// NoCluster is the one result a lab's checks return when the cluster does
// not answer: nothing else can be checked.
func NoCluster(err error) []Result {
	return []Result{NotYet("the cluster does not answer: "+err.Error(), "start lab 00 in another terminal (go run ./labs/00-cluster) and leave it running")}
}

// CRI connects to a container runtime: endpoint "" is the course's
// containerd (what sudo scripts/containerd-up.sh started, as the labs find
// it); a lab's mock runtime is reached by its socket, unix://….
func (e *Env) CRI(ctx context.Context, endpoint string) (*cri.Client, error) {
	if endpoint == "" {
		env, err := labruntime.Load()
		if err != nil {
			return nil, err
		}
		endpoint = env.Endpoint
	}
	return cri.Dial(ctx, endpoint)
}

package main

import (
	"context"
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/state"
	"kubelet-labs/mycore/bootstrap"
	"kubelet-labs/mycore/cri"
)

// Env is where a lab's checks look: the learner's state folder and cluster
// (the same ones the labs use: LABS_STATE_DIR, KUBECONFIG or lab 00's admin
// kubeconfig).
type Env struct {
	once    sync.Once
	cfg     *rest.Config
	kube    kubernetes.Interface
	kubeErr error
}

// Kube returns a client of the learner's cluster, or an error that says to
// start lab 00 (labenv's own words).
func (e *Env) Kube(ctx context.Context) (kubernetes.Interface, error) {
	e.once.Do(func() {
		e.cfg, e.kubeErr = labenv.RESTConfig(ctx, "")
		if e.kubeErr != nil {
			return
		}
		e.kube, e.kubeErr = kubernetes.NewForConfig(e.cfg)
	})
	return e.kube, e.kubeErr
}

// ClusterCA returns a client of the learner's cluster and the CA its
// nodes trust (kube-public/cluster-info, as a joining node finds it), for
// checks of the certificates a lab left.
func (e *Env) ClusterCA(ctx context.Context) (kubernetes.Interface, []byte, error) {
	kube, err := e.Kube(ctx)
	if err != nil {
		return nil, nil, err
	}
	caPEM, _, err := bootstrap.ClusterCA(ctx, e.cfg, kube)
	return kube, caPEM, err
}

// Server is the apiserver's URL, once Kube (or ClusterCA) has succeeded.
func (e *Env) Server() string { return e.cfg.Host }

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
		// the course's containerd: a dial error names the command that starts it
		return cri.Dial(ctx, env.Endpoint, cri.WithStartHint(labruntime.UpHint))
	}
	return cri.Dial(ctx, endpoint)
}

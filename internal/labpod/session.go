// Package labpod is what labs 15 and 16 share: they play the kubelet of a
// node no real kubelet serves, for one pod of their own. Begin checks the
// flags, opens the cluster and the runtime (internal/labruntime), creates the
// pod object bound to that node and starts it with our SyncPod; End removes
// what is left. Timeline prints the lab's lines with a stopwatch.
package labpod

import (
	"context"
	"flag"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/internal/state"
	"kubelet-labs/mycore/kuberuntime"
)

// Options are the flags the labs share.
type Options struct {
	Kubeconfig string
	labruntime.Flags
	PodFile  string
	NodeName string
	Image    string // tests: a containerd flavour's busybox image (no flag)
}

// Register adds the shared flags to fs; nodeName is the default node the
// lab's pod is bound to.
func (o *Options) Register(fs *flag.FlagSet, nodeName string) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", labenv.KubeconfigUsage)
	o.Flags.Register(fs, labruntime.Mock)
	fs.StringVar(&o.PodFile, "pod", "", "pod manifest to use instead of the lab's pod.yaml (copy it and edit: the repository may be read-only)")
	fs.StringVar(&o.NodeName, "node-name", nodeName, "the node the pod is bound to (spec.nodeName); no kubelet serves it but this lab")
}

// Session is one run of a lab: the cluster, the runtime, our runtime
// manager on it (its log lines printed as "kubelet  ..."), and the pod —
// created in the apiserver and running in the runtime.
type Session struct {
	Host   string
	Client kubernetes.Interface
	RT     *labruntime.Runtime
	M      *kuberuntime.Manager
	Pod    *v1.Pod
	Out    *Timeline
}

// Begin checks the input, connects to the cluster, opens the runtime,
// creates the pod object bound to o.NodeName (so the apiserver gives it a
// graceful deletion: an unbound pod is deleted at once) and starts it in
// the runtime. Leftovers of an interrupted run of the same pod go first.
func Begin(ctx context.Context, o Options, lab string, manifest []byte, out *labenv.Printer) (s *Session, err error) {
	s = &Session{Out: NewTimeline(out)}
	if err := labenv.CheckNodeName(o.NodeName); err != nil {
		return nil, err
	}
	pod, err := Load(o.PodFile, manifest)
	if err != nil {
		return nil, err
	}
	cfg, err := labenv.RESTConfig(ctx, o.Kubeconfig)
	if err != nil {
		return nil, err
	}
	s.Host = cfg.Host
	if s.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	dir, err := state.Ensure(lab)
	if err != nil {
		return nil, err
	}
	s.RT, err = labruntime.Open(ctx, labruntime.Options{Flags: o.Flags, Dir: dir, Image: o.Image})
	if err != nil {
		return nil, err
	}
	s.Out.Printf("cluster %s; runtime %s on %s", s.Host, s.RT.Name, s.RT.CRI.Endpoint)
	s.M = kuberuntime.New(s.RT.CRI, kuberuntime.Options{PodLogsDir: s.RT.PodLogsDir, Log: func(f string, a ...any) { s.Out.Printf("kubelet  "+f, a...) }})

	pod.Spec.NodeName = o.NodeName
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Image == "busybox" {
			pod.Spec.Containers[i].Image = s.RT.Image
		}
	}
	if n, err := CleanRuntime(ctx, s.RT.CRI, pod.Namespace, pod.Name); err != nil {
		s.End(false)
		return nil, err
	} else if n > 0 {
		s.Out.Printf("removed %d sandbox(es) of %s/%s left in the runtime by an earlier run", n, pod.Namespace, pod.Name)
	}
	if s.Pod, err = Create(ctx, s.Client, pod, s.Out.Printf); err != nil {
		s.End(false)
		return nil, err
	}
	grace := "unset"
	if g := s.Pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = fmt.Sprintf("%ds", *g)
	}
	s.Out.Printf("pod %s/%s created (uid %s), bound to %s: %d containers, spec.terminationGracePeriodSeconds=%s",
		s.Pod.Namespace, s.Pod.Name, s.Pod.UID, s.Pod.Spec.NodeName, len(s.Pod.Spec.Containers), grace)
	if err := Start(ctx, s.M, s.RT.CRI, s.Pod, s.Out.Printf); err != nil {
		s.End(true)
		return nil, err
	}
	return s, nil
}

// End closes the runtime; with cleanup, it first removes the pod from the
// runtime and the apiserver (see Cleanup) — after an error or Ctrl-C, or
// when the lab leaves that to no one.
func (s *Session) End(cleanup bool) {
	if cleanup && s.Pod != nil {
		Cleanup(s.Client, s.RT.CRI, s.Pod, s.Out.Printf)
	}
	s.RT.Close()
}

// Lab 17 is the kubelet's syncPod in full: each sync computes what to do
// (computePodActions: a new sandbox? which containers to kill, and why?
// which to start?) and then does it, with restarts per the restart policy
// behind the crash-loop back-off, and liveness, readiness and startup
// probes run by a probe manager of its own.
//
// The node (lab-node-17) is lab 12's (internal/labnode over
// mycore/mykubelet, without a node server); what this lab adds lives in
// mycore/kuberuntime (actions.go, sync.go) and mycore/prober. This file
// starts the node and says what to try.
//
//	go run ./labs/17-sync-pod                       # on containerd (started once: sudo scripts/containerd-up.sh)
//	go run ./labs/17-sync-pod --runtime mock        # on the mock CRI
//	kubectl apply -f labs/17-sync-pod/liveness.yaml # in another terminal
package main

import (
	"context"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labnames"
	"kubelet-labs/internal/labnode"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/labs/17-sync-pod/mocktmp"
)

// The crash-loop back-off of this lab: fast, so a minute shows the
// doubling (1 s, 2 s, 4 s, 8 s, 16 s). The kubelet's: 10 s to 5 min.
const (
	labBackOffInitial = time.Second
	labBackOffMax     = 16 * time.Second
)

func main() {
	o := labnode.Defaults("17-sync-pod", labnames.Node17)
	o.Kubelet.BackOffInitial, o.Kubelet.BackOffMax = labBackOffInitial, labBackOffMax
	labenv.Main(labenv.Lab{
		Name:  "17-sync-pod",
		Flags: o.Register,
		Check: o.Check,
		Run:   func(ctx context.Context, out *labenv.Printer) error { return run(ctx, o, out, nil) },
	})
}

// run is the lab; onReady hands its test the node once it runs.
func run(ctx context.Context, o labnode.Options, out *labenv.Printer, onReady func(*labnode.Node)) error {
	// On the mock, the exec probes' /tmp: the mock has no filesystem.
	o.Mock = append(o.Mock, mocktmp.New().Option())

	// 1-3. The runtime, the join, the kubelet: chapter 3's node, now with
	// computePodActions deciding each sync and a probe manager feeding it.
	n, err := labnode.Start(ctx, o, out)
	if err != nil {
		return err
	}
	defer n.Close()
	out.Printf("crash-loop back-off %s doubling to %s (the kubelet's: 10s to 5m); PLEG relist every %s", o.Kubelet.BackOffInitial, o.Kubelet.BackOffMax, o.Kubelet.RelistPeriod)
	hints(out, o, n.Runtime)
	if onReady != nil {
		onReady(n)
	}

	// 4. The sync loop, until Ctrl-C.
	if err := n.Run(ctx); err != nil {
		return err
	}
	out.Printf("stopped: pods keep running in the runtime (as when a kubelet restarts)")
	return nil
}

// hints prints what to try, with this runtime's crictl and image ID.
func hints(out *labenv.Printer, o labnode.Options, rt *labruntime.Runtime) {
	out.Printf("Pods with spec.nodeName=%s run here. Try, in another terminal (pods in labs/17-sync-pod/):", o.Name)
	out.Printf("  kubectl apply -f labs/17-sync-pod/liveness.yaml -f labs/17-sync-pod/readiness.yaml -f labs/17-sync-pod/startup.yaml -f labs/17-sync-pod/crashloop.yaml")
	if rt.Mock == nil {
		out.Printf("  kubectl apply -f labs/17-sync-pod/web.yaml          # HTTP and TCP probes against the pod IP")
	}
	out.Printf("  kubectl get pods -o wide -w")
	out.Printf("Change what the exec probes see, in a container of pod P:")
	out.Printf("  CRICTL=%q", rt.Crictl)
	out.Printf("  $CRICTL exec $($CRICTL ps -q --name app --label io.kubernetes.pod.name=P) touch /tmp/sick")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The pods' busybox: the course's containerd image, whose name the mock's carries.
	if st, err := rt.CRI.Images.ImageStatus(rt.CRI.Context(ctx), &runtimeapi.ImageSpec{Image: labruntime.BusyboxImage}, false); err == nil && st.GetImage() != nil {
		out.Printf("The same busybox by its ID is another image string, so another spec hash (a restart):")
		out.Printf("  kubectl set image pod/liveness app=%s", st.GetImage().GetId())
	}
}

// Lab 12 is chapter 3 on a real runtime: the pods bound to node
// lab-node-12 flow informer → pod manager → pod workers, the workers' syncer
// runs them on containerd (a sandbox with CNI networking, then the
// containers), the kubelet's own PLEG relists containerd every second into
// the pod cache that gates the workers, and the status manager posts what
// the runtime shows back to the apiserver.
//
// All of it is mycore/mykubelet (the wiring) over mycore/kuberuntime (pods
// to CRI calls), mycore/plegruntime (CRI to the PLEG), mycore/podworkers and
// mycore/status. A kubelet starts them in this order: the runtime, the
// join, the kubelet (internal/labnode, which labs 14, 17 and 18 start
// too; this lab's node has no server), then the sync loop.
//
//	sudo scripts/containerd-up.sh                            # once: the course's only root command
//	go run ./labs/12-pleg-containerd
//	kubectl apply -f labs/12-pleg-containerd/busybox.yaml    # in another terminal
package main

import (
	"context"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labnames"
	"kubelet-labs/internal/labnode"
)

func main() {
	o := labnode.Defaults("12-pleg-containerd", labnames.Node12)
	labenv.Main(labenv.Lab{
		Name:  "12-pleg-containerd",
		Flags: o.Register,
		Check: o.Check,
		Run:   func(ctx context.Context, out *labenv.Printer) error { return run(ctx, o, out, nil) },
	})
}

// run is the lab; onReady hands its test the node once it runs.
func run(ctx context.Context, o labnode.Options, out *labenv.Printer, onReady func(*labnode.Node)) error {
	// 1-3. The runtime, the join (lab 05's), and the kubelet — chapter 3 in
	// one piece: pod source, pod manager, pod workers, PLEG + pod cache,
	// runtime manager, status manager.
	n, err := labnode.Start(ctx, o, out)
	if err != nil {
		return err
	}
	defer n.Close()
	rt := n.Runtime
	out.Printf("PLEG relists %s every %s; pods with spec.nodeName=%s run there, their logs under %s. Try, in another terminal:",
		rt.Name, o.Kubelet.RelistPeriod, o.Name, n.Kubelet.PodLogsDir())
	out.Printf("  kubectl apply -f labs/12-pleg-containerd/busybox.yaml && kubectl get pod busybox -o wide -w")
	out.Printf("  %s ps --label io.kubernetes.pod.namespace=default", rt.Crictl)
	if onReady != nil {
		onReady(n)
	}

	// 4. The sync loop, until Ctrl-C.
	if err := n.Run(ctx); err != nil {
		return err
	}
	out.Printf("stopped: pods keep running in %s (as when a kubelet restarts); the next run picks them up, or stops those whose pod is gone", rt.Name)
	return nil
}

package main

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
)

// crashLoop: a pod whose command exits 1 a second after it starts, under
// restartPolicy Always: the kubelet restarts it behind the crash-loop
// back-off (10 s doubling to 5 min, kuberuntime_manager.go). Fixed when a
// pod of that name has run for steadyFor without a restart.
var crashLoop = &Scenario{
	Name:      "crash-loop",
	Lab:       "17-sync-pod",
	Summary:   "a pod that will not stay up, and waits longer each time",
	NeedsNode: true,
	Break: func(ctx context.Context, env *Env, rec *Record) error {
		sc := "crash-loop"
		pod := faultPod(sc, *rec, crashPod, v1.Container{
			Name: "app", Image: image,
			Command: []string{"sh", "-c", `echo "app: starting"; sleep 1; echo "app: lost my work queue, giving up" >&2; exit 1`},
		})
		if err := startFaultPod(ctx, env, rec, sc, "The pod of make break SCENARIO=crash-loop. Edit it, then delete the pod and apply this file again.", pod); err != nil {
			return err
		}
		env.Out.Printf("waiting until it has been restarted once …")
		return waitPod(ctx, env, rec.Namespace, crashPod, "restarted once", func(p *v1.Pod) bool {
			return p != nil && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].RestartCount > 0
		})
	},
	LookFirst: func(rec Record) []string {
		return []string{
			fmt.Sprintf("kubectl get pod -n %s %s -w            (STATUS and RESTARTS, for a minute)", rec.Namespace, crashPod),
			fmt.Sprintf("kubectl describe pod -n %s %s          (State, Last State, Events)", rec.Namespace, crashPod),
			fmt.Sprintf("kubectl logs -n %s %s --previous", rec.Namespace, crashPod),
			"the node's log and the live view: its lane, and the back-off counting down",
		}
	},
	Check: func(ctx context.Context, env *Env, rec Record) (Result, error) {
		var r Result
		p, err := fixedPod(ctx, env, rec, crashPod, &r)
		if p == nil || err != nil {
			return r, err
		}
		if string(p.UID) == rec.UID {
			r.see("it is still the pod the break made (uid %s): a pod's command cannot be changed in place", p.UID)
			return r, nil
		}
		if !containerRunning(p) {
			return r, nil
		}
		up := env.Now().Sub(p.Status.ContainerStatuses[0].State.Running.StartedAt.Time)
		if up < steadyFor {
			r.see("its container has been up %s: it must stay up %s (the broken one lasted about 1 s) — check again in a moment", up.Round(time.Second), steadyFor)
			return r, nil
		}
		r.see("its container has been up %s without exiting", up.Round(time.Second))
		r.Fixed = true
		return r, nil
	},
	Undo: func(ctx context.Context, env *Env, rec Record) error {
		if err := removePods(ctx, env, "crash-loop", rec.Namespace, crashPod); err != nil {
			return err
		}
		return removeFile(rec.File)
	},
}

const crashPod = "faults-crash"

// steadyFor is how long the fixed container must have run: well past the
// second the broken one lasted, and past a back-off's first restart.
const steadyFor = 15 * time.Second

package main

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// stuckTerminating: a pod with a finalizer of a controller that is not
// running. Deleted, the node stops its container and asks the apiserver
// to remove the object (grace 0, status_manager.go), but the apiserver
// keeps an object while it has finalizers: Terminating for ever. Fixed when
// the pod the break made is gone.
var stuckTerminating = &Scenario{
	Name:      "stuck-terminating",
	Lab:       "16-kill-pod",
	Summary:   "a deleted pod that stays Terminating",
	NeedsNode: true,
	Break: func(ctx context.Context, env *Env, rec *Record) error {
		pod := faultPod("stuck-terminating", *rec, stuckPod, v1.Container{
			Name: "app", Image: image,
			Command: []string{"sh", "-c", `trap 'exit 0' TERM; echo "app: up"; while true; do sleep 1; done`},
		})
		pod.Finalizers = []string{stuckFinalizer}
		got, err := createPod(ctx, env, pod)
		if err != nil {
			return err
		}
		rec.UID = string(got.UID)
		env.Out.Printf("created pod %s/%s on node %s; waiting for it to run …", rec.Namespace, stuckPod, rec.Node)
		if err := waitPod(ctx, env, rec.Namespace, stuckPod, "running", containerRunning); err != nil {
			return err
		}
		pods := env.Admin.CoreV1().Pods(rec.Namespace)
		if err := pods.Delete(ctx, stuckPod, metav1.DeleteOptions{}); err != nil {
			return err
		}
		env.Out.Printf("deleted it (kubectl delete pod -n %s %s); waiting for its node to finish its part …", rec.Namespace, stuckPod)
		if err := waitPod(ctx, env, rec.Namespace, stuckPod, "given up by its node (deletion grace 0)", func(p *v1.Pod) bool {
			return p == nil || p.DeletionGracePeriodSeconds != nil && *p.DeletionGracePeriodSeconds == 0
		}); err != nil {
			return err
		}
		env.Out.Printf("its node is done with it, and the pod is still there")
		return nil
	},
	LookFirst: func(rec Record) []string {
		return []string{
			fmt.Sprintf("kubectl get pod -n %s %s", rec.Namespace, stuckPod),
			fmt.Sprintf("kubectl get pod -n %s %s -o yaml      (metadata: what is the apiserver waiting for?)", rec.Namespace, stuckPod),
			"the node's log and the live view: did the node stop the container, and what did it ask the apiserver last?",
			"crictl ps -a   (is anything of the pod still running?)",
		}
	},
	Check: func(ctx context.Context, env *Env, rec Record) (Result, error) {
		var r Result
		p, err := env.Admin.CoreV1().Pods(rec.Namespace).Get(ctx, stuckPod, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			r.see("pod %s/%s is gone", rec.Namespace, stuckPod)
			r.Fixed = true
			return r, nil
		case err != nil:
			return r, err
		}
		r.see("%s", describe(p))
		if string(p.UID) != rec.UID {
			r.see("a new pod of that name (uid %s): the one the break made is gone", p.UID)
			r.Fixed = true
		}
		return r, nil
	},
	Undo: func(ctx context.Context, env *Env, rec Record) error {
		return removePods(ctx, env, "stuck-terminating", rec.Namespace, stuckPod)
	},
}

const (
	stuckPod = "faults-stuck"
	// stuckFinalizer is a backup operator's, as if it had been
	// uninstalled: nobody is left to remove it.
	stuckFinalizer = "backup.kubelet-labs.dev/snapshot-before-delete"
)

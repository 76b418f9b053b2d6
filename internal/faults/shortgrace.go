package main

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// shortGrace: a container that saves its work on SIGTERM for 5 s, in a
// pod that gives it 2 s (terminationGracePeriodSeconds): at the grace the
// runtime kills it, exit 137 instead of 0. The break deletes the pod, as a
// rollout would; the check deletes the learner's pod the same way and
// watches how its container ends: fixed when it exits 0.
var shortGrace = &Scenario{
	Name:      "short-grace",
	Lab:       "15-stop-escalation",
	Summary:   "a pod that loses its work whenever it is stopped",
	NeedsNode: true,
	Break: func(ctx context.Context, env *Env, rec *Record) error {
		sc := "short-grace"
		grace := int64(2)
		pod := faultPod(sc, *rec, gracePod, v1.Container{
			Name: "app", Image: image,
			Command: []string{"sh", "-c", `trap 'echo "app: saving my work"; sleep 5; echo "app: saved"; exit 0' TERM; echo "app: up"; while true; do sleep 1; done`},
		})
		pod.Spec.TerminationGracePeriodSeconds = &grace
		file, err := writeManifest(env, sc, "The pod of make break SCENARIO=short-grace. Edit it, then apply it again:\nmake check SCENARIO=short-grace stops it the way the break did, and watches how it ends.", pod)
		if err != nil {
			return err
		}
		rec.File = file
		if _, err := createPod(ctx, env, pod); err != nil {
			return err
		}
		env.Out.Printf("created pod %s/%s on node %s from %s; waiting for it to run, then deleting it …", rec.Namespace, gracePod, rec.Node, file)
		ended, err := stopAndWatch(ctx, env, rec.Namespace)
		if err != nil {
			return err
		}
		if ended != nil && ended.ExitCode == 0 {
			return fmt.Errorf("its container stopped cleanly (exit 0): this node did not show the fault")
		}
		env.Out.Printf("deleted it, as a rollout or a drain would: it did not stop cleanly")
		return nil
	},
	LookFirst: func(rec Record) []string {
		return []string{
			"the node's log and the live view: the pod's last lines — how its container was stopped, and how it ended",
			fmt.Sprintf("the manifest: %s (what the container does on SIGTERM, and what the pod gives it)", rec.File),
			fmt.Sprintf("kubectl apply -f %s, then kubectl delete pod -n %s %s while you watch: kubectl get pod -n %s %s -w -o wide", rec.File, rec.Namespace, gracePod, rec.Namespace, gracePod),
		}
	},
	Check: func(ctx context.Context, env *Env, rec Record) (Result, error) {
		var r Result
		p, err := env.Admin.CoreV1().Pods(rec.Namespace).Get(ctx, gracePod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			r.see("no pod %s/%s: apply your fixed manifest (kubectl apply -f %s); check stops it as the break did, and watches how it ends", rec.Namespace, gracePod, rec.File)
			return r, nil
		}
		if err != nil {
			return r, err
		}
		r.see("%s", describe(p))
		if p.DeletionTimestamp != nil {
			r.see("it is being deleted: apply your manifest again once it is gone, then check")
			return r, nil
		}
		r.see("deleting it, as the break did, and watching how its container ends …")
		ended, err := stopAndWatch(ctx, env, rec.Namespace)
		if err != nil {
			return r, err
		}
		if ended == nil {
			r.see("the pod went away without its node reporting how its container ended; apply it again and check again")
			return r, nil
		}
		r.see("container app ended: exit code %d (%s)", ended.ExitCode, ended.Reason)
		r.Fixed = ended.ExitCode == 0
		if !r.Fixed {
			r.see("not a clean stop; the pod is gone: apply your manifest again before the next check")
		}
		return r, nil
	},
	Undo: func(ctx context.Context, env *Env, rec Record) error {
		if err := removePods(ctx, env, "short-grace", rec.Namespace, gracePod); err != nil {
			return err
		}
		return removeFile(rec.File)
	},
}

const gracePod = "faults-grace"

// stopAndWatch waits for the grace pod to run, deletes it (its own grace
// period, as kubectl delete does) and watches it until it is gone; it
// returns how its container ended as the node last reported it (nil: not
// reported). The kubelet posts the terminated status before its final
// delete (status_manager.go), so the watch sees it.
func stopAndWatch(ctx context.Context, env *Env, ns string) (*v1.ContainerStateTerminated, error) {
	pods := env.Admin.CoreV1().Pods(ns)
	if err := waitPod(ctx, env, ns, gracePod, "running", containerRunning); err != nil {
		return nil, err
	}
	p, err := pods.Get(ctx, gracePod, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, env.Wait)
	defer cancel()
	w, err := pods.Watch(wctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", gracePod).String(), ResourceVersion: p.ResourceVersion})
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	if err := pods.Delete(ctx, gracePod, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(p.UID))}); err != nil {
		return nil, err
	}
	var ended *v1.ContainerStateTerminated
	for {
		select {
		case <-wctx.Done():
			return ended, fmt.Errorf("pod %s/%s was not gone %s after its delete: is its node still running?", ns, gracePod, env.Wait)
		case ev, ok := <-w.ResultChan():
			if !ok {
				return ended, fmt.Errorf("the watch of pod %s/%s ended before the pod was gone", ns, gracePod)
			}
			if ev.Type == watch.Error {
				return ended, fmt.Errorf("watching pod %s/%s: %v", ns, gracePod, apierrors.FromObject(ev.Object))
			}
			q, ok := ev.Object.(*v1.Pod)
			if !ok || q.UID != p.UID {
				continue
			}
			for _, c := range q.Status.ContainerStatuses {
				if c.State.Terminated != nil {
					ended = c.State.Terminated.DeepCopy()
				}
			}
			if ev.Type == watch.Deleted {
				return ended, nil
			}
		}
	}
}

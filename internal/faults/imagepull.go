package main

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// imagePull: a pod whose image is not on the node, under a pull policy
// of Never (the real kubelet: ErrImageNeverPull), from a registry name that
// can never resolve (.invalid, RFC 2606: our kubelet, which pulls what is
// missing whatever the policy, fails the pull). There is no registry on
// these machines. Fixed when a pod of that name runs.
var imagePull = &Scenario{
	Name:      "image-pull",
	Lab:       "11-containerd",
	Summary:   "a pod that never gets a container",
	NeedsNode: true,
	Break: func(ctx context.Context, env *Env, rec *Record) error {
		sc := "image-pull"
		pod := faultPod(sc, *rec, imagePod, v1.Container{
			Name: "app", Image: missingImage, ImagePullPolicy: v1.PullNever,
			Command: []string{"sh", "-c", `echo "app: up"; while true; do sleep 1; done`},
		})
		if err := startFaultPod(ctx, env, rec, sc, "The pod of make break SCENARIO=image-pull. Edit it, then delete the pod and apply this file again.", pod); err != nil {
			return err
		}
		env.Out.Printf("waiting until its node has given up on its container …")
		var ran bool
		err := waitPod(ctx, env, rec.Namespace, imagePod, "waiting for its image", func(p *v1.Pod) bool {
			if containerRunning(p) {
				ran = true
				return true
			}
			if p == nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Waiting == nil {
				return false
			}
			why := p.Status.ContainerStatuses[0].State.Waiting.Reason
			return why != "" && why != "ContainerCreating"
		})
		if err == nil && ran {
			return errors.New("its node ran the pod anyway: its runtime makes up any image it is asked for (lab 18 with --runtime mock). Run this scenario on lab 01's node (the real kubelet) or on lab 18 with containerd")
		}
		return err
	},
	LookFirst: func(rec Record) []string {
		return []string{
			fmt.Sprintf("kubectl get pod -n %s %s                (STATUS)", rec.Namespace, imagePod),
			fmt.Sprintf("kubectl describe pod -n %s %s           (the container's State, and Events)", rec.Namespace, imagePod),
			"crictl images   (what the node's runtime has; CONTAINER_RUNTIME_ENDPOINT: the node's runtime, as its lab printed)",
			"the node's log: what it did for the container",
		}
	},
	Check: func(ctx context.Context, env *Env, rec Record) (Result, error) {
		var r Result
		p, err := fixedPod(ctx, env, rec, imagePod, &r)
		if p == nil || err != nil {
			return r, err
		}
		c := p.Spec.Containers[0]
		r.see("its image: %s, pull policy %s", c.Image, c.ImagePullPolicy)
		if !containerRunning(p) {
			return r, nil
		}
		if st := p.Status.ContainerStatuses[0]; st.ImageID != "" {
			r.see("the runtime runs it from image %s", st.ImageID)
		}
		r.Fixed = true
		return r, nil
	},
	Undo: func(ctx context.Context, env *Env, rec Record) error {
		if err := removePods(ctx, env, "image-pull", rec.Namespace, imagePod); err != nil {
			return err
		}
		return removeFile(rec.File)
	},
}

const imagePod = "faults-image"

// missingImage names a registry that cannot exist: .invalid never
// resolves (RFC 2606).
const missingImage = "registry.invalid/kubelet-labs/app:1.0"

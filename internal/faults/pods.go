package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"kubelet-labs/internal/labruntime"
)

// image is what the scenarios' pods run: the busybox every runtime of the
// course has (containerd-up.sh imports it; the mock knows it by name).
const image = labruntime.BusyboxImage

// faultPod is a pod of the scenario named fault bound to the recorded node (there is no
// scheduler in lab 00's control plane: spec.nodeName binds it).
func faultPod(fault string, rec Record, name string, c v1.Container) *v1.Pod {
	return &v1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: rec.Namespace, Labels: map[string]string{faultLabel: fault}},
		Spec: v1.PodSpec{
			NodeName:   rec.Node,
			Containers: []v1.Container{c},
		},
	}
}

// writeManifest writes pod as YAML to faults/NAME.yaml, with a comment
// on top: the file the learner reads, edits and applies again.
func writeManifest(env *Env, fault, comment string, pod *v1.Pod) (string, error) {
	b, err := yaml.Marshal(pod)
	if err != nil {
		return "", err
	}
	// Marshal writes the zero status and creationTimestamp: not what a
	// learner writes by hand.
	var keep []string
	for _, l := range strings.Split(string(b), "\n") {
		if l == "status: {}" || strings.TrimSpace(l) == "creationTimestamp: null" || strings.TrimSpace(l) == "resources: {}" {
			continue
		}
		keep = append(keep, l)
	}
	var head strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(comment), "\n") {
		head.WriteString("# " + l + "\n")
	}
	path := filepath.Join(env.Dir, fault+".yaml")
	return path, os.WriteFile(path, []byte(head.String()+strings.Join(keep, "\n")), 0o644)
}

// createPod creates pod as the learner's kubectl apply would.
func createPod(ctx context.Context, env *Env, pod *v1.Pod) (*v1.Pod, error) {
	got, err := env.Admin.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("pod %s/%s already exists: delete it first (kubectl delete pod -n %s %s)", pod.Namespace, pod.Name, pod.Namespace, pod.Name)
	}
	return got, err
}

// waitPod waits until cond holds for the pod (nil: gone).
func waitPod(ctx context.Context, env *Env, ns, name, what string, cond func(*v1.Pod) bool) error {
	return env.waitFor(ctx, fmt.Sprintf("pod %s/%s %s", ns, name, what), func(ctx context.Context) (bool, error) {
		p, err := env.Admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return cond(nil), nil
		}
		if err != nil {
			return false, err
		}
		return cond(p), nil
	})
}

// containerRunning: the pod's (only) container runs now.
func containerRunning(p *v1.Pod) bool {
	return p != nil && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running != nil
}

// describe is one line about a pod as check saw it, in kubectl's words.
func describe(p *v1.Pod) string {
	s := fmt.Sprintf("pod %s/%s on %s: phase %s", p.Namespace, p.Name, orDash(p.Spec.NodeName), orDash(string(p.Status.Phase)))
	if p.DeletionTimestamp != nil {
		s += fmt.Sprintf(", being deleted since %s", p.DeletionTimestamp.UTC().Format(time.TimeOnly))
	}
	for _, c := range p.Status.ContainerStatuses {
		s += fmt.Sprintf("; container %s %s", c.Name, containerState(c.State))
		if c.RestartCount > 0 {
			s += fmt.Sprintf(", %d restart(s)", c.RestartCount)
		}
	}
	return s
}

func containerState(st v1.ContainerState) string {
	switch {
	case st.Running != nil:
		return "running since " + st.Running.StartedAt.UTC().Format(time.TimeOnly)
	case st.Terminated != nil:
		return fmt.Sprintf("terminated, exit code %d (%s)", st.Terminated.ExitCode, st.Terminated.Reason)
	case st.Waiting != nil:
		return "waiting: " + orDash(st.Waiting.Reason)
	}
	return "in no state yet"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// removePods deletes the scenario's pods in ns — those it labelled and
// the learner's own under the names it used — as undo does: finalizers
// off, a normal delete (the node stops the containers), and if the node
// does not finish it within Wait, a forced one.
func removePods(ctx context.Context, env *Env, fault, ns string, names ...string) error {
	pods := env.Admin.CoreV1().Pods(ns)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: faultLabel + "=" + fault})
	if err != nil {
		return err
	}
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	seen := map[string]bool{}
	for _, name := range names {
		if seen[name] {
			continue
		}
		seen[name] = true
		_, err := pods.Patch(ctx, name, types.JSONPatchType, []byte(`[{"op":"replace","path":"/metadata/finalizers","value":[]}]`), metav1.PatchOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("remove the finalizers of pod %s/%s: %w", ns, name, err)
		}
		if err := ignoreNotFound(pods.Delete(ctx, name, metav1.DeleteOptions{})); err != nil {
			return err
		}
		if waitPod(ctx, env, ns, name, "gone", func(p *v1.Pod) bool { return p == nil }) != nil {
			zero := int64(0)
			if err := ignoreNotFound(pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})); err != nil {
				return err
			}
			env.Out.Printf("pod %s/%s: its node did not finish the delete within %s; deleted with grace 0", ns, name, env.Wait)
		}
	}
	return nil
}

// removeFile removes a manifest the break wrote.
func removeFile(path string) error {
	if path == "" {
		return nil
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// fixedPod is how the checks of the scenarios whose fix is a new pod from
// the edited manifest begin: the pod of that name, described into r, or
// nil (with what to do said into r) when the learner has not applied it
// yet.
func fixedPod(ctx context.Context, env *Env, rec Record, name string, r *Result) (*v1.Pod, error) {
	p, err := env.Admin.CoreV1().Pods(rec.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		r.see("no pod %s/%s: apply your fixed manifest (%s) — the check looks for that name", rec.Namespace, name, rec.File)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r.see("%s", describe(p))
	return p, nil
}

// startFaultPod is how the scenarios whose fix is an edited manifest break:
// the pod's manifest written for the learner to edit (comment heads it),
// the pod created from it, both remembered in rec, and said.
func startFaultPod(ctx context.Context, env *Env, rec *Record, fault, comment string, pod *v1.Pod) error {
	file, err := writeManifest(env, fault, comment, pod)
	if err != nil {
		return err
	}
	rec.File = file
	got, err := createPod(ctx, env, pod)
	if err != nil {
		return err
	}
	rec.UID = string(got.UID)
	env.Out.Printf("created pod %s/%s on node %s from %s", rec.Namespace, pod.Name, rec.Node, file)
	return nil
}

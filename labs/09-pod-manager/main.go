// Lab 09 is the kubelet's pod manager and the stream that feeds it. A node
// joins (as lab 05), watches the pods bound to it — the kubelet's apiserver
// source, spec.nodeName=NODE — and every change arrives as one of the ops
// syncLoopIteration dispatches: ADD, UPDATE, DELETE (graceful), RECONCILE,
// REMOVE. Each is handed to the handler that updates the pod manager, the
// kubelet's record of the pods it should run; the lab prints the op, then
// what the manager holds.
//
//	go run ./labs/09-pod-manager
//	kubectl apply -f labs/09-pod-manager/pod.yaml     # in another terminal
package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubepod "k8s.io/kubernetes/pkg/kubelet/pod"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labnames"
	"kubelet-labs/internal/labnode"
	"kubelet-labs/internal/labrecord"
	"kubelet-labs/mycore/podconfig"
)

type options struct {
	kubeconfig string
	nodeName   string
	timeout    time.Duration
}

func main() {
	var o options
	labenv.Main(labenv.Lab{
		Name:  "09-pod-manager",
		Flags: o.flags,
		Check: o.check,
		Run:   func(ctx context.Context, out *labenv.Printer) error { return run(ctx, o, out, nil) },
	})
}

func (o *options) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", labenv.KubeconfigUsage)
	fs.StringVar(&o.nodeName, "node-name", labnames.Node09, "name of the node to join; pods bound to it (spec.nodeName) are watched")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long the join may take (certificate issued, node Ready)")
}

func (o *options) check() error {
	if o.timeout <= 0 {
		return fmt.Errorf("--timeout must be positive")
	}
	return labenv.CheckNodeName(o.nodeName)
}

// observer is told about every update after it was dispatched (tests).
type observer func(u kubetypes.PodUpdate, pods kubepod.Manager)

func run(ctx context.Context, o options, out *labenv.Printer, observe observer) error {
	if err := o.check(); err != nil {
		return err
	}
	cfg, err := labenv.RESTConfig(ctx, o.kubeconfig)
	if err != nil {
		return err
	}

	// 1. A node, as lab 05 makes it; from here on we are system:node:NAME.
	j, err := labnode.Join(ctx, cfg, "09-pod-manager", o.nodeName, o.timeout, out)
	if err != nil {
		return err
	}
	defer j.Stop()

	// What the source sends is also written down, for make check LAB=09:
	// apply, label, a status write and the deletes leave nothing in the
	// cluster once the pod is gone (the apiserver keeps no history of a
	// label change or a grace period). Each run appends (internal/labrecord).
	record, err := labrecord.Append(filepath.Join(j.Dir, opsRecordFile))
	if err != nil {
		return err
	}
	defer func() {
		if err := record.Err(); err != nil {
			out.Printf("%v", err)
		}
		record.Close()
	}()

	// 2. The pod manager, and the handler that does to it what the
	// kubelet's HandlePodAdditions/Updates/Removes/Reconcile do.
	pods := kubepod.NewBasicPodManager()
	handler := podconfig.ManagerHandler{Pods: pods}

	// 3. The apiserver source: pods with spec.nodeName=NAME, as the node
	// sees them (the Node authorizer lets it list exactly those). Its
	// channel closes once ctx has ended and its goroutines have returned.
	updates := podconfig.Watch(ctx, j.Client, o.nodeName)
	out.Printf("watching pods with spec.nodeName=%s (the kubelet's apiserver source); try, in another terminal:", o.nodeName)
	out.Printf("  kubectl apply -f labs/09-pod-manager/pod.yaml")

	// 4. syncLoopIteration, config branch only: one update, one handler.
	for u := range updates {
		if u.Op == kubetypes.ADD && len(u.Pods) > 1 {
			out.Printf("%-9s %d pods in one update: the source's first list (after a restart, every pod arrives this way)", "ADD", len(u.Pods))
		}
		for _, p := range u.Pods {
			old, _ := pods.GetPodByUID(p.UID)
			out.Printf("%s", describeOp(u, p, old))
		}
		if u.Op == kubetypes.ADD && len(u.Pods) == 0 {
			out.Printf("%-9s (no pods yet: the first list of the source came back empty; the kubelet now counts the source as seen)", "ADD")
		}
		if err := podconfig.Dispatch(ctx, u, handler); err != nil {
			out.Printf("  %v", err)
		}
		recordOps(record, u)
		out.Printf("%s", describeManager(pods))
		if observe != nil {
			observe(u, pods)
		}
	}
	out.Printf("stopped: the Node stays, as when a kubelet dies (kubectl delete node %s removes it)", o.nodeName)
	return nil
}

// describeOp is one line per pod and op, saying why the op was chosen.
func describeOp(u kubetypes.PodUpdate, p, old *v1.Pod) string {
	op := podconfig.OpName(u.Op)
	name := p.Namespace + "/" + p.Name
	switch u.Op {
	case kubetypes.ADD:
		return fmt.Sprintf("%-9s %s uid %s, phase %s: new to the source → HandlePodAdditions", op, name, p.UID, phase(p))
	case kubetypes.UPDATE:
		return fmt.Sprintf("%-9s %s: %s changed → HandlePodUpdates", op, name, changed(old, p))
	case kubetypes.RECONCILE:
		return fmt.Sprintf("%-9s %s: only the status changed (phase %s, %d conditions) → HandlePodReconcile", op, name, phase(p), len(p.Status.Conditions))
	case kubetypes.DELETE:
		// deletionTimestamp is the deadline: when the delete was asked
		// for, plus the grace period.
		grace := int64(-1)
		if p.DeletionGracePeriodSeconds != nil {
			grace = *p.DeletionGracePeriodSeconds
		}
		if grace == 0 {
			return fmt.Sprintf("%-9s %s: graceful deletion with grace 0s (a forced delete): the apiserver writes that first, then removes the pod → HandlePodUpdates", op, name)
		}
		return fmt.Sprintf("%-9s %s: graceful deletion, grace %ds, deadline (deletionTimestamp) %s → HandlePodUpdates; the pod stays Terminating until the node stops its containers, and no one does here",
			op, name, grace, p.DeletionTimestamp.Local().Format("15:04:05"))
	case kubetypes.REMOVE:
		return fmt.Sprintf("%-9s %s uid %s: gone from the apiserver → HandlePodRemoves", op, name, p.UID)
	}
	return fmt.Sprintf("%-9s %s", op, name)
}

// changed names what differs between the manager's copy and the update.
func changed(old, p *v1.Pod) string {
	if old == nil {
		return "something"
	}
	var what []string
	if !reflect.DeepEqual(old.Spec, p.Spec) {
		what = append(what, "spec")
	}
	if !reflect.DeepEqual(old.Labels, p.Labels) {
		what = append(what, fmt.Sprintf("labels %v", p.Labels))
	}
	if !reflect.DeepEqual(userAnnotations(old), userAnnotations(p)) {
		what = append(what, fmt.Sprintf("annotations %v", userAnnotations(p)))
	}
	if len(what) == 0 {
		return "the deletion fields"
	}
	return strings.Join(what, ", ")
}

// userAnnotations leaves out the three the kubelet counts as its own
// (localAnnotations, config.go:282-286): config.source, config.mirror and
// config.seen. config.hash is not among them: a change of it is an UPDATE.
func userAnnotations(p *v1.Pod) map[string]string {
	m := map[string]string{}
	for k, v := range p.Annotations {
		switch k {
		case kubetypes.ConfigSourceAnnotationKey, kubetypes.ConfigMirrorAnnotationKey, kubetypes.ConfigFirstSeenAnnotationKey:
		default:
			m[k] = v
		}
	}
	return m
}

// describeManager prints what the pod manager holds: its pods, its mirror
// pods, the static ↔ mirror pairing by UID, and orphaned mirror pods.
func describeManager(pods kubepod.Manager) string {
	all, mirrors, orphans := pods.GetPodsAndMirrorPods()
	var b strings.Builder
	fmt.Fprintf(&b, "  pod manager: %d pod(s), %d mirror pod(s)", len(all), len(mirrors))
	sortPods(all)
	for _, p := range all {
		fmt.Fprintf(&b, "\n    pod    %-40s uid %s  %s", kubecontainer.GetPodFullName(p), p.UID, podState(p))
	}
	sortPods(mirrors)
	for _, p := range mirrors {
		fmt.Fprintf(&b, "\n    mirror %-40s uid %s  %s=%s", kubecontainer.GetPodFullName(p), p.UID, kubetypes.ConfigMirrorAnnotationKey, p.Annotations[kubetypes.ConfigMirrorAnnotationKey])
	}
	podToMirror, _ := pods.GetUIDTranslations()
	var statics []string
	for static := range podToMirror {
		statics = append(statics, string(static))
	}
	sort.Strings(statics)
	for _, static := range statics {
		mirror := string(podToMirror[kubetypes.ResolvedPodUID(static)])
		if mirror == "" {
			mirror = "(no mirror pod)"
		}
		fmt.Fprintf(&b, "\n    static %s ↔ mirror %s", static, mirror)
	}
	for _, name := range orphans {
		fmt.Fprintf(&b, "\n    orphaned mirror pod %s: no static pod of that name (the kubelet deletes it at housekeeping, lab 08)", name)
	}
	return b.String()
}

func sortPods(p []*v1.Pod) {
	sort.Slice(p, func(i, j int) bool { return kubecontainer.GetPodFullName(p[i]) < kubecontainer.GetPodFullName(p[j]) })
}

func phase(p *v1.Pod) v1.PodPhase {
	if p.Status.Phase == "" {
		return "(none: no kubelet wrote a status yet)"
	}
	return p.Status.Phase
}

func podState(p *v1.Pod) string {
	s := fmt.Sprintf("labels %v", p.Labels)
	if p.DeletionTimestamp != nil {
		grace := int64(0)
		if p.DeletionGracePeriodSeconds != nil {
			grace = *p.DeletionGracePeriodSeconds
		}
		s += fmt.Sprintf("  Terminating (grace %ds)", grace)
	}
	return s
}

// opsRecordFile is the record in the node's state folder: one line per
// pod of each op the source sent,
//
//	2026-11-26T04:23:08Z DELETE default/web grace=30
//
// (grace= on DELETE lines, " mirror" after a mirror pod).
const opsRecordFile = "ops.log"

func recordOps(r *labrecord.Record, u kubetypes.PodUpdate) {
	for _, p := range u.Pods {
		line := fmt.Sprintf("%s %s %s/%s", time.Now().UTC().Format(time.RFC3339), podconfig.OpName(u.Op), p.Namespace, p.Name)
		if u.Op == kubetypes.DELETE && p.DeletionGracePeriodSeconds != nil {
			line += fmt.Sprintf(" grace=%d", *p.DeletionGracePeriodSeconds)
		}
		if kubetypes.IsMirrorPod(p) {
			line += " mirror"
		}
		r.Line("%s", line)
	}
}

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/internal/labnames"
	"kubelet-labs/internal/state"
	"kubelet-labs/mycore/podconfig"
)

// lab08 names what lab 08's README uses: its node, the static pod it
// copies in, and that pod's mirror.
const (
	lab08Node     = labnames.Node08
	lab08Manifest = "web.yaml"
	lab08Start    = "start the lab: go run ./labs/08-static-pod (and leave it running)"
	lab08Copy     = "cp labs/08-static-pod/web.yaml into the manifests folder (README, Run it: the second terminal)"
	lab08Edit     = "edit it the README's way: sed 's/app: web/app: web-v2/' labs/08-static-pod/web.yaml > $M/.web.yaml && mv $M/.web.yaml $M/web.yaml"
)

func init() {
	register("08", labCheck{Title: "static pods and mirror pods", Check: checkLab08})
}

// checkLab08 looks at lab 08's node, its manifests folder and the mirror
// pod of web.yaml, in the order the README has the learner make them.
func checkLab08(ctx context.Context, e *Env) []Result {
	kube, err := e.Kube(ctx)
	if err != nil {
		return NoCluster(err)
	}
	var results []Result
	node, err := kube.CoreV1().Nodes().Get(ctx, lab08Node, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		node = nil
		results = append(results, NotYet("no Node "+lab08Node+": the lab has not joined yet", lab08Start))
	case err != nil:
		return NoCluster(err)
	default:
		running, ago := lab08LeaseRenewed(ctx, kube, lab08Node)
		results = append(results, Done("node %s joined (%s)", lab08Node, lab08LeaseWords(running, ago)))
	}
	static, file, r := lab08StaticPod(e)
	results = append(results, r)
	mirror, r := lab08Mirror(ctx, kube, node, static)
	results = append(results, r)
	return append(results, lab08Edited(static, file, mirror)...)
}

// lab08StaticPod reads web.yaml from the manifests folder as the lab does,
// so that its hash is the one the lab computed (the path is in the hash),
// and returns the pod and the file's path.
func lab08StaticPod(e *Env) (*v1.Pod, string, Result) {
	dir := e.StatePath("nodes", lab08Node, "manifests")
	file := filepath.Join(dir, lab08Manifest)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, "", NotYet("no static pod folder "+dir, lab08Start+": it makes the folder")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, "", NotYet("no "+lab08Manifest+" in the static pod folder "+dir, lab08Copy)
	}
	static, err := podconfig.DecodeManifest(data, file, lab08Node)
	if err != nil {
		return nil, "", NotYet(fmt.Sprintf("%s in %s is not a valid static pod: %v", lab08Manifest, dir, err), lab08Copy)
	}
	return static, file, Done("the static pod folder %s holds %s: static pod %s", dir, lab08Manifest, static.Name)
}

// lab08Mirror finds the static pod's mirror pod and checks it is what the
// node must write past NodeRestriction.
func lab08Mirror(ctx context.Context, kube kubernetes.Interface, node *v1.Node, static *v1.Pod) (*v1.Pod, Result) {
	name := podconfig.StaticPodName("web", lab08Node)
	if node == nil || static == nil {
		return nil, NotYet("no mirror pod "+name+" yet", "the running lab writes it within a second of the copy; first the steps above")
	}
	mirror, err := kube.CoreV1().Pods(static.Namespace).Get(ctx, name, metav1.GetOptions{})
	running, _ := lab08LeaseRenewed(ctx, kube, lab08Node)
	start := ""
	if !running {
		start = "; " + lab08Start
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, NotYet("no mirror pod "+name+" in the apiserver", "the running lab writes it within a second of the copy"+start)
	case err != nil:
		return nil, NotYet("cannot read pod "+name+": "+err.Error(), "is lab 00 running?")
	}
	if what := lab08MirrorProblem(mirror, node); what != "" {
		return nil, NotYet("pod "+name+" "+what, "kubectl delete pod "+name+": the running lab makes it again"+start)
	}
	return mirror, Done("mirror pod %s: %s=%s, one controller ownerReference, to Node/%s with its current uid", mirror.Name,
		kubetypes.ConfigMirrorAnnotationKey, mirror.Annotations[kubetypes.ConfigMirrorAnnotationKey], lab08Node)
}

// lab08Edited: web.yaml is no longer the shipped one, and the mirror pod
// carries its new hash (the node replaced it).
func lab08Edited(static *v1.Pod, file string, mirror *v1.Pod) []Result {
	if static == nil {
		return []Result{
			NotYet(lab08Manifest+" not edited yet", lab08Edit),
			NotYet("no mirror pod of the edited "+lab08Manifest+" yet", "the running lab replaces the mirror pod within a second of the edit"),
		}
	}
	var results []Result
	hash := string(static.UID)
	edited := false
	if shipped, err := lab08ShippedHash(file); err != nil {
		results = append(results, NotYet("cannot read the shipped web.yaml: "+err.Error(), "run make check from the repository"))
	} else if hash == shipped {
		results = append(results, NotYet(lab08Manifest+" in the folder is still the shipped one (hash "+hash+")", lab08Edit))
	} else {
		edited = true
		results = append(results, Done("%s was edited: its hash is %s, the shipped file's %s", lab08Manifest, hash, shipped))
	}
	got := ""
	if mirror != nil {
		got = mirror.Annotations[kubetypes.ConfigMirrorAnnotationKey]
	}
	switch {
	case !edited:
		results = append(results, NotYet("no mirror pod of the edited "+lab08Manifest+" yet", "first the edit above"))
	case mirror == nil:
		results = append(results, NotYet("no mirror pod of "+lab08Manifest+" as it is now", "the running lab replaces the mirror pod within a second of the edit"))
	case got != hash:
		results = append(results, NotYet(fmt.Sprintf("the mirror pod has %s=%s, but %s now has hash %s", kubetypes.ConfigMirrorAnnotationKey, got, lab08Manifest, hash),
			"the running lab replaces the mirror pod within a second of the edit: "+lab08Start))
	default:
		results = append(results, Done("the mirror pod follows the edit: %s = the hash of %s now", kubetypes.ConfigMirrorAnnotationKey, lab08Manifest))
	}
	return results
}

// lab08MirrorProblem says what keeps pod from being a correct mirror pod
// of a static pod of node, or "" (NodeRestriction's rules for a node
// creating a pod, plugin/pkg/admission/noderestriction/admission.go:277-336).
func lab08MirrorProblem(pod *v1.Pod, node *v1.Node) string {
	if _, ok := pod.Annotations[kubetypes.ConfigMirrorAnnotationKey]; !ok {
		return "has no " + kubetypes.ConfigMirrorAnnotationKey + " annotation: it is not a mirror pod"
	}
	if pod.Spec.NodeName != node.Name {
		return "is bound to " + pod.Spec.NodeName + ", not " + node.Name
	}
	if len(pod.OwnerReferences) != 1 {
		return fmt.Sprintf("has %d ownerReferences, want one, to Node/%s", len(pod.OwnerReferences), node.Name)
	}
	o := pod.OwnerReferences[0]
	switch {
	case o.Kind != "Node" || o.Name != node.Name:
		return fmt.Sprintf("is owned by %s/%s, want Node/%s", o.Kind, o.Name, node.Name)
	case o.UID != node.UID:
		return fmt.Sprintf("is owned by an older Node/%s (uid %s; the Node now has %s)", node.Name, o.UID, node.UID)
	case o.Controller == nil || !*o.Controller:
		return "has an ownerReference to the Node that is not its controller"
	}
	return ""
}

// lab08ShippedHash is the hash labs/08-static-pod/web.yaml would have at
// path: the file as the lab ships it, before the README's edit.
func lab08ShippedHash(path string) (string, error) {
	root, err := state.Root()
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(filepath.Join(root, "labs", "08-static-pod", lab08Manifest))
	if err != nil {
		return "", err
	}
	pod, err := podconfig.DecodeManifest(data, path, lab08Node)
	if err != nil {
		return "", err
	}
	return string(pod.UID), nil
}

// lab08LeaseRenewed says whether node's Lease was renewed within its
// duration (the lab is running) and how long ago it was.
func lab08LeaseRenewed(ctx context.Context, kube kubernetes.Interface, node string) (bool, time.Duration) {
	lease, err := kube.CoordinationV1().Leases("kube-node-lease").Get(ctx, node, metav1.GetOptions{})
	if err != nil || lease.Spec.RenewTime == nil {
		return false, -1
	}
	return lab08LeaseFresh(lease, time.Now())
}

func lab08LeaseFresh(lease *coordinationv1.Lease, now time.Time) (bool, time.Duration) {
	ago := now.Sub(lease.Spec.RenewTime.Time)
	limit := 40 * time.Second
	if d := lease.Spec.LeaseDurationSeconds; d != nil {
		limit = time.Duration(*d) * time.Second
	}
	return ago <= limit, ago
}

func lab08LeaseWords(running bool, ago time.Duration) string {
	switch {
	case ago < 0:
		return "no Lease: the lab is not running"
	case running:
		return "the lab is running: its Lease was renewed " + ago.Round(time.Second).String() + " ago"
	}
	return "the lab is not running now: its Lease was last renewed " + ago.Round(time.Second).String() + " ago"
}

// Lab 08 runs static pods the kubelet's way: pod manifests in a folder on
// the node, read by the kubelet's file source into its pod manager; and
// for each static pod a mirror pod in the apiserver, written by the
// kubelet's own mirror client, so `kubectl get pods` shows what the node
// runs on its own.
//
//	go run ./labs/08-static-pod
//	cp labs/08-static-pod/web.yaml <the manifests folder it prints>/
package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubepod "k8s.io/kubernetes/pkg/kubelet/pod"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labnames"
	"kubelet-labs/internal/labnode"
	"kubelet-labs/mycore/mirror"
	"kubelet-labs/mycore/podconfig"
)

type options struct {
	kubeconfig   string
	nodeName     string
	manifests    string
	fileCheck    time.Duration
	housekeeping time.Duration
	timeout      time.Duration
}

func main() {
	var o options
	labenv.Main(labenv.Lab{
		Name:  "08-static-pod",
		Flags: o.flags,
		Check: o.check,
		Run:   func(ctx context.Context, out *labenv.Printer) error { return run(ctx, o, out, nil) },
	})
}

func (o *options) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", labenv.KubeconfigUsage)
	fs.StringVar(&o.nodeName, "node-name", labnames.Node08, "name of the node to join; static pods are named NAME-<node-name>")
	fs.StringVar(&o.manifests, "manifests", "", "static pod folder (kubelet: staticPodPath) (default: manifests/ in the node's state folder, nodes/<node-name>/)")
	fs.DurationVar(&o.fileCheck, "file-check-frequency", podconfig.DefaultFileCheckFrequency, "how often the folder is listed again besides inotify (kubelet: fileCheckFrequency)")
	fs.DurationVar(&o.housekeeping, "housekeeping-interval", 2*time.Second, "how often mirror pods are reconciled and orphans deleted (kubelet: housekeepingPeriod, fixed at 2s)")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long the join may take (certificate issued, node Ready)")
}

func (o *options) check() error {
	if o.timeout <= 0 || o.fileCheck <= 0 || o.housekeeping <= 0 {
		return fmt.Errorf("--timeout, --file-check-frequency and --housekeeping-interval must be positive")
	}
	return labenv.CheckNodeName(o.nodeName)
}

// run is the lab; ready (tests) is handed the manifests folder once both
// sources have sent their first update.
func run(ctx context.Context, o options, out *labenv.Printer, ready func(manifests string)) error {
	if err := o.check(); err != nil {
		return err
	}
	if o.manifests != "" { // before joining: a wrong flag should cost nothing
		if _, err := labenv.StaticPodFolder("", o.manifests); err != nil {
			return err
		}
	}
	cfg, err := labenv.RESTConfig(ctx, o.kubeconfig)
	if err != nil {
		return err
	}

	// 1. A node, as lab 05 makes it; from here on we are system:node:NAME.
	j, err := labnode.Join(ctx, cfg, "08-static-pod", o.nodeName, o.timeout, out)
	if err != nil {
		return err
	}
	defer j.Stop()

	dir, err := labenv.StaticPodFolder(j.Dir, o.manifests)
	if err != nil {
		return err
	}

	// The kubelet's config code reports bad manifests only through its
	// logger: give it one that prints each problem as one line.
	logger := podconfig.LineLogger(func(l string) { out.Printf("kubelet:  %s", l) }, 0, time.Minute)
	ctx = klog.NewContext(ctx, logger)

	// 2. The two sources of pods, each a channel of ops (ADD, UPDATE,
	// DELETE, RECONCILE, REMOVE). The file source is what the kubelet
	// starts at kubelet.go:385-388 — config.NewSourceFile feeding
	// PodConfig — in a version that stops: the kubelet's own never does
	// (a goroutine looping forever at file.go:94-111, a watch under
	// wait.Forever at file_linux.go:53, and PodConfig's reader ranging
	// over a channel nobody closes, mux.go:73-79), which is fine for a
	// kubelet that lives as long as its process and not for a lab that
	// should end cleanly. mycore/podconfig's TestFilesMatchUpstream runs
	// both on one folder: the same pods, UIDs and annotations.
	sources, stopSources := context.WithCancel(ctx)
	files := podconfig.Files(sources, logger, dir, o.nodeName, o.fileCheck)
	out.Printf("static pod folder (kubelet: staticPodPath): %s", dir)
	out.Printf("  try: cp labs/08-static-pod/web.yaml %s/", dir)
	// The apiserver source: mirror pods (and any pod bound to us).
	apiserver := podconfig.Watch(sources, j.Client, o.nodeName)
	defer func() {
		// Each source closes its channel once its goroutines have
		// returned: nothing of ours outlives run.
		stopSources()
		for range files {
		}
		for range apiserver {
		}
	}()

	// 3. The pod manager, and the mirror reconcile over the real client.
	pods := kubepod.NewBasicPodManager()
	handler := podconfig.ManagerHandler{Pods: pods}
	mirrors := &mirror.Reconciler{NodeName: o.nodeName, Pods: pods, Client: mirror.NewClient(j.Client, o.nodeName), Nodes: mirror.NodeGetter{Client: j.Client}}

	// 4. The loop: syncLoopIteration's config branch, and housekeeping.
	dispatch := func(u kubetypes.PodUpdate) {
		if u.Op == kubetypes.ADD && len(u.Pods) == 0 {
			out.Printf("%-9s %-9s (no pods yet; this first, empty update tells the kubelet the source is ready)", u.Source, "ADD")
		}
		for _, p := range u.Pods {
			out.Printf("%s", describe(u, p))
		}
		if err := podconfig.Dispatch(ctx, u, handler); err != nil {
			out.Printf("  %v", err)
		}
	}
	// Until the apiserver source has listed once, we do not know which
	// mirror pods exist.
	apiSeen, filesSeen := false, false
	seen := func(fromAPI bool) {
		wasReady := apiSeen && filesSeen
		apiSeen, filesSeen = apiSeen || fromAPI, filesSeen || !fromAPI
		if !wasReady && apiSeen && filesSeen && ready != nil {
			ready(dir)
		}
	}
	// drain takes every update already waiting, so that a REMOVE and the
	// ADD that follows it (an edited manifest: new hash, new UID) are both
	// in the pod manager before we compare mirror pods. It says false once
	// a source has closed: the lab is stopping.
	drain := func() bool {
		for {
			select {
			case u, ok := <-files:
				if !ok {
					return false
				}
				dispatch(u)
				seen(false)
			case u, ok := <-apiserver:
				if !ok {
					return false
				}
				dispatch(u)
				seen(true)
			default:
				return true
			}
		}
	}
	print := func(actions []mirror.Action) {
		for _, a := range actions {
			out.Printf("mirror    %s", a)
		}
	}
	housekeeping := time.NewTicker(o.housekeeping)
	defer housekeeping.Stop()
	for {
		select {
		case <-ctx.Done():
			out.Printf("stopped: the Node and the mirror pods stay, as when a kubelet dies")
			return nil
		case <-housekeeping.C:
			// HandlePodCleanups (kubelet_pods.go:1317-1329) deletes orphaned
			// mirror pods; pod worker resyncs re-run the mirror check.
			if drain() && apiSeen {
				print(mirrors.Reconcile(ctx))
			}
			continue
		case u, ok := <-files:
			if !ok {
				continue // closed only once ctx has ended: the first case follows
			}
			dispatch(u)
			seen(false)
		case u, ok := <-apiserver:
			if !ok {
				continue
			}
			dispatch(u)
			seen(true)
		}
		if !drain() {
			continue
		}
		// The kubelet's SyncPod calls tryReconcileMirrorPods for every
		// static pod it syncs (kubelet.go:2185-2186).
		if apiSeen {
			print(mirrors.SyncStaticPods(ctx))
		}
	}
}

// describe is one line per pod and op.
func describe(u kubetypes.PodUpdate, p *v1.Pod) string {
	from := u.Source
	switch {
	case kubetypes.IsMirrorPod(p):
		return fmt.Sprintf("%-9s %-9s mirror pod %s uid %s, %s=%s", from, podconfig.OpName(u.Op), kubecontainer.GetPodFullName(p), p.UID,
			kubetypes.ConfigMirrorAnnotationKey, p.Annotations[kubetypes.ConfigMirrorAnnotationKey])
	case kubetypes.IsStaticPod(p):
		return fmt.Sprintf("%-9s %-9s static pod %s uid %s (= its %s: a hash of the manifest, the node and the file path)", from, podconfig.OpName(u.Op), kubecontainer.GetPodFullName(p), p.UID,
			kubetypes.ConfigHashAnnotationKey)
	}
	return fmt.Sprintf("%-9s %-9s pod %s uid %s", from, podconfig.OpName(u.Op), kubecontainer.GetPodFullName(p), p.UID)
}

// Lab 08 runs static pods the kubelet's way: pod manifests in a folder on
// the node, read by the kubelet's own file source (config.NewSourceFile)
// through its own PodConfig, into its pod manager; and for each static pod
// a mirror pod in the apiserver, written by the kubelet's own mirror
// client, so `kubectl get pods` shows what the node runs on its own.
//
//	go run ./labs/08-static-pod
//	cp labs/08-static-pod/web.yaml <the manifests folder it prints>/
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/config"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubepod "k8s.io/kubernetes/pkg/kubelet/pod"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/mycore/mirror"
	"kubelet-labs/mycore/node"
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
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "admin kubeconfig: the server, its CA, and who makes the bootstrap token (default: $KUBECONFIG, else the state folder's admin.kubeconfig)")
	flag.StringVar(&o.nodeName, "node-name", "lab-node-08", "name of the node to join; static pods are named NAME-<node-name>")
	flag.StringVar(&o.manifests, "manifests", "", "static pod folder (kubelet: staticPodPath) (default: manifests/ in the node's state folder, nodes/<node-name>/)")
	flag.DurationVar(&o.fileCheck, "file-check-frequency", 20*time.Second, "how often the folder is listed again besides inotify (kubelet: fileCheckFrequency)")
	flag.DurationVar(&o.housekeeping, "housekeeping-interval", 2*time.Second, "how often mirror pods are reconciled and orphans deleted (kubelet: housekeepingPeriod, fixed at 2s)")
	flag.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long the join may take (certificate issued, node Ready)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		labenv.Fatal(err)
	}
	// The file source's goroutines never stop (see below): exit, rather
	// than return to a caller that would inherit them.
	os.Exit(0)
}

func run(ctx context.Context, o options, w io.Writer) error {
	out := &lockedWriter{w: w}
	if o.timeout <= 0 || o.fileCheck <= 0 || o.housekeeping <= 0 {
		return fmt.Errorf("--timeout, --file-check-frequency and --housekeeping-interval must be positive")
	}
	if o.manifests != "" { // before joining: a wrong flag should cost nothing
		if err := ensureFolder(o.manifests); err != nil {
			return err
		}
	}
	cfg, err := labenv.RESTConfig(ctx, o.kubeconfig)
	if err != nil {
		return err
	}

	// 1. A node, as lab 05 makes it; from here on we are system:node:NAME.
	out.printf("joining %s as node %s", cfg.Host, o.nodeName)
	nodeDir, err := labenv.NodeDir(o.nodeName)
	if err != nil {
		return err
	}
	j, err := node.Join(ctx, node.JoinOptions{Admin: cfg, Dir: nodeDir, Name: o.nodeName, Lab: "08-static-pod", Timeout: o.timeout,
		Log: func(f string, a ...any) { out.printf("  "+f, a...) }})
	if err != nil {
		return err
	}
	defer j.Stop()

	dir := o.manifests
	if dir == "" {
		dir = filepath.Join(j.Dir, "manifests")
	}
	if err := ensureFolder(dir); err != nil {
		return err
	}

	// The kubelet's config code reports bad manifests only through its
	// logger: give it one that prints each problem as one line.
	logger := podconfig.LineLogger(func(l string) { out.printf("kubelet:  %s", l) }, 0, time.Minute)
	ctx = klog.NewContext(ctx, logger)

	// 2. The event recorder the kubelet hands to PodConfig: events go to
	// the apiserver as the node (PodConfig only records one when two
	// pods of one source share a name).
	events := record.NewBroadcaster(record.WithContext(ctx))
	defer events.Shutdown()
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: j.Client.CoreV1().Events("")})
	recorder := events.NewRecorder(scheme.Scheme, v1.EventSource{Component: "kubelet", Host: o.nodeName})

	// 3. The kubelet's own config plumbing (kubelet.go:382-388): PodConfig
	// and the file source. Neither stops: NewSourceFile starts a
	// goroutine that loops forever and a watcher under wait.Forever
	// (file.go:94-113, file_linux.go:53), and PodConfig's channel reader
	// ranges over a channel nobody closes (mux.go:73,79). This program
	// exits when it is done, as the kubelet does.
	podCfg := config.NewPodConfig(recorder, noStartupSLI{})
	if dir, err = filepath.Abs(dir); err != nil {
		return err
	}
	config.NewSourceFile(logger, dir, types.NodeName(o.nodeName), o.fileCheck, podCfg.Channel(ctx, kubetypes.FileSource))
	out.printf("static pod folder (kubelet: staticPodPath): %s", dir)
	out.printf("  try: cp labs/08-static-pod/web.yaml %s/", dir)

	// 4. The apiserver source: mirror pods (and any pod bound to us).
	apiserver := podconfig.Watch(ctx, j.Client, o.nodeName)

	// 5. The pod manager, and the mirror reconcile over the real client.
	pods := kubepod.NewBasicPodManager()
	handler := podconfig.ManagerHandler{Pods: pods}
	mirrors := &mirror.Reconciler{NodeName: o.nodeName, Pods: pods, Client: mirror.NewClient(j.Client, o.nodeName), Nodes: mirror.NodeGetter{Client: j.Client}}

	// 6. The loop: syncLoopIteration's config branch, and housekeeping.
	dispatch := func(u kubetypes.PodUpdate) {
		if u.Op == kubetypes.ADD && len(u.Pods) == 0 {
			out.printf("%-9s %-9s (no pods yet; this first, empty update tells the kubelet the source is ready)", u.Source, "ADD")
		}
		for _, p := range u.Pods {
			out.printf("%s", describe(u, p))
		}
		if err := podconfig.Dispatch(ctx, u, handler); err != nil {
			out.printf("  %v", err)
		}
	}
	// drain takes every update already waiting, so that a REMOVE and the
	// ADD that follows it (an edited manifest: new hash, new UID) are both
	// in the pod manager before we compare mirror pods.
	apiSeen := false
	drain := func() bool {
		for {
			select {
			case u := <-podCfg.Updates():
				dispatch(u)
			case u, ok := <-apiserver:
				if !ok {
					return false
				}
				dispatch(u)
				apiSeen = true
			default:
				return true
			}
		}
	}
	print := func(actions []mirror.Action) {
		for _, a := range actions {
			out.printf("mirror    %s", a)
		}
	}
	housekeeping := time.NewTicker(o.housekeeping)
	defer housekeeping.Stop()
	for {
		var u kubetypes.PodUpdate
		ok := true
		select {
		case <-ctx.Done():
			out.printf("stopped: the Node and the mirror pods stay, as when a kubelet dies")
			return nil
		case u = <-podCfg.Updates():
		case u, ok = <-apiserver:
			apiSeen = apiSeen || ok
		case <-housekeeping.C:
			// HandlePodCleanups (kubelet_pods.go:1317-1329) deletes orphaned
			// mirror pods; pod worker resyncs re-run the mirror check.
			if drain() && apiSeen {
				print(mirrors.Reconcile(ctx))
			}
			continue
		}
		if !ok {
			return nil // ctx ended: the apiserver source closed its channel
		}
		dispatch(u)
		if !drain() {
			return nil
		}
		// The kubelet's SyncPod calls tryReconcileMirrorPods for every
		// static pod it syncs (kubelet.go:2185-2186). Until the apiserver
		// source has listed once, we do not know which mirrors exist.
		if apiSeen {
			print(mirrors.SyncStaticPods(ctx))
		}
	}
}

// ensureFolder creates the manifests folder if needed (0755, like
// /etc/kubernetes/manifests) and refuses anything that is not a folder.
func ensureFolder(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("manifests folder: %w", err)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("manifests folder %s is not a folder", dir)
	}
	return nil
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

// noStartupSLI stands in for the kubelet's pod startup latency tracker:
// PodConfig calls it for every non-static pod without a nil check
// (config.go:205-207).
type noStartupSLI struct{}

func (noStartupSLI) ObservedPodOnWatch(*v1.Pod, time.Time) {}

// lockedWriter serialises the heartbeat goroutines' lines with ours.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format+"\n", args...)
}

package podconfig

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/config"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
)

// upstreamDirEnv names the folder the helper process reads with the
// kubelet's own file source.
const upstreamDirEnv = "PODCONFIG_UPSTREAM_FILE_SOURCE_DIR"

// TestFilesMatchUpstream: for the same folder and node, Files sends the
// very pods the kubelet's own file source and PodConfig send — same UIDs
// (the hash of the file), names, defaults, tolerations, annotations. The
// kubelet's source never stops, so it runs in a child process (this test
// binary again, which TestMain turns into runUpstreamFileSource).
func TestFilesMatchUpstream(t *testing.T) {
	noLeaks(t)
	dir := t.TempDir()
	put(t, dir, "web.yaml", podYAML("web", "busybox:1.35.0", ""))
	put(t, dir, "fixed.yaml", podYAML("fixed", "busybox", "  uid: my-own-uid\n  namespace: kube-system\n")+
		"  restartPolicy: OnFailure\n  tolerations: [{key: a, operator: Exists, effect: NoSchedule}]\n")
	put(t, dir, "db.json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"db","annotations":{"a":"b"}},`+
		`"spec":{"containers":[{"name":"c","image":"busybox:latest","ports":[{"containerPort":80}]}]}}`)

	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), upstreamDirEnv+"="+dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	var upstream []*v1.Pod
	if err := json.Unmarshal(out, &upstream); err != nil {
		t.Fatalf("helper output %q: %v", out, err)
	}

	ours := startFiles(t, dir, time.Hour).expect(t, "ADD db-node-a fixed-node-a web-node-a").Pods
	byUID := map[types.UID]*v1.Pod{}
	for _, p := range ours {
		byUID[p.UID] = p
	}
	if len(upstream) != len(ours) {
		t.Fatalf("upstream sent %d pods, we sent %d", len(upstream), len(ours))
	}
	for _, up := range upstream {
		me, ok := byUID[up.UID]
		if !ok {
			t.Errorf("upstream pod %s has UID %s; none of ours has it", up.Name, up.UID)
			continue
		}
		// Only the first-seen time may differ: it is when each source ran.
		up.Annotations[kubetypes.ConfigFirstSeenAnnotationKey] = ""
		me.Annotations[kubetypes.ConfigFirstSeenAnnotationKey] = ""
		if !reflect.DeepEqual(up, me) {
			a, _ := json.Marshal(up)
			b, _ := json.Marshal(me)
			t.Errorf("pod %s differs:\nupstream %s\nours     %s", up.Name, a, b)
		}
	}
}

// runUpstreamFileSource is the child process of TestFilesMatchUpstream
// (TestMain calls it when upstreamDirEnv is set): the kubelet's
// config.NewSourceFile through config.PodConfig on the folder, its first
// update printed as JSON. Its goroutines never stop; the process exits.
func runUpstreamFileSource(dir string) int {
	pc := config.NewPodConfig(record.NewFakeRecorder(10), noStartupSLI{})
	config.NewSourceFile(klog.Background(), filepath.Clean(dir), "node-a", time.Hour, pc.Channel(context.Background(), kubetypes.FileSource))
	select {
	case u := <-pc.Updates():
		b, err := json.Marshal(u.Pods)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		os.Stdout.Write(b)
		return 0
	case <-time.After(time.Minute):
		fmt.Fprintln(os.Stderr, "the kubelet's file source sent nothing within a minute")
		return 1
	}
}

type noStartupSLI struct{}

func (noStartupSLI) ObservedPodOnWatch(*v1.Pod, time.Time) {}

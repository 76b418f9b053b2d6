package main

// The machinery of the exercise (exercise_test.go, "two files, one name"):
// one scenario — web.yaml in the folder; a copy naming the same pod moved
// in; the next full re-list; the copy removed — run on two file sources:
// this lab's (mycore/podconfig.Files, in this process) and the kubelet's
// own (config.NewSourceFile feeding config.PodConfig, v1.36.3, in a child
// process: it never stops, see the README). What each had at each moment
// is compared with the learner's predictions.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/kubernetes/pkg/kubelet/config"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/mycore/podconfig"
)

const (
	twoFilesNode = "lab-node-08"
	// twoFilesPeriod is both sources' re-list period (fileCheckFrequency)
	// in the scenario: short, so the test takes seconds, and long enough
	// that each moment falls well between two re-lists.
	twoFilesPeriod = 4 * time.Second
	// kubeletSourceEnv names the folder the child process runs the
	// kubelet's file source on (TestMain calls runKubeletFileSource).
	kubeletSourceEnv = "LAB08_KUBELET_FILE_SOURCE_DIR"
)

// twoFiles is what one source did in the scenario: which file's pod was
// the static pod web-lab-node-08 at each moment ("web.yaml",
// "web-copy.yaml", "none"), whether it reported a duplicate pod name, and
// every op it sent.
type twoFiles struct {
	AfterMove, AfterRelist, AfterRemove string
	Duplicate                           bool
	Ops                                 []string
}

// webManifest is web.yaml of this lab with label app=app: the label tells
// which file a pod came from.
func webManifest(app string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels:\n    app: %s\nspec:\n  containers:\n  - name: web\n    image: registry.k8s.io/pause:3.10\n", app)
}

// fileOf names the file a pod came from, by its label.
var fileOf = map[string]string{"web": "web.yaml", "copy": "web-copy.yaml"}

// podSet is the pods a source has sent, kept as the kubelet's pod manager
// keeps them: by UID, ADD/UPDATE/… set, REMOVE deletes.
type podSet struct {
	mu    sync.Mutex
	byUID map[types.UID]*v1.Pod
	ops   []string
}

func (s *podSet) apply(u kubetypes.PodUpdate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	op := podconfig.OpName(u.Op)
	for _, p := range u.Pods {
		s.ops = append(s.ops, fmt.Sprintf("%s %s (from %s)", op, p.Name, fileOf[p.Labels["app"]]))
		if u.Op == kubetypes.REMOVE {
			delete(s.byUID, p.UID)
		} else {
			s.byUID[p.UID] = p
		}
	}
}

// static says which file's pod the static pod web-lab-node-08 is now.
func (s *podSet) static() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var files []string
	for _, p := range s.byUID {
		if p.Name == podconfig.StaticPodName("web", twoFilesNode) {
			files = append(files, fileOf[p.Labels["app"]])
		}
	}
	sort.Strings(files)
	if len(files) == 0 {
		return "none"
	}
	return strings.Join(files, " and ")
}

// scenario plays the exercise on a source started at t0 on dir (which
// holds web.yaml), whose updates set receives.
func scenario(dir string, t0 time.Time, set *podSet) (twoFiles, error) {
	at := func(periods float64) {
		time.Sleep(time.Until(t0.Add(time.Duration(periods * float64(twoFilesPeriod)))))
	}
	var r twoFiles
	at(0.25)
	if got := set.static(); got != "web.yaml" {
		return r, fmt.Errorf("the source started with %q, not web.yaml's pod", got)
	}
	// sed 's/app: web/app: copy/' web.yaml > $M/.c && mv $M/.c $M/web-copy.yaml
	tmp := filepath.Join(dir, ".c")
	if err := os.WriteFile(tmp, []byte(webManifest("copy")), 0o644); err != nil {
		return r, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "web-copy.yaml")); err != nil {
		return r, err
	}
	at(0.6) // the inotify event is in, the re-list at 1 period is not
	r.AfterMove = set.static()
	at(1.35) // the re-list at 1 period is done
	r.AfterRelist = set.static()
	if err := os.Remove(filepath.Join(dir, "web-copy.yaml")); err != nil {
		return r, err
	}
	at(1.75) // the remove event is in, the re-list at 2 periods is not
	r.AfterRemove = set.static()
	set.mu.Lock()
	r.Ops = append([]string(nil), set.ops...)
	set.mu.Unlock()
	return r, nil
}

// newTwoFilesDir is a manifests folder holding web.yaml.
func newTwoFilesDir(dir string) error {
	return os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(webManifest("web")), 0o644)
}

// runLabFileSource plays the scenario on this lab's file source.
func runLabFileSource(dir string) (twoFiles, error) {
	if err := newTwoFilesDir(dir); err != nil {
		return twoFiles{}, err
	}
	var duplicate atomic.Bool
	logger := podconfig.LineLogger(func(line string) {
		if strings.Contains(line, "duplicate pod name") {
			duplicate.Store(true)
		}
	}, 0, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	set := &podSet{byUID: map[types.UID]*v1.Pod{}}
	t0 := time.Now()
	updates := podconfig.Files(ctx, logger, dir, twoFilesNode, twoFilesPeriod)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for u := range updates {
			set.apply(u)
		}
	}()
	r, err := scenario(dir, t0, set)
	cancel()
	<-done // Files closes its channel once its goroutines have returned
	r.Duplicate = duplicate.Load()
	return r, err
}

// runKubeletFileSourceChild runs the scenario on the kubelet's own file
// source in a child process (this test binary again) and returns what it
// saw.
func runKubeletFileSourceChild(dir string) (twoFiles, error) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), kubeletSourceEnv+"="+dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return twoFiles{}, fmt.Errorf("the kubelet's file source (child process): %v\n%s", err, stderr.String())
	}
	var r twoFiles
	if err := json.Unmarshal(out, &r); err != nil {
		return r, fmt.Errorf("the child's output %q: %v", out, err)
	}
	return r, nil
}

// runKubeletFileSource is the child process: the kubelet's file source and
// PodConfig on dir, as the kubelet starts them (kubelet.go:382-388); the
// scenario's result printed as JSON. PodConfig reports a duplicate pod
// name as a Warning event (filterInvalidPods, config.go:262-279): the fake
// recorder catches it. Its goroutines never stop; the process exits.
func runKubeletFileSource(dir string) int {
	if err := newTwoFilesDir(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	recorder := record.NewFakeRecorder(1000)
	pc := config.NewPodConfig(recorder, noStartupSLI{})
	set := &podSet{byUID: map[types.UID]*v1.Pod{}}
	t0 := time.Now()
	config.NewSourceFile(podconfig.LineLogger(func(string) {}, 0, time.Minute), filepath.Clean(dir), twoFilesNode, twoFilesPeriod,
		pc.Channel(context.Background(), kubetypes.FileSource))
	go func() {
		for u := range pc.Updates() {
			set.apply(u)
		}
	}()
	r, err := scenario(dir, t0, set)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for len(recorder.Events) > 0 {
		if strings.Contains(<-recorder.Events, "duplicate pod name") {
			r.Duplicate = true
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	os.Stdout.Write(b)
	return 0
}

type noStartupSLI struct{}

func (noStartupSLI) ObservedPodOnWatch(*v1.Pod, time.Time) {}

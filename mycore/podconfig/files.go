package podconfig

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
	utilio "k8s.io/utils/io"
)

// DefaultFileCheckFrequency is how often the kubelet lists its static pod
// folder again, besides inotify (fileCheckFrequency, 20 s:
// pkg/kubelet/apis/config/v1beta1/defaults.go:81-82; the kubelet starts
// its file source at pkg/kubelet/kubelet.go:387).
const DefaultFileCheckFrequency = 20 * time.Second

// The watch's retry and back-off (file_linux.go:36-39): a watch that could
// not start is tried again after 1 s, doubling to 20 s after errors that
// are not "the folder does not exist yet".
const (
	watchRetryPeriod    = time.Second
	watchMaxRetryPeriod = 20 * time.Second
	watchEventBuffer    = 10 // eventBufferLen, file.go:43
)

// Files starts the static pod source of node nodeName: the manifests in
// path — a folder (the kubelet's staticPodPath; files whose name starts
// with a dot are ignored, sub-folders are not read) or a single file. It
// is a compact, stoppable version of the kubelet's file source
// (pkg/kubelet/config/file.go, file_linux.go, Kubernetes v1.36.3), whose
// goroutines run until the process exits (file.go:94-111,
// file_linux.go:53):
//
//   - the folder is read at once, then every period (0: 20 s), and
//     inotify (fsnotify) makes a created, written, renamed or removed file
//     count within milliseconds;
//   - each manifest becomes a pod with DecodeManifest; a bad one is
//     logged through logger and skipped — its pod, if it had one, is gone
//     at the next full read — and never stops the source;
//   - what is sent is what PodConfig's merge sends for one source
//     (config.go:142-245): REMOVE for pods that are gone, ADD for new
//     ones, UPDATE when a pod with a fixed metadata.uid changed, in that
//     order. An edit of a manifest without metadata.uid changes its UID:
//     REMOVE of the old pod, ADD of the new one;
//   - the first update is always an ADD, possibly empty (the folder is
//     empty or does not exist yet): it tells the kubelet this source is
//     ready (config.go:163-168). A path that exists but cannot be read
//     sends nothing, as upstream: the kubelet must not take "unreadable"
//     for "no static pods" and stop the ones running.
//
// Every pod carries the config.source=file and config.seen annotations.
// The pods sent are copies. The channel is closed once ctx has ended and
// every goroutine of the source has returned.
func Files(ctx context.Context, logger klog.Logger, path, nodeName string, period time.Duration) <-chan kubetypes.PodUpdate {
	if period <= 0 {
		period = DefaultFileCheckFrequency
	}
	out := make(chan kubetypes.PodUpdate, UpdatesBuffer)
	s := &fileSource{
		path: strings.TrimRight(path, string(os.PathSeparator)), nodeName: nodeName, log: logger, out: out, ctx: ctx,
		byFile: map[string]*v1.Pod{}, sent: map[types.UID]*v1.Pod{},
	}
	events := make(chan fsnotify.Event, watchEventBuffer)
	go func() {
		defer close(out)
		var wg sync.WaitGroup
		wg.Go(func() { s.watch(events) })
		s.run(period, events)
		wg.Wait()
	}()
	return out
}

// fileSource is the state of one Files source; only its run goroutine
// touches it (the watch goroutine only forwards events).
type fileSource struct {
	ctx      context.Context
	path     string
	nodeName string
	log      klog.Logger
	out      chan<- kubetypes.PodUpdate

	// byFile is the pod each manifest file last decoded to (the store and
	// fileKeyMapping of file.go:51-59).
	byFile map[string]*v1.Pod
	// sent is what the kubelet has from us, by UID (podStorage.pods for
	// the file source, config.go:109); ready: the first update went out.
	sent  map[types.UID]*v1.Pod
	ready bool
}

// run reads the folder now and every period, and applies watch events in
// between (file.go:91-111), until ctx ends.
func (s *fileSource) run(period time.Duration, events <-chan fsnotify.Event) {
	t := time.NewTicker(period)
	defer t.Stop()
	s.list()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			s.list()
		case e := <-events:
			s.apply(e)
		}
	}
}

// list reads every manifest again (listConfig, file.go:120-155) and sends
// what changed.
func (s *fileSource) list() {
	info, err := os.Stat(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// No folder yet is no static pods: the source is ready, empty
		// (file.go:127-129). The watch keeps trying until it appears.
		s.log.Error(err, "Unable to read config path: path does not exist, ignoring", "path", s.path)
		clear(s.byFile)
	case err != nil:
		s.log.Error(err, "Unable to read config path", "path", s.path)
		return
	case info.IsDir():
		files, err := filepath.Glob(filepath.Join(s.path, "[^.]*"))
		if err != nil {
			s.log.Error(err, "Unable to read config path", "path", s.path)
			return
		}
		clear(s.byFile)
		for _, f := range files {
			s.read(f)
		}
	case info.Mode().IsRegular():
		clear(s.byFile)
		s.read(s.path)
	default:
		s.log.Error(nil, "Unable to read config path: path is not a directory or file", "path", s.path)
		return
	}
	s.merge()
}

// read decodes one manifest file into byFile; a folder, a bad manifest or
// a file that vanished meanwhile is logged (not the vanished one) and
// leaves no pod (extractFromDir, file.go:160-196).
func (s *fileSource) read(file string) {
	info, err := os.Stat(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return
	case err != nil:
		s.log.Error(err, "Could not get metadata", "path", file)
		return
	case info.IsDir():
		s.log.Error(nil, "Provided manifest path is a directory, not recursing into manifest path", "path", file)
		return
	case !info.Mode().IsRegular():
		s.log.Error(nil, "Manifest path is not a directory or file", "path", file, "mode", info.Mode())
		return
	}
	pod, err := s.decodeFile(file)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.log.Error(err, "Could not process manifest file", "path", file)
		}
		return
	}
	s.byFile[file] = pod
}

// decodeFile is extractFromFile (file.go:199-236).
func (s *fileSource) decodeFile(file string) (*v1.Pod, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := utilio.ReadAtMost(f, MaxManifestSize)
	if err != nil {
		return nil, err
	}
	return DecodeManifest(data, file, s.nodeName)
}

// apply is consumeWatchEvent (file_linux.go:128-152; produceWatchEvent,
// :101-126, turns fsnotify's events into its input): a created, written
// or chmod'ed file is read again, a removed or renamed one forgotten. A
// manifest that does not decode keeps the pod it had until the next full
// read, as upstream's store does. A file named like ".x" is ignored: write
// a manifest under a dot-name and rename it into place, and the kubelet
// never reads it half-written.
func (s *fileSource) apply(e fsnotify.Event) {
	if e.Name == "" { // the watch (re)started: read everything, nothing was missed
		s.list()
		return
	}
	if e.Name == s.path {
		s.list() // the folder (or the single file) itself changed
		return
	}
	if strings.HasPrefix(filepath.Base(e.Name), ".") {
		return
	}
	switch {
	case e.Op.Has(fsnotify.Create), e.Op.Has(fsnotify.Write), e.Op.Has(fsnotify.Chmod):
		pod, err := s.decodeFile(e.Name)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				s.log.Error(err, "Unable to process watch event: can't process config file", "path", e.Name)
			}
			return
		}
		s.byFile[e.Name] = pod
	case e.Op.Has(fsnotify.Remove), e.Op.Has(fsnotify.Rename):
		if _, ok := s.byFile[e.Name]; !ok {
			return
		}
		delete(s.byFile, e.Name)
	default:
		return
	}
	s.merge()
}

// merge compares the pods the files make now with those the kubelet has
// and sends the difference, as podStorage.Merge does for a SET from one
// source (config.go:142-245).
func (s *fileSource) merge() {
	// One pod per full name: two files naming the same pod would be two
	// pods the kubelet cannot tell apart; the first file (by name) wins
	// (filterInvalidPods, config.go:262-279).
	files := make([]string, 0, len(s.byFile))
	for f := range s.byFile {
		files = append(files, f)
	}
	sort.Strings(files)
	names := map[string]string{}
	var adds, updates, deletes, removes, reconciles []*v1.Pod
	now := map[types.UID]*v1.Pod{}
	for _, f := range files {
		ref := s.byFile[f].DeepCopy()
		name := kubecontainer.GetPodFullName(ref)
		if first, dup := names[name]; dup {
			s.log.Error(nil, "Pod failed validation due to duplicate pod name, ignoring", "pod", name, "path", f, "first", first)
			continue
		}
		names[name] = f
		ref.Annotations[kubetypes.ConfigSourceAnnotationKey] = kubetypes.FileSource
		existing, found := s.sent[ref.UID]
		if !found {
			ref.Annotations[kubetypes.ConfigFirstSeenAnnotationKey] = kubetypes.NewTimestamp().GetString()
			now[ref.UID] = ref
			adds = append(adds, ref)
			continue
		}
		op, changed := Classify(existing, ref)
		if !changed {
			now[ref.UID] = existing
			continue
		}
		ref.Annotations[kubetypes.ConfigFirstSeenAnnotationKey] = existing.Annotations[kubetypes.ConfigFirstSeenAnnotationKey]
		now[ref.UID] = ref
		switch op {
		case kubetypes.UPDATE:
			updates = append(updates, ref)
		case kubetypes.DELETE:
			deletes = append(deletes, ref)
		case kubetypes.RECONCILE:
			reconciles = append(reconciles, ref)
		}
	}
	for uid, p := range s.sent {
		if _, ok := now[uid]; !ok {
			removes = append(removes, p)
		}
	}
	sort.Slice(removes, func(i, j int) bool { return removes[i].Name < removes[j].Name })
	s.sent = now
	first := !s.ready
	s.ready = true
	s.send(kubetypes.REMOVE, removes)
	s.send(kubetypes.ADD, adds)
	s.send(kubetypes.UPDATE, updates)
	s.send(kubetypes.DELETE, deletes)
	if first && len(adds)+len(updates)+len(deletes) == 0 {
		// The first read found nothing: say so, the source is ready.
		s.sendAlways(kubetypes.ADD, nil)
	}
	s.send(kubetypes.RECONCILE, reconciles)
}

func (s *fileSource) send(op kubetypes.PodOperation, pods []*v1.Pod) {
	if len(pods) > 0 {
		s.sendAlways(op, pods)
	}
}

// sendAlways delivers one update unless the source is stopping.
func (s *fileSource) sendAlways(op kubetypes.PodOperation, pods []*v1.Pod) {
	u := kubetypes.PodUpdate{Op: op, Source: kubetypes.FileSource, Pods: make([]*v1.Pod, 0, len(pods))}
	for _, p := range pods {
		u.Pods = append(u.Pods, p.DeepCopy())
	}
	select {
	case s.out <- u:
	case <-s.ctx.Done():
	}
}

// watch runs an inotify watch on the path and forwards its events to run,
// starting it again after an error: after 1 s while the path does not
// exist, with a back-off up to 20 s after other errors (startWatch,
// file_linux.go:49-65). Each time a watch starts, an empty event asks run
// to read everything: a file made between the last read and the watch
// would otherwise wait for the next period. It returns when ctx ends.
func (s *fileSource) watch(events chan<- fsnotify.Event) {
	backOff := flowcontrol.NewBackOff(watchRetryPeriod, watchMaxRetryPeriod)
	const id = "watch"
	for {
		if !backOff.IsInBackOffSinceUpdate(id, time.Now()) {
			if err := s.watchOnce(events); err != nil {
				var missing notExistError
				if !errors.As(err, &missing) {
					s.log.Error(err, "Unable to read config path", "path", s.path)
					backOff.Next(id, time.Now())
				}
			}
		}
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(watchRetryPeriod):
		}
	}
}

// notExistError: the path is not there (yet); retried without back-off
// (retryableError, file_linux.go:41-47).
type notExistError struct{ error }

// watchOnce is doWatch (file_linux.go:67-99), ending with ctx.
func (s *fileSource) watchOnce(events chan<- fsnotify.Event) error {
	if _, err := os.Stat(s.path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return notExistError{err}
		}
		return err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("unable to create inotify: %w", err)
	}
	defer w.Close()
	if err := w.Add(s.path); err != nil {
		return fmt.Errorf("unable to create inotify for path %q: %w", s.path, err)
	}
	forward := func(e fsnotify.Event) bool {
		select {
		case events <- e:
			return true
		case <-s.ctx.Done():
			return false
		}
	}
	if !forward(fsnotify.Event{}) {
		return nil
	}
	for {
		select {
		case <-s.ctx.Done():
			return nil
		case e, ok := <-w.Events:
			if !ok {
				return errors.New("inotify closed its events")
			}
			if !forward(e) {
				return nil
			}
			if e.Name == s.path && (e.Op.Has(fsnotify.Remove) || e.Op.Has(fsnotify.Rename)) {
				// The watched folder (or file) itself went: this watch
				// sees nothing any more; watch whatever appears there next.
				return notExistError{fmt.Errorf("%s was removed", s.path)}
			}
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("inotify closed its errors")
			}
			return fmt.Errorf("error while watching %q: %w", s.path, err)
		}
	}
}

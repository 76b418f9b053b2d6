package logrotate_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"kubelet-labs/internal/critest"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/logrotate"
)

// A kilobyte line, four of them every 10 ms: about 400 KB/s, so a 64 KiB
// log fills in a fraction of a second on containerd and on the mock (whose
// shell knows echo, sleep and while, the same script).
var (
	chattyLine   = "logrot-" + strings.Repeat("x", 1000)
	chattyScript = "while true; do echo " + chattyLine + "; echo " + chattyLine + "; echo " + chattyLine + "; echo " + chattyLine + "; sleep 0.01; done"
)

const (
	maxSize  = 64 << 10
	maxFiles = 3
	rounds   = 5 // more than maxFiles: the oldest files must go
	patient  = time.Minute
)

// reopens counts ReopenContainerLog calls per container on their way to
// the runtime.
type reopens struct {
	logrotate.Runtime
	mu sync.Mutex
	n  map[string]int
}

func (r *reopens) ReopenContainerLog(ctx context.Context, id string) error {
	r.mu.Lock()
	r.n[id]++
	r.mu.Unlock()
	return r.Runtime.ReopenContainerLog(ctx, id)
}

func (r *reopens) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[id]
}

// TestRotation is what a learner sees in a chatty container's log folder,
// on containerd and on the mock: once 0.log reaches MaxSize it becomes
// 0.log.TIMESTAMP, the runtime is told (ReopenContainerLog) and writes a
// new 0.log; older rotations are gzipped; never more than MaxFiles files,
// the oldest removed first. A quiet container beside it is left alone.
func TestRotation(t *testing.T) {
	for _, rc := range critest.Cases() {
		t.Run(rc.Name, func(t *testing.T) {
			rt := rc.Setup(t)
			c := critest.Dial(t, rt)
			p := critest.Pod(t, "logrot")
			p.Namespace = "logrot"
			podID, podCfg := critest.RunPod(t, c, p)
			start := func(name, script string) (id, dir string) {
				t.Helper()
				cfg := p.ContainerConfig(cri.Container{Name: name, Image: rt.BusyboxImage, Command: []string{"sh", "-c", script}})
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				id, err := c.StartContainer(ctx, podID, podCfg, cfg)
				if err != nil {
					t.Fatal(err)
				}
				return id, filepath.Join(podCfg.LogDirectory, name)
			}
			chatty, dir := start("chatty", chattyScript)
			quiet, quietDir := start("quiet", "echo hello; sleep 3600")

			counted := &reopens{Runtime: c.Runtime, n: map[string]int{}}
			clock := clocktesting.NewFakeClock(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
			r, err := logrotate.New(counted, logrotate.Options{MaxSize: maxSize, MaxFiles: maxFiles, Clock: clock,
				Selector: map[string]string{cri.LabelPodUID: p.UID}, Log: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			live := filepath.Join(dir, "0.log")
			var rotated []string // every name a rotation made, oldest first
			var written int64    // what the rotated files held when rotated
			for round := 1; round <= rounds; round++ {
				testenv.PollTrue(t, "0.log reaches 64 KiB", patient, func() bool { return fileSize(live) >= maxSize })
				clock.Step(10 * time.Second) // the kubelet's interval; each rotation gets its own name
				got, err := r.RotateOnce(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				want := live + "." + clock.Now().Format("20060102-150405")
				if len(got) != 1 || got[0].Container.GetId() != chatty || got[0].Rotated != want {
					t.Fatalf("round %d: rotations %+v, want chatty's 0.log rotated to %s", round, got, filepath.Base(want))
				}
				if n := counted.count(chatty); n != round {
					t.Fatalf("round %d: ReopenContainerLog called %d times for chatty, want %d", round, n, round)
				}
				rotated = append(rotated, want)
				written += got[0].Size
				// The rotated file is closed: containerd writes only into the
				// new 0.log from here on, so its size no longer changes.
				sizeNow := fileSize(want)
				testenv.PollTrue(t, "the runtime writes into the new 0.log", patient, func() bool {
					b, _ := os.ReadFile(live)
					return bytes.Contains(b, []byte(" stdout F "+chattyLine+"\n"))
				})
				if s := fileSize(want); s != sizeNow || s < got[0].Size {
					t.Errorf("round %d: %s is %d bytes, was %d just after ReopenContainerLog (and %d at rotation): the runtime still writes into it", round, filepath.Base(want), s, sizeNow, got[0].Size)
				}
				// What ls shows: the live file, the newest rotation as it
				// is, the ones before gzipped; at most maxFiles in all.
				keep := rotated[max(len(rotated)-(maxFiles-1), 0):]
				wantFiles := []string{"0.log"}
				for i, f := range keep {
					if i < len(keep)-1 {
						f += ".gz"
					}
					wantFiles = append(wantFiles, filepath.Base(f))
				}
				slices.Sort(wantFiles)
				if files := ls(t, dir); !slices.Equal(files, wantFiles) {
					t.Fatalf("round %d: %s holds %v, want %v", round, dir, files, wantFiles)
				}
				if round > maxFiles-1 {
					gone := rotated[round-maxFiles] + ".gz"
					if rm := got[0].Removed; len(rm) != 1 || rm[0] != gone {
						t.Errorf("round %d: removed %v, want the oldest, %s", round, rm, filepath.Base(gone))
					}
				}
			}

			// Older rotations are whole CRI log lines, gzipped.
			gz := rotated[len(rotated)-2] + ".gz"
			if lines := gunzipLines(t, gz); len(lines) == 0 || !strings.HasSuffix(lines[0], " stdout F "+chattyLine) {
				t.Errorf("%s: %d lines, first %.80q; want CRI log records of chatty's line", filepath.Base(gz), len(lines), first(lines))
			}
			// Bounded: the writer went on, the disk kept only maxFiles files.
			onDisk := dirSize(t, dir)
			if written < rounds*maxSize || onDisk >= written {
				t.Errorf("chatty wrote %d bytes into rotated files; its folder holds %d: want the oldest gone", written, onDisk)
			}
			t.Logf("%s: chatty wrote ≥ %d bytes, its folder holds %d in %v", rt.Name, written, onDisk, ls(t, dir))

			if n := counted.count(quiet); n != 0 {
				t.Errorf("ReopenContainerLog called %d times for quiet, whose log never reached 64 KiB", n)
			}
			if files := ls(t, quietDir); !slices.Equal(files, []string{"0.log"}) {
				t.Errorf("quiet's folder holds %v, want only 0.log", files)
			}
		})
	}
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func ls(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	for _, f := range ls(t, dir) {
		n += fileSize(filepath.Join(dir, f))
	}
	return n
}

func gunzipLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func first(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return lines[0]
}

package logrotate_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/logrotate"
)

// stub is a runtime with one running container whose log is a file the
// test writes; ReopenContainerLog creates a new one, as a runtime does,
// or fails with refuse.
type stub struct {
	log    string
	refuse error
	calls  int
}

func (s *stub) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return []*runtimeapi.Container{{Id: "c1", State: runtimeapi.ContainerState_CONTAINER_RUNNING, Metadata: &runtimeapi.ContainerMetadata{Name: "c"}}}, nil
}

func (s *stub) ContainerStatus(context.Context, string, bool) (*runtimeapi.ContainerStatusResponse, error) {
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: "c1", LogPath: s.log}}, nil
}

func (s *stub) ReopenContainerLog(context.Context, string) error {
	s.calls++
	if s.refuse != nil {
		return s.refuse
	}
	return os.WriteFile(s.log, nil, 0o640)
}

func newStub(t *testing.T, content string) *stub {
	t.Helper()
	s := &stub{log: filepath.Join(t.TempDir(), "0.log")}
	if err := os.WriteFile(s.log, []byte(content), 0o640); err != nil {
		t.Fatal(err)
	}
	return s
}

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// A runtime that refuses to reopen (the container exited meanwhile): the
// rename is undone, so no line is lost and the next round tries again.
func TestReopenRefusedRenamesBack(t *testing.T) {
	s := newStub(t, strings.Repeat("x", 100))
	s.refuse = errors.New("container is not running")
	r, err := logrotate.New(s, logrotate.Options{MaxSize: 10, Clock: clocktesting.NewFakeClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.RotateOnce(context.Background())
	if len(got) != 0 || err == nil || !strings.Contains(err.Error(), "container is not running") {
		t.Fatalf("RotateOnce: %v, %v; want no rotation and the runtime's refusal", got, err)
	}
	if files := ls(t, filepath.Dir(s.log)); !slices.Equal(files, []string{"0.log"}) || fileSize(s.log) != 100 {
		t.Errorf("after a refused reopen: %v, 0.log %d bytes; want 0.log back with its 100 bytes", files, fileSize(s.log))
	}
}

// What a rotation that failed half way left (a .tmp, a file whose .gz
// exists) is removed before the next one; a log below MaxSize is not
// touched and the runtime is not asked.
func TestLeftoversAndSmallLogs(t *testing.T) {
	s := newStub(t, "small")
	dir := filepath.Dir(s.log)
	for _, f := range []string{"0.log.20250101-000000.gz", "0.log.20250101-000000", "0.log.20250101-000010.tmp"} {
		os.WriteFile(filepath.Join(dir, f), []byte("old"), 0o640)
	}
	r, err := logrotate.New(s, logrotate.Options{MaxSize: 10, Clock: clocktesting.NewFakeClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.RotateOnce(context.Background()); len(got) != 0 || err != nil || s.calls != 0 {
		t.Fatalf("a 5-byte log with MaxSize 10: %v, %v, %d reopens; want nothing done", got, err, s.calls)
	}
	os.WriteFile(s.log, []byte(strings.Repeat("x", 10)), 0o640)
	if _, err := r.RotateOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"0.log", "0.log.20250101-000000.gz", "0.log.20250102-030405"}
	if files := ls(t, dir); !slices.Equal(files, want) {
		t.Errorf("folder holds %v, want %v", files, want)
	}
}

// Run rotates every Interval of its clock, and returns when ctx ends.
func TestRunTicks(t *testing.T) {
	s := newStub(t, strings.Repeat("x", 100))
	clock := clocktesting.NewFakeClock(t0)
	r, err := logrotate.New(s, logrotate.Options{MaxSize: 10, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	testenv.PollTrue(t, "Run's ticker", time.Minute, clock.HasWaiters)
	if fileSize(s.log+".20250102-030405") != 0 || s.calls != 0 {
		t.Fatal("rotated before the first tick")
	}
	clock.Step(logrotate.DefaultInterval)
	testenv.PollTrue(t, "a rotation after one interval", time.Minute, func() bool { return fileSize(s.log+".20250102-030415") == 100 })
	cancel()
	<-done
}

// Upstream's checks: at least two files; a negative size turns rotation
// off; sizes are quantities.
func TestOptions(t *testing.T) {
	if _, err := logrotate.New(&stub{}, logrotate.Options{MaxFiles: 1}); err == nil {
		t.Error("MaxFiles 1 accepted")
	}
	r, err := logrotate.New(&stub{}, logrotate.Options{})
	if size, files := r.Policy(); err != nil || size != 10<<20 || files != 5 {
		t.Errorf("defaults: %d bytes, %d files, %v; want 10 MiB, 5", size, files, err)
	}
	s := newStub(t, strings.Repeat("x", 100))
	off, _ := logrotate.New(s, logrotate.Options{MaxSize: -1})
	if got, err := off.RotateOnce(context.Background()); len(got) != 0 || err != nil || s.calls != 0 {
		t.Errorf("MaxSize -1 rotated: %v %v", got, err)
	}
	for in, want := range map[string]int64{"10Mi": 10 << 20, "64Ki": 64 << 10, "100": 100, "-1": -1} {
		if got, err := logrotate.ParseSize(in); got != want || err != nil {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := logrotate.ParseSize("ten"); err == nil {
		t.Error(`ParseSize("ten") accepted`)
	}
}

// Two rounds within one second would give the rotation the name of the
// last one and overwrite it: the second round waits for the next second.
func TestSameSecondWaits(t *testing.T) {
	s := newStub(t, strings.Repeat("x", 100))
	clock := clocktesting.NewFakeClock(t0)
	r, err := logrotate.New(s, logrotate.Options{MaxSize: 10, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if got, err := r.RotateOnce(ctx); len(got) != 1 || err != nil {
		t.Fatalf("first round: %v, %v", got, err)
	}
	os.WriteFile(s.log, []byte(strings.Repeat("y", 50)), 0o640)
	clock.Step(500 * time.Millisecond)
	if got, err := r.RotateOnce(ctx); len(got) != 0 || err != nil {
		t.Fatalf("same second: %v, %v; want no rotation", got, err)
	}
	clock.Step(500 * time.Millisecond)
	if got, err := r.RotateOnce(ctx); len(got) != 1 || err != nil {
		t.Fatalf("next second: %v, %v; want a rotation", got, err)
	}
	dir := filepath.Dir(s.log)
	want := []string{"0.log", "0.log.20250102-030405.gz", "0.log.20250102-030406"}
	if files := ls(t, dir); !slices.Equal(files, want) || fileSize(filepath.Join(dir, want[2])) != 50 {
		t.Errorf("folder holds %v, want %v with the second rotation's 50 bytes", files, want)
	}
}

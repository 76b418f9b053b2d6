package fakecri

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/internal/testenv"
)

// criLine is one record of the CRI log format.
var criLine = regexp.MustCompile(`^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z) (stdout|stderr) ([PF]) (.*)$`)

func TestLogsAreWrittenInCRIFormat(t *testing.T) {
	r := newRuntime(t)
	pod, dir := logDirPod(t, "logs")
	cfg := ctrConfig("c", "sh", "-c", "echo out one; printf 'no newline'; echo; echo two")
	cfg.LogPath = "c/0.log" // the kubelet uses CONTAINER/RESTARTCOUNT.log
	id := createStart(t, r, runPod(t, r, pod), cfg)
	st := waitExited(t, r, id)
	want := filepath.Join(dir, "c", "0.log")
	if st.LogPath != want {
		t.Fatalf("status log path %q, want %q", st.LogPath, want)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSuffix(readFile(t, want), "\n"), "\n") {
		m := criLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("not a CRI log line: %q", line)
		}
		got = append(got, m[3]+" "+m[4]+" "+m[5])
	}
	if strings.Join(got, "|") != "stdout F out one|stdout F no newline|stdout F two" {
		t.Fatalf("records: %q", got)
	}
}

func TestStderrAndLongLines(t *testing.T) {
	r := newRuntime(t)
	pod, dir := logDirPod(t, "long")
	long := strings.Repeat("x", maxLogLine+10)
	cfg := ctrConfig("c", "sh", "-c", "echo to stderr >&2; echo "+long)
	cfg.LogPath = "c.log"
	waitExited(t, r, createStart(t, r, runPod(t, r, pod), cfg))
	lines := strings.Split(strings.TrimSuffix(readFile(t, filepath.Join(dir, "c.log")), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 records (stderr, partial, final), got %d", len(lines))
	}
	m0, m1, m2 := criLine.FindStringSubmatch(lines[0]), criLine.FindStringSubmatch(lines[1]), criLine.FindStringSubmatch(lines[2])
	if m0[3] != "stderr" || m0[5] != "to stderr" {
		t.Fatalf("stderr record: %q", lines[0])
	}
	if m1[4] != "P" || len(m1[5]) != maxLogLine || m2[4] != "F" || len(m2[5]) != 10 {
		t.Fatalf("long line not split P+F: %s %d / %s %d", m1[4], len(m1[5]), m2[4], len(m2[5]))
	}
}

func TestNoLogDirectoryMeansNoLog(t *testing.T) {
	r := newRuntime(t)
	cfg := ctrConfig("c", "echo", "hi")
	cfg.LogPath = "c.log"
	id := createStart(t, r, runPod(t, r, podConfig("nolog")), cfg)
	if st := waitExited(t, r, id); st.LogPath != "" || st.ExitCode != 0 {
		t.Fatalf("log path %q exit %d", st.LogPath, st.ExitCode)
	}
}

func TestReopenContainerLogAfterRotation(t *testing.T) {
	r := newRuntime(t)
	pod, dir := logDirPod(t, "rot")
	cfg := ctrConfig("c", "sh", "-c", "while true; do echo tick; sleep 0.02; done")
	cfg.LogPath = "c.log"
	id := createStart(t, r, runPod(t, r, pod), cfg)
	path := filepath.Join(dir, "c.log")
	testenv.PollTrue(t, "first log line", patient, func() bool { b, _ := os.ReadFile(path); return len(b) > 0 })
	// What the kubelet's log manager does: rename, then ReopenContainerLog.
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReopenContainerLog(tctx(t), &runtimeapi.ReopenContainerLogRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	testenv.PollTrue(t, "a line in the new file", patient, func() bool {
		b, _ := os.ReadFile(path)
		return strings.Contains(string(b), "stdout F tick")
	})
	if _, err := r.StopContainer(tctx(t), &runtimeapi.StopContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	_, err := r.ReopenContainerLog(tctx(t), &runtimeapi.ReopenContainerLogRequest{ContainerId: id})
	wantCode(t, err, codes.FailedPrecondition, id)
}

func TestUnwritableLogFailsStart(t *testing.T) {
	r := newRuntime(t)
	blocker := filepath.Join(t.TempDir(), "file")
	os.WriteFile(blocker, nil, 0o644)
	pod := podConfig("bad")
	pod.LogDirectory = filepath.Join(blocker, "sub") // a directory under a file: cannot exist
	cfg := ctrConfig("c")
	cfg.LogPath = "c.log"
	id := create(t, r, runPod(t, r, pod), cfg)
	_, err := r.StartContainer(tctx(t), &runtimeapi.StartContainerRequest{ContainerId: id})
	wantCode(t, err, codes.Internal, id)
	// Like containerd: the container is left EXITED with StartError / 128.
	if st := ctrStatus(t, r, id); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 128 || st.Reason != "StartError" {
		t.Fatalf("after failed start: %s %d %q", st.State, st.ExitCode, st.Reason)
	}
}

// TestSilentContainersHoldNoLogFile: a container's log exists from its
// start (kubectl logs reads it, empty) but is held open only once it
// writes — fleet mode's 20,000 /pause containers were 20,000 open files.
func TestSilentContainersHoldNoLogFile(t *testing.T) {
	r := newRuntime(t)
	pod, dir := logDirPod(t, "silent")
	sb := runPod(t, r, pod)
	openLogs := func() int {
		n := 0
		fds, _ := os.ReadDir("/proc/self/fd")
		for _, fd := range fds {
			if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(target, dir) {
				n++
			}
		}
		return n
	}
	for i := range 20 {
		cfg := ctrConfig("pause"+string(rune('a'+i)), "/pause")
		cfg.LogPath = cfg.Metadata.Name + ".log"
		createStart(t, r, sb, cfg)
		if _, err := os.Stat(filepath.Join(dir, cfg.LogPath)); err != nil {
			t.Fatalf("the log of a started container: %v", err)
		}
	}
	if n := openLogs(); n != 0 {
		t.Errorf("20 silent containers hold %d log files open, want 0", n)
	}
	talker := ctrConfig("talker", "sh", "-c", "echo hello; sleep 3600")
	talker.LogPath = "talker.log"
	id := createStart(t, r, sb, talker)
	testenv.PollTrue(t, "the talker's line in its log", patient, func() bool {
		return strings.Contains(readFile(t, filepath.Join(dir, "talker.log")), "stdout F hello")
	})
	if n := openLogs(); n != 1 {
		t.Errorf("with one container that wrote: %d log files open, want 1", n)
	}
	if _, err := r.StopContainer(tctx(t), &runtimeapi.StopContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	if n := openLogs(); n != 0 {
		t.Errorf("after the talker exited: %d log files open, want 0", n)
	}
}

package conformance

import (
	"os/exec"
	"strings"
	"testing"

	"kubelet-labs/hack/conformance/internal/harness"
)

// TestBusyBoxKeepsEveryEnvironmentName: the e2e busybox image's shell is
// upstream's, which passes on variables whose names are not shell
// identifiers (`data-1`, as envFrom makes from a ConfigMap key); Debian's
// drops them, and four specs of the selection would fail for the image,
// not the node. Builds busybox from source the first time (minutes).
func TestBusyBoxKeepsEveryEnvironmentName(t *testing.T) {
	l, err := harness.NewLayout()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := l.BusyBox(testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("env", "-i", "data-1=value-1", "OK=yes", bin, "sh", "-c", "env").CombinedOutput()
	if err != nil {
		t.Fatalf("busybox sh -c env: %v: %s", err, out)
	}
	for _, want := range []string{"data-1=value-1", "OK=yes"} {
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("busybox's sh -c env does not pass %s on; it printed:\n%s", want, out)
		}
	}
	if v, err := exec.Command(bin, "--help").CombinedOutput(); err != nil || !strings.Contains(string(v), "BusyBox v1.37.0") {
		t.Errorf("busybox --help: %v: %.80s", err, v)
	}
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/cri"
	"kubelet-labs/mylib/fakecri"
)

// The exercise (README, "Exercise — a container never restarts"): write
// what the runtime answers at each step, as the gRPC code crictl prints
// after "code = " ("OK" when the call succeeds), then run
// make check LAB=06 EXERCISE=1. The test does the steps on the lab's mock
// with the lab's own request files and compares.
var answer = struct {
	// Step 2: crictl start $CTR, on the container that exited with code 2.
	StartExited string
	// Step 3: crictl create with the same container.json (name hello,
	// attempt 0) while the exited container is still there.
	CreateSameAttempt string
	// Step 3: crictl create with a copy of container.json that says
	// "attempt": 1 (then crictl start it).
	CreateNextAttempt string
	// Step 3: how many containers named hello crictl ps -a lists then.
	HelloContainers int
}{
	StartExited:       "",
	CreateSameAttempt: "",
	CreateNextAttempt: "",
	HelloContainers:   0,
}

func TestExercise(t *testing.T) {
	testenv.Exercise(t)
	c, ctl, labDir := startQuietLab(t)
	ctx := c.Context(context.Background()) // the client's failed calls are the test's to report
	var pod runtimeapi.PodSandboxConfig
	var ctr runtimeapi.ContainerConfig
	readRequest(t, filepath.Join(labDir, "pod.json"), &pod)
	readRequest(t, filepath.Join(labDir, "container.json"), &ctr)

	// Step 1: run the pod, create and start hello, make it exit with 2.
	podID, err := c.Runtime.RunPodSandbox(ctx, &pod, "")
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.Runtime.CreateContainer(ctx, podID, &ctr, &pod)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Runtime.StartContainer(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := ctl.SetContainerExited(ctx, first, 2, ""); err != nil {
		t.Fatal(err)
	}

	// Step 2: start it again.
	got := map[string]string{}
	got["StartExited"] = codeOf(c.Runtime.StartContainer(ctx, first))

	// Step 3: create it again, as it is, then as attempt 1.
	_, err = c.Runtime.CreateContainer(ctx, podID, &ctr, &pod)
	got["CreateSameAttempt"] = codeOf(err)
	next := proto.Clone(&ctr).(*runtimeapi.ContainerConfig)
	next.Metadata.Attempt++
	second, err := c.Runtime.CreateContainer(ctx, podID, next, &pod)
	got["CreateNextAttempt"] = codeOf(err)
	if err == nil {
		if err := c.Runtime.StartContainer(ctx, second); err != nil {
			t.Fatalf("starting attempt 1: %v", err)
		}
	}
	all, err := c.Runtime.ListContainers(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	hello := 0
	var listed []string
	for _, x := range all {
		if x.GetMetadata().GetName() == "hello" {
			hello++
			listed = append(listed, fmt.Sprintf("%.13s attempt %d %s", x.Id, x.GetMetadata().GetAttempt(), x.State))
		}
	}

	predicted := map[string]string{
		"StartExited": answer.StartExited, "CreateSameAttempt": answer.CreateSameAttempt, "CreateNextAttempt": answer.CreateNextAttempt,
	}
	for _, step := range []struct{ field, what string }{
		{"StartExited", "crictl start on the exited container"},
		{"CreateSameAttempt", "crictl create with the same container.json (attempt 0)"},
		{"CreateNextAttempt", `crictl create with "attempt": 1`},
	} {
		p := strings.TrimSpace(predicted[step.field])
		switch {
		case p == "":
			t.Errorf("%s: you have not predicted it yet (answer.%s in labs/06-cri-mock/exercise_test.go)", step.what, step.field)
		case !strings.EqualFold(p, got[step.field]):
			t.Errorf("%s: you predicted %s; the runtime answered %s", step.what, p, got[step.field])
		}
	}
	switch {
	case answer.HelloContainers == 0:
		t.Errorf("containers named hello in crictl ps -a after attempt 1 started: you have not predicted it yet (answer.HelloContainers)")
	case answer.HelloContainers != hello:
		t.Errorf("containers named hello in crictl ps -a after attempt 1 started: you predicted %d; the runtime lists %d: %s",
			answer.HelloContainers, hello, strings.Join(listed, "; "))
	}
}

// codeOf is the gRPC code of a CRI call's result, as crictl prints it.
func codeOf(err error) string { return status.Code(err).String() }

// startQuietLab runs the lab on a socket of its own, printing nothing (a
// failing exercise shows the learner the test's words, not the guide).
func startQuietLab(t *testing.T) (*cri.Client, *fakecri.ControlClient, string) {
	t.Helper()
	stateDir := shortDir(t)
	t.Setenv("LABS_STATE_DIR", stateDir)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan *fakecri.Server, 1)
	errc := make(chan error, 1)
	go func() {
		o := options{quiet: true, socket: filepath.Join(stateDir, "mockcri.sock")}
		errc <- run(ctx, o, labenv.NewPrinter(io.Discard), func(s *fakecri.Server) { ready <- s })
	}()
	t.Cleanup(func() { cancel(); <-errc })
	var srv *fakecri.Server
	select {
	case srv = <-ready:
	case err := <-errc:
		errc <- err
		t.Fatalf("the lab did not start: %v", err)
	case <-time.After(patient):
		t.Fatal("the lab did not start within 30s")
	}
	c, err := cri.Dial(ctx, srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctl := fakecri.NewControlClient(srv.ControlSocketPath())
	t.Cleanup(ctl.Close)
	return c, ctl, filepath.Join(stateDir, "06-cri-mock")
}

// readRequest reads a request file the lab wrote for crictl (JSON in the
// CRI's field names).
func readRequest(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

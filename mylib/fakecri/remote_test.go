package fakecri

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace/noop"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
	crilogs "k8s.io/cri-client/pkg/logs"
	utilexec "k8s.io/utils/exec"

	"kubelet-labs/internal/testenv"
)

// These tests talk to the mock through the kubelet's own CRI client
// (k8s.io/cri-client/pkg v0.36.3, what pkg/kubelet uses), so "works with
// the kubelet" is checked against the real client code, not our reading
// of the proto.

func remoteClients(t *testing.T, srv *Server, streaming bool) (criapi.RuntimeService, criapi.ImageManagerService) {
	t.Helper()
	c := tctx(t)
	rs, err := remote.NewRemoteRuntimeService(c, srv.Endpoint(), 10*time.Second, noop.NewTracerProvider(), streaming)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close(context.Background()) })
	is, err := remote.NewRemoteImageService(c, srv.Endpoint(), 10*time.Second, noop.NewTracerProvider(), streaming)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { is.Close(context.Background()) })
	return rs, is
}

// TestKubeletClientPodLifecycle drives one pod the way the kubelet does
// (kuberuntime_manager.go SyncPod / KillPod, v1.36.3), with and without
// the KEP-5825 list streaming.
func TestKubeletClientPodLifecycle(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run(fmt.Sprintf("streaming=%v", streaming), func(t *testing.T) {
			srv := startServer(t)
			rs, is := remoteClients(t, srv, streaming)
			c := tctx(t)

			v, err := rs.Version(c, "v1")
			if err != nil || v.RuntimeApiVersion != "v1" {
				t.Fatalf("Version %v %v", v, err)
			}
			st, err := rs.Status(c, false)
			if err != nil || len(st.Status.Conditions) != 2 || !st.Status.Conditions[0].Status || !st.Status.Conditions[1].Status {
				t.Fatalf("Status %v %v", st, err)
			}

			// The kubelet asks for the image, pulls when missing, and
			// creates the container with the returned image_ref.
			spec := &runtimeapi.ImageSpec{Image: "busybox:1.36"}
			if img, err := is.ImageStatus(c, spec, false); err != nil || img.Image != nil {
				t.Fatalf("ImageStatus before pull: %v %v", img, err)
			}
			pod := podConfig("web")
			pod.LogDirectory = filepath.Join(t.TempDir(), "ns_web_uid")
			ref, err := is.PullImage(c, spec, nil, pod)
			if err != nil {
				t.Fatal(err)
			}
			img, err := is.ImageStatus(c, spec, false)
			if err != nil || img.Image.Id != ref || img.Image.Size == 0 {
				t.Fatalf("ImageStatus after pull: %v %v", img, err)
			}
			imgs, err := is.ListImages(c, nil)
			if err != nil || len(imgs) != 2 {
				t.Fatalf("ListImages %d %v", len(imgs), err)
			}
			if _, err := is.ImageFsInfo(c); err != nil {
				t.Fatal(err)
			}

			sb, err := rs.RunPodSandbox(c, pod, "")
			if err != nil {
				t.Fatal(err)
			}
			cfg := ctrConfig("app", "sh", "-c", "echo line one; sleep infinity")
			cfg.Image = &runtimeapi.ImageSpec{Image: ref, UserSpecifiedImage: "busybox:1.36"}
			cfg.LogPath = "app/0.log"
			id, err := rs.CreateContainer(c, sb, cfg, pod)
			if err != nil {
				t.Fatal(err)
			}
			if err := rs.StartContainer(c, id); err != nil {
				t.Fatal(err)
			}

			// The generic PLEG's relist: sandboxes, containers, statuses.
			sbs, err := rs.ListPodSandbox(c, nil)
			if err != nil || len(sbs) != 1 || sbs[0].Id != sb {
				t.Fatalf("ListPodSandbox %v %v", sbs, err)
			}
			ctrs, err := rs.ListContainers(c, &runtimeapi.ContainerFilter{PodSandboxId: sb})
			if err != nil || len(ctrs) != 1 || ctrs[0].Id != id {
				t.Fatalf("ListContainers %v %v", ctrs, err)
			}
			sst, err := rs.PodSandboxStatus(c, sb, false)
			if err != nil || sst.Status.Id != sb || sst.Status.Metadata == nil || sst.Status.CreatedAt == 0 || len(sst.ContainersStatuses) != 1 || sst.Timestamp == 0 {
				t.Fatalf("PodSandboxStatus %v %v", sst, err)
			}
			cst, err := rs.ContainerStatus(c, id, false)
			if err != nil || cst.Status.Image.Image == "" || cst.Status.ImageRef == "" || cst.Status.ImageId != ref || cst.Status.Metadata.Name != "app" {
				t.Fatalf("ContainerStatus %v %v", cst, err)
			}

			// Exec probes.
			out, _, err := rs.ExecSync(c, id, []string{"sh", "-c", "echo ok"}, 5*time.Second)
			if err != nil || string(out) != "ok\n" {
				t.Fatalf("ExecSync: %q %v", out, err)
			}
			_, _, err = rs.ExecSync(c, id, []string{"sh", "-c", "exit 3"}, 5*time.Second)
			var exitErr utilexec.CodeExitError
			if !errors.As(err, &exitErr) || exitErr.Code != 3 {
				t.Fatalf("ExecSync exit 3: %v", err)
			}
			_, _, err = rs.ExecSync(c, id, []string{"sleep", "60"}, time.Second)
			if !errors.Is(err, remote.ErrCommandTimedOut) {
				t.Fatalf("ExecSync timeout: %v, want ErrCommandTimedOut (probe timeout)", err)
			}

			// The kubelet reads logs itself, with its own parser.
			var logs bytes.Buffer
			testenv.PollTrue(t, "the log line", patient, func() bool {
				logs.Reset()
				err := crilogs.ReadLogs(c, cst.Status.LogPath, id, &crilogs.LogOptions{}, rs, &logs, &logs)
				return err == nil && logs.String() == "line one\n"
			})

			stats, err := rs.ListContainerStats(c, nil)
			if err != nil || len(stats) != 1 || stats[0].Memory.WorkingSetBytes.GetValue() == 0 {
				t.Fatalf("ListContainerStats %v %v", stats, err)
			}
			if _, err := rs.ListPodSandboxStats(c, nil); err != nil {
				t.Fatal(err)
			}

			// KillPod: stop containers with the grace period, then the
			// sandbox; garbage collection removes them later.
			if err := rs.StopContainer(c, id, 30); err != nil {
				t.Fatal(err)
			}
			if cst, _ := rs.ContainerStatus(c, id, false); cst.Status.ExitCode != 143 {
				t.Fatalf("exit %d after StopContainer", cst.Status.ExitCode)
			}
			if err := rs.StopPodSandbox(c, sb); err != nil {
				t.Fatal(err)
			}
			if err := rs.RemoveContainer(c, id); err != nil {
				t.Fatal(err)
			}
			if err := rs.RemovePodSandbox(c, sb); err != nil {
				t.Fatal(err)
			}
			if sbs, _ := rs.ListPodSandbox(c, nil); len(sbs) != 0 {
				t.Fatalf("sandboxes left: %v", sbs)
			}
			// Idempotent through the client too.
			if err := rs.StopPodSandbox(c, sb); err != nil {
				t.Fatal(err)
			}
			if err := rs.RemoveContainer(c, id); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestKubeletClientContainerEvents(t *testing.T) {
	srv := startServer(t)
	rs, _ := remoteClients(t, srv, false)
	c, cancel := context.WithCancel(tctx(t))
	defer cancel()
	ch := make(chan *runtimeapi.ContainerEventResponse, 100)
	connected := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- rs.GetContainerEvents(c, ch, func(runtimeapi.RuntimeService_GetContainerEventsClient) { close(connected) })
	}()
	<-connected
	// The stream is set up on the server once the first message flows;
	// wait until the runtime counts the subscriber.
	testenv.PollTrue(t, "the subscription", patient, func() bool { return srv.Runtime().events.n.Load() == 1 })
	r := srv.Runtime()
	sb := runPod(t, r, podConfig("ev"))
	id := createStart(t, r, sb, ctrConfig("c"))
	if err := r.SetContainerExited(id, 1, ""); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 5 {
		select {
		case ev := <-ch:
			got = append(got, ev.ContainerEventType.String())
		case <-time.After(patient):
			t.Fatalf("events so far: %v", got)
		}
	}
	want := "CONTAINER_CREATED_EVENT CONTAINER_STARTED_EVENT CONTAINER_CREATED_EVENT CONTAINER_STARTED_EVENT CONTAINER_STOPPED_EVENT"
	if strings.Join(got, " ") != want {
		t.Fatalf("events %v", got)
	}
	cancel()
	<-done
}

// execURL asks for an exec session and returns its URL.
func execURL(t *testing.T, rs criapi.RuntimeService, req *runtimeapi.ExecRequest) *url.URL {
	t.Helper()
	resp, err := rs.Exec(tctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(resp.Url)
	if err != nil {
		t.Fatal(err)
	}
	if host, _, _ := net.SplitHostPort(u.Host); host != "127.0.0.1" {
		t.Fatalf("streaming server on %q, want 127.0.0.1 only", u.Host)
	}
	return u
}

func TestStreamingExec(t *testing.T) {
	srv := startServer(t)
	rs, _ := remoteClients(t, srv, false)
	r := srv.Runtime()
	id := createStart(t, r, runPod(t, r, podConfig("p")), ctrConfig("c"))

	// SPDY is what crictl and the kubelet's proxy use.
	newExec := func(u *url.URL) (remotecommand.Executor, error) {
		return remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", u)
	}

	// stdin → cat → stdout: real bytes both ways.
	u := execURL(t, rs, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"cat"}, Stdin: true, Stdout: true, Stderr: true})
	ex, err := newExec(u)
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	err = ex.StreamWithContext(tctx(t), remotecommand.StreamOptions{Stdin: strings.NewReader("through the stream\n"), Stdout: &out, Stderr: &errOut})
	if err != nil || out.String() != "through the stream\n" {
		t.Fatalf("cat: %q %q %v", out.String(), errOut.String(), err)
	}

	// A non-zero exit code reaches the client as an exit error.
	u = execURL(t, rs, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"sh", "-c", "printenv NOPE; echo bye; exit 4"}, Stdout: true, Stderr: true})
	ex, _ = newExec(u)
	out.Reset()
	err = ex.StreamWithContext(tctx(t), remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
	var exitErr utilexec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitStatus() != 4 || out.String() != "bye\n" {
		t.Fatalf("exit 4: %v %q", err, out.String())
	}

	// TTY: an interactive shell with echo and CRLF, like crictl exec -it.
	u = execURL(t, rs, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"sh"}, Tty: true, Stdin: true, Stdout: true})
	ex, _ = newExec(u)
	out.Reset()
	err = ex.StreamWithContext(tctx(t), remotecommand.StreamOptions{Stdin: strings.NewReader("echo $HOSTNAME\rexit 0\r"), Stdout: &out, Tty: true})
	if err != nil || !strings.Contains(out.String(), "/ # echo $HOSTNAME\r\np\r\n") {
		t.Fatalf("tty shell: %q %v", out.String(), err)
	}

	// WebSocket: CRI streaming servers (containerd's, the kubelet's
	// package, ours) speak the channel protocol up to v4; the apiserver
	// translates kubectl's v5 to SPDY before it reaches a node.
	u = execURL(t, rs, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"sh", "-c", "echo over websocket; exit 2"}, Stdout: true, Stderr: true})
	ws, err := remotecommand.NewWebSocketExecutorForProtocols(&rest.Config{}, "GET", u.String(), "v4.channel.k8s.io")
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err = ws.StreamWithContext(tctx(t), remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
	if !errors.As(err, &exitErr) || exitErr.ExitStatus() != 2 || out.String() != "over websocket\n" {
		t.Fatalf("websocket: %v %q", err, out.String())
	}
}

func TestStreamingAttach(t *testing.T) {
	srv := startServer(t)
	rs, _ := remoteClients(t, srv, false)
	r := srv.Runtime()
	id := createStart(t, r, runPod(t, r, podConfig("p")), ctrConfig("c", "sh", "-c", "while true; do echo tick; sleep 0.05; done"))
	resp, err := rs.Attach(tctx(t), &runtimeapi.AttachRequest{ContainerId: id, Stdout: true, Stderr: true})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(resp.Url)
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: out, Stderr: io.Discard})
	}()
	testenv.PollTrue(t, "two ticks through attach", patient, func() bool { return strings.Count(out.String(), "tick\n") >= 2 })
	// The session ends when the container exits.
	if err := r.SetContainerExited(id, 0, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("attach ended with %v", err)
		}
	case <-time.After(patient):
		t.Fatal("attach outlived the container")
	}
}

func TestStreamingPortForwardEchoes(t *testing.T) {
	srv := startServer(t)
	rs, _ := remoteClients(t, srv, false)
	sb := runPod(t, srv.Runtime(), podConfig("pf"))
	resp, err := rs.PortForward(tctx(t), &runtimeapi.PortForwardRequest{PodSandboxId: sb, Port: []int32{8080}})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(resp.Url)
	tr, upgrader, err := spdy.RoundTripperFor(&rest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: tr}, "POST", u)
	stop, ready := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:8080"}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	defer func() { close(stop); <-done }()
	select {
	case <-ready:
	case <-time.After(patient):
		t.Fatal("port-forward not ready")
	}
	ports, err := fw.GetPorts()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0].Local))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(patient))
	if _, err := conn.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo: %q %v", buf, err)
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

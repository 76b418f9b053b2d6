package fakecri

import (
	"encoding/json"
	"fmt"
	"maps"
	goruntime "runtime"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestContainerStateMachine(t *testing.T) {
	r := newRuntime(t)
	sb := runPod(t, r, podConfig("sm"))
	cfg := ctrConfig("app", "sh", "-c", "echo started; sleep 0.2; exit 3")
	cfg.Metadata.Attempt = 4
	cfg.Annotations = map[string]string{"a": "b"}
	id := create(t, r, sb, cfg)

	st := ctrStatus(t, r, id)
	if st.State != runtimeapi.ContainerState_CONTAINER_CREATED || st.CreatedAt <= 0 || st.StartedAt != 0 || st.FinishedAt != 0 {
		t.Fatalf("after create: %v", st)
	}
	// What the kubelet's client insists on (DESIGN.md §5).
	if st.Id != id || st.Metadata.GetName() != "app" || st.Metadata.Attempt != 4 || st.Image.GetImage() == "" || st.ImageRef == "" || st.ImageId == "" {
		t.Fatalf("status lacks Id/Metadata/Image/ImageRef/ImageId: %v", st)
	}
	if !strings.HasPrefix(st.ImageId, "sha256:") || !strings.Contains(st.ImageRef, "@sha256:") {
		t.Fatalf("image id %q / ref %q", st.ImageId, st.ImageRef)
	}
	if !maps.Equal(st.Labels, cfg.Labels) || !maps.Equal(st.Annotations, cfg.Annotations) {
		t.Fatalf("labels/annotations altered")
	}
	if st.StopSignal != runtimeapi.Signal_SIGTERM {
		t.Fatalf("stop signal %s", st.StopSignal)
	}

	start(t, r, id)
	st = ctrStatus(t, r, id)
	if st.State != runtimeapi.ContainerState_CONTAINER_RUNNING || st.StartedAt < st.CreatedAt {
		t.Fatalf("after start: %v", st)
	}
	_, err := r.StartContainer(tctx(t), &runtimeapi.StartContainerRequest{ContainerId: id})
	wantCode(t, err, codes.FailedPrecondition, id)

	st = waitExited(t, r, id)
	if st.ExitCode != 3 || st.Reason != "Error" || st.FinishedAt < st.StartedAt {
		t.Fatalf("after exit: code %d reason %q started %d finished %d", st.ExitCode, st.Reason, st.StartedAt, st.FinishedAt)
	}
	// A CRI container never restarts: the kubelet creates a new attempt.
	_, err = r.StartContainer(tctx(t), &runtimeapi.StartContainerRequest{ContainerId: id})
	wantCode(t, err, codes.FailedPrecondition, id)
}

func TestCompletedContainer(t *testing.T) {
	r := newRuntime(t)
	sb := runPod(t, r, podConfig("done"))
	st := waitExited(t, r, createStart(t, r, sb, ctrConfig("echo", "/bin/echo", "hi")))
	if st.ExitCode != 0 || st.Reason != "Completed" {
		t.Fatalf("exit %d reason %q, want 0 Completed", st.ExitCode, st.Reason)
	}
}

func TestDaemonRunsUntilStopped(t *testing.T) {
	r := newRuntime(t)
	sb := runPod(t, r, podConfig("d"))
	// No command (image default), and commands the mock does not know,
	// behave like a server process.
	for _, cmd := range [][]string{nil, {"nginx", "-g", "daemon off;"}, {"/pause"}} {
		id := createStart(t, r, sb, ctrConfig("d"+string(rune('a'+len(cmd))), cmd...))
		if st := ctrStatus(t, r, id); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Fatalf("%v: %s", cmd, st.State)
		}
	}
}

// A daemon is state, not a goroutine (idle.go): a thousand nodes' pods
// are that many of them. It still ends as one: 137 when the runtime
// closes.
func TestDaemonsHoldNoGoroutine(t *testing.T) {
	r := newRuntime(t)
	sb := runPod(t, r, podConfig("many"))
	before := goruntime.NumGoroutine()
	var ids []string
	for i := range 50 {
		ids = append(ids, createStart(t, r, sb, ctrConfig(fmt.Sprintf("d%d", i), "/pause")))
	}
	if n := goruntime.NumGoroutine() - before; n >= 10 {
		t.Fatalf("50 daemons started %d goroutines", n)
	}
	r.Close()
	for _, id := range ids {
		if st := ctrStatus(t, r, id); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 137 {
			t.Fatalf("after Close: %s exit %d, want EXITED 137", st.State, st.ExitCode)
		}
	}
}

func TestCreateContainerRejectsBadInput(t *testing.T) {
	r := newRuntime(t)
	sb := runPod(t, r, podConfig("bad"))
	cases := map[string]struct {
		req  *runtimeapi.CreateContainerRequest
		code codes.Code
		id   string
	}{
		"no sandbox":      {&runtimeapi.CreateContainerRequest{Config: ctrConfig("a")}, codes.InvalidArgument, ""},
		"unknown sandbox": {&runtimeapi.CreateContainerRequest{PodSandboxId: "feedface", Config: ctrConfig("a")}, codes.NotFound, "feedface"},
		"no config":       {&runtimeapi.CreateContainerRequest{PodSandboxId: sb}, codes.InvalidArgument, ""},
		"no name":         {&runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: &runtimeapi.ContainerConfig{Image: &runtimeapi.ImageSpec{Image: "x"}}}, codes.InvalidArgument, ""},
		"no image":        {&runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "a"}}}, codes.InvalidArgument, ""},
		"missing image": {&runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "a"}, Image: &runtimeapi.ImageSpec{Image: "not-pulled:1"}}}, codes.NotFound, "not-pulled:1"},
	}
	for name, c := range cases {
		_, err := r.CreateContainer(tctx(t), c.req)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		wantCode(t, err, c.code, c.id)
	}
	// The name (with attempt) is reserved within the sandbox.
	id := create(t, r, sb, ctrConfig("dup"))
	_, err := r.CreateContainer(tctx(t), &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: ctrConfig("dup")})
	wantCode(t, err, codes.AlreadyExists, id)
}

func TestImageByIDAsTheKubeletPassesIt(t *testing.T) {
	r := newRuntime(t)
	pulled, err := r.PullImage(tctx(t), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "nginx:1.27"}})
	if err != nil {
		t.Fatal(err)
	}
	sb := runPod(t, r, podConfig("byid"))
	// The kubelet creates containers with Image = the image ID and
	// UserSpecifiedImage = what the pod spec says.
	cfg := ctrConfig("web")
	cfg.Image = &runtimeapi.ImageSpec{Image: pulled.ImageRef, UserSpecifiedImage: "nginx:1.27"}
	st := ctrStatus(t, r, create(t, r, sb, cfg))
	if st.ImageId != pulled.ImageRef {
		t.Fatalf("image id %q, want %q (PullImage's image_ref)", st.ImageId, pulled.ImageRef)
	}
	if st.Image.Image != "docker.io/library/nginx:1.27" || st.Image.UserSpecifiedImage != "nginx:1.27" {
		t.Fatalf("image spec %v", st.Image)
	}
	if !strings.HasPrefix(st.ImageRef, "docker.io/library/nginx@sha256:") {
		t.Fatalf("image ref %q", st.ImageRef)
	}
}

func TestStopAndRemoveContainerAreIdempotent(t *testing.T) {
	r := newRuntime(t)
	sb := runPod(t, r, podConfig("idem"))
	id := createStart(t, r, sb, ctrConfig("a"))
	for range 2 {
		if _, err := r.StopContainer(tctx(t), &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 5}); err != nil {
			t.Fatalf("StopContainer: %v", err)
		}
	}
	for range 2 {
		if _, err := r.RemoveContainer(tctx(t), &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
			t.Fatalf("RemoveContainer: %v", err)
		}
	}
	if _, err := r.StopContainer(tctx(t), &runtimeapi.StopContainerRequest{ContainerId: id}); err != nil {
		t.Fatalf("StopContainer of a removed container: %v", err)
	}
	_, err := r.ContainerStatus(tctx(t), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	wantCode(t, err, codes.NotFound, id)
	_, err = r.StopContainer(tctx(t), &runtimeapi.StopContainerRequest{})
	wantCode(t, err, codes.InvalidArgument, "")
	_, err = r.RemoveContainer(tctx(t), &runtimeapi.RemoveContainerRequest{})
	wantCode(t, err, codes.InvalidArgument, "")
}

func TestStopCreatedContainerLeavesItCreated(t *testing.T) {
	r := newRuntime(t)
	id := create(t, r, runPod(t, r, podConfig("c")), ctrConfig("c"))
	if _, err := r.StopContainer(tctx(t), &runtimeapi.StopContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	if st := ctrStatus(t, r, id); st.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		t.Fatalf("state %s", st.State)
	}
	if _, err := r.RemoveContainer(tctx(t), &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
}

func TestRemoveRunningContainerKillsIt(t *testing.T) {
	r := newRuntime(t)
	sb := runPod(t, r, podConfig("rm"))
	id := createStart(t, r, sb, ctrConfig("a", "sh", "-c", "trap '' TERM; sleep infinity"))
	events, cancel := r.SubscribeEvents()
	defer cancel()
	if _, err := r.RemoveContainer(tctx(t), &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	// The container was killed (STOPPED, exit 137) and then deleted.
	var types []runtimeapi.ContainerEventType
	for len(types) < 2 {
		ev := <-events
		if ev.ContainerId != id {
			continue
		}
		types = append(types, ev.ContainerEventType)
		if ev.ContainerEventType == runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT {
			for _, cs := range ev.ContainersStatuses {
				if cs.Id == id && cs.ExitCode != 137 {
					t.Fatalf("exit code %d, want 137", cs.ExitCode)
				}
			}
		}
	}
	if types[0] != runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT || types[1] != runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT {
		t.Fatalf("events %v", types)
	}
}

func TestListContainersFilters(t *testing.T) {
	r := newRuntime(t)
	sb1 := runPod(t, r, podConfig("one"))
	sb2 := runPod(t, r, podConfig("two"))
	a := createStart(t, r, sb1, ctrConfig("a"))
	b := create(t, r, sb1, ctrConfig("b"))
	cfgC := ctrConfig("c", "true")
	cfgC.Labels["tier"] = "db"
	c := createStart(t, r, sb2, cfgC)
	waitExited(t, r, c)

	list := func(f *runtimeapi.ContainerFilter) []string {
		resp, err := r.ListContainers(tctx(t), &runtimeapi.ListContainersRequest{Filter: f})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, x := range resp.Containers {
			if x.Metadata == nil || x.CreatedAt <= 0 || x.Image == nil || x.ImageRef == "" || x.PodSandboxId == "" {
				t.Fatalf("list item incomplete: %v", x)
			}
			ids = append(ids, x.Id)
		}
		return ids
	}
	check := func(name string, got []string, want ...string) {
		t.Helper()
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("%s: got %v, want %v", name, got, want)
		}
	}
	state := func(s runtimeapi.ContainerState) *runtimeapi.ContainerStateValue {
		return &runtimeapi.ContainerStateValue{State: s}
	}
	check("all", list(nil), a, b, c)
	check("id", list(&runtimeapi.ContainerFilter{Id: b}), b)
	check("id prefix", list(&runtimeapi.ContainerFilter{Id: a[:8]}), a)
	check("unknown id", list(&runtimeapi.ContainerFilter{Id: "zzz"}))
	check("sandbox", list(&runtimeapi.ContainerFilter{PodSandboxId: sb1}), a, b)
	check("sandbox prefix", list(&runtimeapi.ContainerFilter{PodSandboxId: sb2[:9]}), c)
	check("id in other sandbox", list(&runtimeapi.ContainerFilter{Id: c, PodSandboxId: sb1}))
	check("running", list(&runtimeapi.ContainerFilter{State: state(runtimeapi.ContainerState_CONTAINER_RUNNING)}), a)
	check("created", list(&runtimeapi.ContainerFilter{State: state(runtimeapi.ContainerState_CONTAINER_CREATED)}), b)
	check("exited", list(&runtimeapi.ContainerFilter{State: state(runtimeapi.ContainerState_CONTAINER_EXITED)}), c)
	check("label", list(&runtimeapi.ContainerFilter{LabelSelector: map[string]string{"tier": "db"}}), c)
	check("label no match", list(&runtimeapi.ContainerFilter{LabelSelector: map[string]string{"tier": "web"}}))
	check("sandbox AND label", list(&runtimeapi.ContainerFilter{PodSandboxId: sb1, LabelSelector: map[string]string{"ctr": "b"}}), b)
}

func TestAmbiguousPrefixIsInvalid(t *testing.T) {
	r := newRuntime(t)
	sb := runPod(t, r, podConfig("p"))
	ids := map[byte]bool{}
	// With 17 containers two IDs must share a first hex digit.
	for i := range 17 {
		id := create(t, r, sb, ctrConfig("c"+string(rune('a'+i))))
		if ids[id[0]] {
			_, err := r.ContainerStatus(tctx(t), &runtimeapi.ContainerStatusRequest{ContainerId: id[:1]})
			wantCode(t, err, codes.InvalidArgument, id[:1])
			return
		}
		ids[id[0]] = true
	}
	t.Fatal("pigeonhole failed")
}

func TestContainerVerboseStatus(t *testing.T) {
	r := newRuntime(t)
	sb := runPod(t, r, podConfig("v"))
	id := createStart(t, r, sb, ctrConfig("v", "sleep", "100"))
	resp, err := r.ContainerStatus(tctx(t), &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		SandboxID string `json:"sandboxID"`
		Pid       int    `json:"pid"`
		Program   string `json:"mockProgram"`
	}
	if err := json.Unmarshal([]byte(resp.Info["info"]), &info); err != nil {
		t.Fatalf("info is not JSON: %v", err)
	}
	if info.SandboxID != sb || info.Pid <= 0 || info.Program != "sleep 100" {
		t.Fatalf("info %+v", info)
	}
}

func TestUpdateContainerResources(t *testing.T) {
	r := newRuntime(t)
	sb := runPod(t, r, podConfig("res"))
	cfg := ctrConfig("r")
	cfg.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{CpuShares: 2, MemoryLimitInBytes: 64 << 20}}
	id := createStart(t, r, sb, cfg)
	if got := ctrStatus(t, r, id).Resources.GetLinux().GetMemoryLimitInBytes(); got != 64<<20 {
		t.Fatalf("memory limit %d", got)
	}
	_, err := r.UpdateContainerResources(tctx(t), &runtimeapi.UpdateContainerResourcesRequest{
		ContainerId: id, Linux: &runtimeapi.LinuxContainerResources{CpuShares: 512, MemoryLimitInBytes: 128 << 20},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := ctrStatus(t, r, id).Resources.GetLinux(); got.MemoryLimitInBytes != 128<<20 || got.CpuShares != 512 {
		t.Fatalf("resources %v", got)
	}
	_, err = r.UpdateContainerResources(tctx(t), &runtimeapi.UpdateContainerResourcesRequest{ContainerId: "nope"})
	wantCode(t, err, codes.NotFound, "nope")
	if _, err := r.StopContainer(tctx(t), &runtimeapi.StopContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	_, err = r.UpdateContainerResources(tctx(t), &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id, Linux: &runtimeapi.LinuxContainerResources{}})
	wantCode(t, err, codes.FailedPrecondition, id)
}

func TestUnknownContainerIsNotFoundWithID(t *testing.T) {
	r := newRuntime(t)
	const id = "abcdef0123"
	calls := map[string]func() error{
		"ContainerStatus": func() error {
			_, err := r.ContainerStatus(tctx(t), &runtimeapi.ContainerStatusRequest{ContainerId: id})
			return err
		},
		"StartContainer": func() error {
			_, err := r.StartContainer(tctx(t), &runtimeapi.StartContainerRequest{ContainerId: id})
			return err
		},
		"ExecSync": func() error {
			_, err := r.ExecSync(tctx(t), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"true"}})
			return err
		},
		"Exec": func() error {
			_, err := r.Exec(tctx(t), &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"true"}, Stdout: true})
			return err
		},
		"Attach": func() error {
			_, err := r.Attach(tctx(t), &runtimeapi.AttachRequest{ContainerId: id, Stdout: true})
			return err
		},
		"ContainerStats": func() error {
			_, err := r.ContainerStats(tctx(t), &runtimeapi.ContainerStatsRequest{ContainerId: id})
			return err
		},
		"ReopenContainerLog": func() error {
			_, err := r.ReopenContainerLog(tctx(t), &runtimeapi.ReopenContainerLogRequest{ContainerId: id})
			return err
		},
		"SetContainerExited": func() error { return r.SetContainerExited(id, 1, "") },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) { wantCode(t, call(), codes.NotFound, id) })
	}
}

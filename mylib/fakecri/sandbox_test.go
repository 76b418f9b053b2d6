package fakecri

import (
	"encoding/json"
	"maps"
	"net/netip"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestSandboxStatusHasWhatTheKubeletNeeds(t *testing.T) {
	r := newRuntime(t)
	cfg := podConfig("web")
	cfg.Metadata.Attempt = 2
	id := runPod(t, r, cfg)
	st := sbStatus(t, r, id)
	if st.Id != id || st.CreatedAt <= 0 || st.Metadata == nil {
		t.Fatalf("sandbox status lacks Id/CreatedAt/Metadata: %v", st)
	}
	if st.Metadata.Name != "web" || st.Metadata.Namespace != "ns" || st.Metadata.Uid != "uid-web" || st.Metadata.Attempt != 2 {
		t.Fatalf("metadata not echoed: %v", st.Metadata)
	}
	if st.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("state %s, want READY", st.State)
	}
	if !maps.Equal(st.Labels, cfg.Labels) || !maps.Equal(st.Annotations, cfg.Annotations) {
		t.Fatalf("labels/annotations altered: %v %v", st.Labels, st.Annotations)
	}
	if ip, err := netip.ParseAddr(st.GetNetwork().GetIp()); err != nil || !netip.MustParsePrefix("10.88.0.0/16").Contains(ip) {
		t.Fatalf("sandbox IP %q not in the pod CIDR", st.GetNetwork().GetIp())
	}
}

func TestSandboxStatusVerboseInfoIsJSON(t *testing.T) {
	r := newRuntime(t)
	id := runPod(t, r, podConfig("v"))
	resp, err := r.PodSandboxStatus(tctx(t), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	var info map[string]any
	if err := json.Unmarshal([]byte(resp.Info["info"]), &info); err != nil {
		t.Fatalf("verbose info is not JSON: %v: %q", err, resp.Info["info"])
	}
	if info["config"].(map[string]any)["metadata"].(map[string]any)["name"] != "v" {
		t.Fatalf("verbose info lacks the config: %v", info)
	}
	plain, _ := r.PodSandboxStatus(tctx(t), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if len(plain.Info) != 0 {
		t.Fatalf("non-verbose status has info: %v", plain.Info)
	}
}

// The mock applies no sysctl (it has no kernel namespaces), but what a
// runtime would apply shows where containerd shows it: crictl inspectp's
// info.config.linux.sysctls, as the kubelet sent them.
func TestSandboxInspectShowsItsSysctls(t *testing.T) {
	r := newRuntime(t)
	cfg := podConfig("sysctls")
	cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{Sysctls: map[string]string{"kernel.shm_rmid_forced": "1"}}
	id := runPod(t, r, cfg)
	resp, err := r.PodSandboxStatus(tctx(t), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := SandboxSysctls(resp.Info)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, map[string]string{"kernel.shm_rmid_forced": "1"}) {
		t.Errorf("inspectp info.config.linux.sysctls %v, want kernel.shm_rmid_forced=1: %s", got, resp.Info["info"])
	}
}

func TestHostNetworkSandboxHasNoIP(t *testing.T) {
	r := newRuntime(t)
	cfg := podConfig("host")
	cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
	}}
	st := sbStatus(t, r, runPod(t, r, cfg))
	if st.GetNetwork().GetIp() != "" {
		t.Fatalf("host-network sandbox got IP %q", st.Network.Ip)
	}
	if st.GetLinux().GetNamespaces().GetOptions().GetNetwork() != runtimeapi.NamespaceMode_NODE {
		t.Fatalf("namespace options not reported: %v", st.Linux)
	}
}

func TestSandboxIPsAreUniqueAndReleased(t *testing.T) {
	r := newRuntime(t, WithPodCIDR("10.1.0.0/29")) // .2 .. .7: six addresses
	seen := map[string]bool{}
	var ids []string
	for i := range 6 {
		id := runPod(t, r, podConfig("p"+string(rune('a'+i))))
		ip := sbStatus(t, r, id).Network.Ip
		if seen[ip] {
			t.Fatalf("IP %s handed out twice", ip)
		}
		seen[ip] = true
		ids = append(ids, id)
	}
	_, err := r.RunPodSandbox(tctx(t), &runtimeapi.RunPodSandboxRequest{Config: podConfig("full")})
	wantCode(t, err, codes.ResourceExhausted, "")
	if _, err := r.RemovePodSandbox(tctx(t), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: ids[0]}); err != nil {
		t.Fatal(err)
	}
	runPod(t, r, podConfig("again")) // the released IP is reusable
}

func TestSandboxNameIsReserved(t *testing.T) {
	r := newRuntime(t)
	id := runPod(t, r, podConfig("dup"))
	_, err := r.RunPodSandbox(tctx(t), &runtimeapi.RunPodSandboxRequest{Config: podConfig("dup")})
	wantCode(t, err, codes.AlreadyExists, id)
	// A new attempt is a new name, as the kubelet relies on.
	cfg := podConfig("dup")
	cfg.Metadata.Attempt = 1
	runPod(t, r, cfg)
	// Removing frees the name.
	if _, err := r.RemovePodSandbox(tctx(t), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatal(err)
	}
	runPod(t, r, podConfig("dup"))
}

func TestRunPodSandboxRejectsBadInput(t *testing.T) {
	r := newRuntime(t)
	for name, req := range map[string]*runtimeapi.RunPodSandboxRequest{
		"no config":   {},
		"no metadata": {Config: &runtimeapi.PodSandboxConfig{}},
		"no name":     {Config: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Uid: "u"}}},
		"bad handler": {Config: podConfig("h"), RuntimeHandler: "kata"},
	} {
		if _, err := r.RunPodSandbox(tctx(t), req); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			wantCode(t, err, codes.InvalidArgument, "")
		}
	}
	resp, err := r.RunPodSandbox(tctx(t), &runtimeapi.RunPodSandboxRequest{Config: podConfig("h"), RuntimeHandler: "runc"})
	if err != nil {
		t.Fatal(err)
	}
	if h := sbStatus(t, r, resp.PodSandboxId).RuntimeHandler; h != "runc" {
		t.Fatalf("runtime handler %q", h)
	}
}

func TestUnknownSandboxIsNotFoundWithID(t *testing.T) {
	r := newRuntime(t)
	const id = "0123456789abcdef"
	_, err := r.PodSandboxStatus(tctx(t), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	wantCode(t, err, codes.NotFound, id)
	_, err = r.PodSandboxStats(tctx(t), &runtimeapi.PodSandboxStatsRequest{PodSandboxId: id})
	wantCode(t, err, codes.NotFound, id)
	_, err = r.PortForward(tctx(t), &runtimeapi.PortForwardRequest{PodSandboxId: id})
	wantCode(t, err, codes.NotFound, id)
	_, err = r.PodSandboxStatus(tctx(t), &runtimeapi.PodSandboxStatusRequest{})
	wantCode(t, err, codes.InvalidArgument, "")
	_, err = r.StopPodSandbox(tctx(t), &runtimeapi.StopPodSandboxRequest{})
	wantCode(t, err, codes.InvalidArgument, "")
}

func TestStopAndRemoveSandboxAreIdempotent(t *testing.T) {
	r := newRuntime(t)
	id := runPod(t, r, podConfig("idem"))
	for range 2 {
		if _, err := r.StopPodSandbox(tctx(t), &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
			t.Fatalf("StopPodSandbox: %v", err)
		}
	}
	if st := sbStatus(t, r, id); st.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatalf("state %s after stop", st.State)
	}
	for range 2 {
		if _, err := r.RemovePodSandbox(tctx(t), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
			t.Fatalf("RemovePodSandbox: %v", err)
		}
	}
	if _, err := r.StopPodSandbox(tctx(t), &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatalf("StopPodSandbox of a removed sandbox: %v", err)
	}
	_, err := r.PodSandboxStatus(tctx(t), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	wantCode(t, err, codes.NotFound, id)
}

func TestStopPodSandboxKillsItsContainers(t *testing.T) {
	r := newRuntime(t)
	sb := runPod(t, r, podConfig("kill"))
	a := createStart(t, r, sb, ctrConfig("a", "sleep", "infinity"))
	b := createStart(t, r, sb, ctrConfig("b", "sh", "-c", "trap '' TERM; sleep 1000"))
	created := create(t, r, sb, ctrConfig("c"))
	other := runPod(t, r, podConfig("other"))
	o := createStart(t, r, other, ctrConfig("o"))

	if _, err := r.StopPodSandbox(tctx(t), &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{a, b} { // no grace: SIGKILL, even for the TERM-ignorer
		if st := ctrStatus(t, r, id); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 137 {
			t.Fatalf("container %s: %s exit %d, want EXITED 137", st.Metadata.Name, st.State, st.ExitCode)
		}
	}
	if st := ctrStatus(t, r, created); st.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		t.Fatalf("created container became %s", st.State)
	}
	if st := ctrStatus(t, r, o); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("container of another pod became %s", st.State)
	}
	// No new containers in a stopped sandbox.
	_, err := r.CreateContainer(tctx(t), &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: ctrConfig("late")})
	wantCode(t, err, codes.FailedPrecondition, sb)
	_, err = r.StartContainer(tctx(t), &runtimeapi.StartContainerRequest{ContainerId: created})
	wantCode(t, err, codes.FailedPrecondition, sb)
}

func TestRemovePodSandboxRemovesRunningContainers(t *testing.T) {
	r := newRuntime(t)
	sb := runPod(t, r, podConfig("rm"))
	id := createStart(t, r, sb, ctrConfig("a"))
	if _, err := r.RemovePodSandbox(tctx(t), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	_, err := r.ContainerStatus(tctx(t), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	wantCode(t, err, codes.NotFound, id)
	if n := len(r.Snapshot().Containers); n != 0 {
		t.Fatalf("%d containers left", n)
	}
}

func TestListPodSandboxFilters(t *testing.T) {
	r := newRuntime(t)
	a := runPod(t, r, podConfig("a"))
	b := runPod(t, r, podConfig("b"))
	cfgC := podConfig("c")
	cfgC.Labels["tier"] = "db"
	c := runPod(t, r, cfgC)
	if _, err := r.StopPodSandbox(tctx(t), &runtimeapi.StopPodSandboxRequest{PodSandboxId: b}); err != nil {
		t.Fatal(err)
	}
	list := func(f *runtimeapi.PodSandboxFilter) []string {
		resp, err := r.ListPodSandbox(tctx(t), &runtimeapi.ListPodSandboxRequest{Filter: f})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, s := range resp.Items {
			if s.Metadata == nil || s.CreatedAt <= 0 {
				t.Fatalf("list item lacks metadata/created_at: %v", s)
			}
			ids = append(ids, s.Id)
		}
		return ids
	}
	check := func(name string, got []string, want ...string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: got %d items %v, want %v", name, len(got), got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: got %v, want %v (oldest first)", name, got, want)
			}
		}
	}
	check("all", list(nil), a, b, c)
	check("id", list(&runtimeapi.PodSandboxFilter{Id: b}), b)
	check("id prefix", list(&runtimeapi.PodSandboxFilter{Id: c[:10]}), c)
	check("unknown id", list(&runtimeapi.PodSandboxFilter{Id: "nope"}))
	check("ready", list(&runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}), a, c)
	check("notready", list(&runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}}), b)
	check("label", list(&runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"tier": "db"}}), c)
	check("labels AND", list(&runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"tier": "db", "app": "a"}}))
	check("id AND state", list(&runtimeapi.PodSandboxFilter{Id: a, State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}}))
}

func TestStatusesAreCopies(t *testing.T) {
	r := newRuntime(t)
	id := runPod(t, r, podConfig("copy"))
	st := sbStatus(t, r, id)
	st.Labels["app"] = "mutated"
	st.Metadata.Name = "mutated"
	if again := sbStatus(t, r, id); again.Labels["app"] != "copy" || again.Metadata.Name != "copy" {
		t.Fatalf("mutating a returned status changed the runtime: %v", again)
	}
}

package kuberuntime_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	proberesults "k8s.io/kubernetes/pkg/kubelet/prober/results"

	"kubelet-labs/mycore/kuberuntime"
)

// results is a probe results cache by container ID, as the prober keeps it.
type results map[string]proberesults.Result

func (r results) Get(id kubecontainer.ContainerID) (proberesults.Result, bool) {
	res, ok := r[id.ID]
	return res, ok
}

// actionsPod is a pod with the given containers (image "busybox") and init
// containers, and the given restart policy.
func actionsPod(policy v1.RestartPolicy, inits []string, names ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"}, Spec: v1.PodSpec{RestartPolicy: policy}}
	for _, n := range inits {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: n, Image: "busybox"})
	}
	for _, n := range names {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: n, Image: "busybox"})
	}
	return p
}

// runtimeState builds the pod cache's view: a ready sandbox with an IP
// (unless noSandbox) and the given containers, newest first.
type ctrState struct {
	name  string
	state kubecontainer.State
	exit  int
	image string // default: the spec's, so the hash matches
}

func runtimeState(pod *v1.Pod, sandbox runtimeapi.PodSandboxState, cs ...ctrState) *kubecontainer.PodStatus {
	ps := &kubecontainer.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	if sandbox >= 0 {
		ps.SandboxStatuses = []*runtimeapi.PodSandboxStatus{{
			Id: "sb1", State: sandbox, Metadata: &runtimeapi.PodSandboxMetadata{Attempt: 0},
			Network: &runtimeapi.PodSandboxNetworkStatus{Ip: "10.0.0.2"},
			Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{
				Network: runtimeapi.NamespaceMode_POD}}},
		}}
	}
	for i, c := range cs {
		image := c.image
		if image == "" {
			image = "busybox"
		}
		ps.ContainerStatuses = append(ps.ContainerStatuses, &kubecontainer.Status{
			ID:    kubecontainer.ContainerID{Type: "containerd", ID: c.name + "-id"},
			Name:  c.name,
			State: c.state, ExitCode: c.exit,
			Hash:       kubecontainer.HashContainer(&v1.Container{Name: c.name, Image: image}),
			FinishedAt: time.Now().Add(-time.Duration(i+1) * time.Minute),
		})
	}
	return ps
}

const noSandbox = runtimeapi.PodSandboxState(-1)

var (
	running = kubecontainer.ContainerStateRunning
	exited  = kubecontainer.ContainerStateExited
	unknown = kubecontainer.ContainerStateUnknown
)

// ComputePodActions, case by case: what a learner can predict from the
// pod, the runtime's state and the probe results.
func TestComputePodActions(t *testing.T) {
	tests := []struct {
		name     string
		pod      *v1.Pod
		state    func(*v1.Pod) *kubecontainer.PodStatus
		liveness results
		startup  results
		// want
		killPod, createSandbox bool
		start, startInit       []string
		kill                   map[string]kuberuntime.KillReason // container → reason
		describe               string                            // part of Describe
		why                    string                            // what upstream does, and where (v1.36.3)
	}{{
		name:    "new pod: a sandbox, then every container",
		why:     "no sandbox yet: PodSandboxChanged says create one, and a new sandbox starts every container (kuberuntime_manager.go:1205, 1219-1237, 1262)",
		pod:     actionsPod(v1.RestartPolicyAlways, nil, "a", "b"),
		state:   func(p *v1.Pod) *kubecontainer.PodStatus { return runtimeState(p, noSandbox) },
		killPod: true, createSandbox: true, start: []string{"a", "b"},
		describe: "create the sandbox (attempt 0); start a, b",
	}, {
		name: "running, same spec, no probe result: nothing to do",
		why:  "a running container with the same spec hash and no failed probe is kept (kuberuntime_manager.go:1354-1357)",
		pod:  actionsPod(v1.RestartPolicyAlways, nil, "a"),
		state: func(p *v1.Pod) *kubecontainer.PodStatus {
			return runtimeState(p, 0, ctrState{name: "a", state: running})
		},
		describe: "nothing to do",
	}, {
		name: "image changed: kill and restart, even with restartPolicy Never",
		why:  "a changed spec hash kills the container and restarts it whatever the restart policy (kuberuntime_manager.go:1338-1342, 1363-1366)",
		pod:  actionsPod(v1.RestartPolicyNever, nil, "a"),
		state: func(p *v1.Pod) *kubecontainer.PodStatus {
			return runtimeState(p, 0, ctrState{name: "a", state: running, image: "busybox:old"})
		},
		start: []string{"a"}, kill: map[string]kuberuntime.KillReason{"a": kuberuntime.ReasonUnknown},
		describe: "definition changed",
	}, {
		name: "liveness failed, Always: kill and restart",
		why:  "a failed liveness probe kills the container; restartPolicy Always starts it again (kuberuntime_manager.go:1343-1346, 1363-1366)",
		pod:  actionsPod(v1.RestartPolicyAlways, nil, "a", "b"),
		state: func(p *v1.Pod) *kubecontainer.PodStatus {
			return runtimeState(p, 0, ctrState{name: "a", state: running}, ctrState{name: "b", state: running})
		},
		liveness: results{"a-id": proberesults.Failure, "b-id": proberesults.Success},
		start:    []string{"a"}, kill: map[string]kuberuntime.KillReason{"a": kuberuntime.ReasonLivenessProbe},
		describe: "kill a (Container a failed liveness probe, will be restarted); start a",
	}, {
		name: "liveness failed, Never, nothing else runs: the pod is over",
		why:  "a failed liveness probe kills it; Never does not restart it; nothing kept and nothing to start kills the pod (kuberuntime_manager.go:1330, 1343-1346, 1377-1382)",
		pod:  actionsPod(v1.RestartPolicyNever, nil, "a"),
		state: func(p *v1.Pod) *kubecontainer.PodStatus {
			return runtimeState(p, 0, ctrState{name: "a", state: running})
		},
		liveness: results{"a-id": proberesults.Failure},
		killPod:  true, kill: map[string]kuberuntime.KillReason{"a": kuberuntime.ReasonLivenessProbe},
		describe: "nothing is left to run; kill a (Container a failed liveness probe)",
	}, {
		name: "startup failed: kill and restart",
		why:  "a failed startup probe kills the container; OnFailure restarts it (kuberuntime_manager.go:1347-1350, 1363-1366)",
		pod:  actionsPod(v1.RestartPolicyOnFailure, nil, "a"),
		state: func(p *v1.Pod) *kubecontainer.PodStatus {
			return runtimeState(p, 0, ctrState{name: "a", state: running})
		},
		startup: results{"a-id": proberesults.Failure},
		start:   []string{"a"}, kill: map[string]kuberuntime.KillReason{"a": kuberuntime.ReasonStartupProbe},
		describe: "failed startup probe, will be restarted",
	}, {
		name: "startup not decided yet (Unknown): keep",
		why:  "only a Failure result kills: Unknown keeps the container (kuberuntime_manager.go:1347)",
		pod:  actionsPod(v1.RestartPolicyAlways, nil, "a"),
		state: func(p *v1.Pod) *kubecontainer.PodStatus {
			return runtimeState(p, 0, ctrState{name: "a", state: running})
		},
		startup:  results{"a-id": proberesults.Unknown},
		describe: "nothing to do",
	}, {
		name: "exited 0, Always: start again",
		why:  "a container not running starts again when ShouldContainerBeRestarted says so: Always restarts any exit (kuberuntime_manager.go:1308-1311; pkg/kubelet/container/helpers.go:86-122)",
		pod:  actionsPod(v1.RestartPolicyAlways, nil, "a"),
		state: func(p *v1.Pod) *kubecontainer.PodStatus {
			return runtimeState(p, 0, ctrState{name: "a", state: exited})
		},
		start: []string{"a"},
	}, {
		name: "exited 0, OnFailure: done, the sandbox goes",
		why:  "OnFailure does not restart exit 0; nothing kept and nothing to start kills the pod (kuberuntime_manager.go:1308-1326, 1377-1382)",
		pod:  actionsPod(v1.RestartPolicyOnFailure, nil, "a"),
		state: func(p *v1.Pod) *kubecontainer.PodStatus {
			return runtimeState(p, 0, ctrState{name: "a", state: exited})
		},
		killPod: true,
	}, {
		name: "exited 1, OnFailure: start again",
		why:  "OnFailure restarts a non-zero exit (kuberuntime_manager.go:1308-1311; pkg/kubelet/container/helpers.go:114-119)",
		pod:  actionsPod(v1.RestartPolicyOnFailure, nil, "a"),
		state: func(p *v1.Pod) *kubecontainer.PodStatus {
			return runtimeState(p, 0, ctrState{name: "a", state: exited, exit: 1})
		},
		start: []string{"a"},
	}, {
		name: "exited 1, Never: done",
		why:  "Never restarts nothing; nothing kept and nothing to start kills the pod (kuberuntime_manager.go:1308-1326, 1377-1382)",
		pod:  actionsPod(v1.RestartPolicyNever, nil, "a"),
		state: func(p *v1.Pod) *kubecontainer.PodStatus {
			return runtimeState(p, 0, ctrState{name: "a", state: exited, exit: 1})
		},
		killPod: true,
	}, {
		name: "state unknown: kill first, then start",
		why:  "a container in state Unknown may still run: kill it before starting it again, never two instances (kuberuntime_manager.go:1312-1323)",
		pod:  actionsPod(v1.RestartPolicyAlways, nil, "a"),
		state: func(p *v1.Pod) *kubecontainer.PodStatus {
			return runtimeState(p, 0, ctrState{name: "a", state: unknown})
		},
		start: []string{"a"}, kill: map[string]kuberuntime.KillReason{"a": kuberuntime.ReasonUnknown},
	}, {
		name: "sandbox died, Always: kill the pod, new sandbox, everything again",
		why:  "a sandbox not ready is replaced: kill the pod, create a sandbox (attempt 1), start every container (kuberuntime_manager.go:1205, 1219-1237, 1262)",
		pod:  actionsPod(v1.RestartPolicyAlways, nil, "a"),
		state: func(p *v1.Pod) *kubecontainer.PodStatus {
			return runtimeState(p, runtimeapi.PodSandboxState_SANDBOX_NOTREADY, ctrState{name: "a", state: exited, exit: 137})
		},
		killPod: true, createSandbox: true, start: []string{"a"},
		describe: "create a new sandbox (attempt 1)",
	}, {
		name: "sandbox died, Never, the pod ran: no new sandbox",
		why:  "restartPolicy Never, not the first sandbox and containers ran: the pod is over, no new sandbox (kuberuntime_manager.go:1206-1217)",
		pod:  actionsPod(v1.RestartPolicyNever, nil, "a"),
		state: func(p *v1.Pod) *kubecontainer.PodStatus {
			return runtimeState(p, runtimeapi.PodSandboxState_SANDBOX_NOTREADY, ctrState{name: "a", state: exited})
		},
		killPod: true,
	}, {
		name: "sandbox died, OnFailure, the container succeeded: no new sandbox",
		why:  "OnFailure containers that succeeded do not start again; nothing to start and a container ran: no new sandbox (kuberuntime_manager.go:1219-1252)",
		pod:  actionsPod(v1.RestartPolicyOnFailure, nil, "a"),
		state: func(p *v1.Pod) *kubecontainer.PodStatus {
			return runtimeState(p, runtimeapi.PodSandboxState_SANDBOX_NOTREADY, ctrState{name: "a", state: exited})
		},
		killPod: true,
	}, {
		name:    "new pod with init containers: the first init container only",
		why:     "a new sandbox with init containers starts the first init container only (kuberuntime_manager.go:1254-1261)",
		pod:     actionsPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
		state:   func(p *v1.Pod) *kubecontainer.PodStatus { return runtimeState(p, noSandbox) },
		killPod: true, createSandbox: true, startInit: []string{"i1"},
		describe: "start init i1",
	}, {
		name: "init i1 running: wait",
		why:  "init containers not done: the regular containers wait (kuberuntime_manager.go:1283-1288)",
		pod:  actionsPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
		state: func(p *v1.Pod) *kubecontainer.PodStatus {
			return runtimeState(p, 0, ctrState{name: "i1", state: running})
		},
		describe: "nothing to do",
	}, {
		name: "init i1 succeeded: i2 next",
		why:  "the next init container starts after the previous one succeeded (kuberuntime_container.go computeInitContainerActions)",
		pod:  actionsPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
		state: func(p *v1.Pod) *kubecontainer.PodStatus {
			return runtimeState(p, 0, ctrState{name: "i1", state: exited})
		},
		startInit: []string{"i2"},
	}, {
		name: "every init container succeeded: the containers",
		why:  "initialized: the regular containers start (kuberuntime_manager.go:1283-1311)",
		pod:  actionsPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
		state: func(p *v1.Pod) *kubecontainer.PodStatus {
			return runtimeState(p, 0, ctrState{name: "i2", state: exited}, ctrState{name: "i1", state: exited})
		},
		start: []string{"a"},
	}, {
		name: "init i1 failed, Always: i1 again",
		why:  "a failed init container starts again under Always (kuberuntime_container.go computeInitContainerActions)",
		pod:  actionsPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
		state: func(p *v1.Pod) *kubecontainer.PodStatus {
			return runtimeState(p, 0, ctrState{name: "i1", state: exited, exit: 2})
		},
		startInit: []string{"i1"},
	}, {
		name: "init i1 failed, Never: the pod is over",
		why:  "a failed init container with Never kills the pod (kuberuntime_container.go computeInitContainerActions)",
		pod:  actionsPod(v1.RestartPolicyNever, []string{"i1", "i2"}, "a"),
		state: func(p *v1.Pod) *kubecontainer.PodStatus {
			return runtimeState(p, 0, ctrState{name: "i1", state: exited, exit: 2})
		},
		killPod: true,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := kuberuntime.New(nil, kuberuntime.Options{Liveness: tc.liveness, Startup: tc.startup})
			a := m.ComputePodActions(tc.pod, tc.state(tc.pod))
			if a.KillPod != tc.killPod || a.CreateSandbox != tc.createSandbox {
				t.Errorf("KillPod %v CreateSandbox %v, want %v %v: %s", a.KillPod, a.CreateSandbox, tc.killPod, tc.createSandbox, tc.why)
			}
			if got := names(tc.pod.Spec.Containers, a.ContainersToStart); !slices.Equal(got, tc.start) {
				t.Errorf("containers to start %v, want %v: %s", got, tc.start, tc.why)
			}
			if got := names(tc.pod.Spec.InitContainers, a.InitContainersToStart); !slices.Equal(got, tc.startInit) {
				t.Errorf("init containers to start %v, want %v: %s", got, tc.startInit, tc.why)
			}
			if len(a.ContainersToKill) != len(tc.kill) {
				t.Errorf("containers to kill %v, want %v: %s", a.ContainersToKill, tc.kill, tc.why)
			}
			for id, k := range a.ContainersToKill {
				if reason, ok := tc.kill[k.Name]; !ok || reason != k.Reason || id.ID != k.Name+"-id" {
					t.Errorf("kill %s %+v, want reason %q: %s", id, k, tc.kill[k.Name], tc.why)
				}
			}
			if d := a.Describe(tc.pod); !strings.Contains(d, tc.describe) {
				t.Errorf("Describe = %q, want it to contain %q: %s", d, tc.describe, tc.why)
			}
		})
	}
}

func names(list []v1.Container, idx []int) []string {
	var out []string
	for _, i := range idx {
		out = append(out, list[i].Name)
	}
	return out
}

// A container whose restartPolicy is its own (ContainerRestartRules, on by
// default since 1.35) overrides the pod's: OnFailure in a pod that says
// Always is not started again after exit 0.
func TestComputePodActionsContainerRestartPolicy(t *testing.T) {
	pod := actionsPod(v1.RestartPolicyAlways, nil, "a", "b")
	onFailure := v1.ContainerRestartPolicyOnFailure
	pod.Spec.Containers[0].RestartPolicy = &onFailure
	m := kuberuntime.New(nil, kuberuntime.Options{})
	a := m.ComputePodActions(pod, runtimeState(pod, 0, ctrState{name: "a", state: exited}, ctrState{name: "b", state: exited}))
	if got := names(pod.Spec.Containers, a.ContainersToStart); !slices.Equal(got, []string{"b"}) {
		t.Errorf("containers to start %v, want [b]: a has its own restartPolicy OnFailure and exited 0, and with ContainerRestartRules the container's policy overrides the pod's (kuberuntime_manager.go:1221-1237 for a new sandbox; pkg/kubelet/container/helpers.go:107-108 → pkg/api/v1/pod ContainerShouldRestart otherwise)", got)
	}
}

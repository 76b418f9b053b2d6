package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/mycore/cri"
)

// Lab 06 serves the mock CRI on the state folder's mockcri.sock while it
// runs. The walk-through leaves nothing in the runtime (it ends with crictl
// rm and rmp), so the lab records every CRI call in 06-cri-mock/calls.log;
// the control API's changes stay in the runtime until the lab stops.
func init() {
	register("06", labCheck{Title: "the CRI, by hand (mock runtime + crictl)", Check: checkLab06})
}

const lab06Start = "start the lab in another terminal and leave it running: go run ./labs/06-cri-mock (README: Run it)"

func checkLab06(ctx context.Context, e *Env) []Result {
	var results []Result
	if exists(e.StatePath("bin", "crictl")) {
		results = append(results, Done("crictl is built (bin/crictl in the state folder)"))
	} else {
		results = append(results, NotYet("crictl is not built", "run scripts/build-crictl.sh (README: Run it)"))
	}

	// The mock answers while the lab runs; a killed run leaves no socket,
	// or one nobody listens on, and Dial says which.
	c, dialErr := lab06Runtime(ctx, e)
	if dialErr != nil {
		results = append(results, NotYet("the mock runtime does not answer on mockcri.sock: "+dialErr.Error(), lab06Start))
	} else {
		defer c.Close()
		results = append(results, Done("the mock runtime answers on mockcri.sock (CRI v1)"))
	}

	results = append(results, lab06Calls(e.StatePath("06-cri-mock", "calls.log"))...)

	// The control API's changes: visible only in the running mock.
	if dialErr != nil {
		for _, what := range []string{"a container made to exit with reason OOMKilled", "a sandbox made NOTREADY", "the condition NetworkReady=false"} {
			results = append(results, NotYet(what+": cannot tell, the mock is not running", lab06Start+", then do The control API section"))
		}
		return results
	}
	return append(results, lab06Control(ctx, c)...)
}

// lab06Runtime connects to the lab's mock, waiting little: a socket nobody
// listens on fails at once, and a live mock answers in milliseconds.
func lab06Runtime(ctx context.Context, e *Env) (*cri.Client, error) {
	sock := e.StatePath("mockcri.sock")
	if !exists(sock) {
		return nil, fmt.Errorf("no socket (the lab is not running)")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return e.CRI(ctx, "unix://"+sock)
}

// lab06Call is one line of the lab's calls.log: "15:04:05.000  Method  1.2ms  ok".
type lab06Call struct {
	method string
	took   time.Duration
	ok     bool
}

// lab06Calls checks the walk-through by the CRI calls the lab recorded in
// calls.log (this run's; the walk-through ends with crictl rm and rmp,
// which leave nothing else behind).
func lab06Calls(path string) []Result {
	const hint = "do the Walk-through in a second terminal, with the lab running"
	b, err := os.ReadFile(path)
	if err != nil {
		return []Result{NotYet("the walk-through: no 06-cri-mock/calls.log (the lab writes every CRI call there)", "start the lab: go run ./labs/06-cri-mock (README: Run it), then "+hint)}
	}
	var calls []lab06Call
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		took, err := time.ParseDuration(f[2])
		if err != nil {
			continue
		}
		calls = append(calls, lab06Call{method: f[1], took: took, ok: f[3] == "ok"})
	}
	okCalls := func(methods ...string) (missing []string) {
		for _, m := range methods {
			if !slices.ContainsFunc(calls, func(c lab06Call) bool { return c.method == m && c.ok }) {
				missing = append(missing, m)
			}
		}
		return missing
	}
	step := func(what, hint string, methods ...string) Result {
		if missing := okCalls(methods...); len(missing) > 0 {
			return NotYet(what+": calls.log has no successful "+strings.Join(missing, ", "), hint)
		}
		return Done("%s: %s", what, strings.Join(methods, ", "))
	}
	results := []Result{
		step("a pod and its container started", hint+": crictl runp, create, start", "RunPodSandbox", "CreateContainer", "StartContainer"),
		step("commands run in the container", hint+": crictl exec -s (ExecSync) and crictl exec (Exec, streamed)", "ExecSync", "Exec"),
	}
	// SIGTERM ignored: StopContainer returns only after the timeout, when
	// the runtime sends SIGKILL (exit code 137).
	slowest := time.Duration(0)
	for _, c := range calls {
		if c.method == "StopContainer" && c.ok && c.took > slowest {
			slowest = c.took
		}
	}
	if slowest >= time.Second {
		results = append(results, Done("a stop that waited out its grace period: StopContainer took %s (SIGTERM ignored, then SIGKILL: 137)", slowest.Round(time.Millisecond)))
	} else {
		results = append(results, NotYet("no StopContainer waited for a grace period", hint+": start the SIGTERM-ignoring container (ignore-sigterm.json), then time crictl stop --timeout 3 $STUB"))
	}
	return append(results, step("the pod removed", hint+": crictl rm, stopp, rmp", "RemoveContainer", "StopPodSandbox", "RemovePodSandbox"))
}

// lab06Control looks for what The control API section did to the mock.
func lab06Control(ctx context.Context, c *cri.Client) []Result {
	const hint = "do The control API section: the curl commands to the mock's control socket"
	var results []Result
	cs, err := c.Runtime.ListContainers(c.Context(ctx), nil)
	if err != nil {
		return []Result{NotYet("ListContainers: "+err.Error(), lab06Start)}
	}
	oom := ""
	for _, ctr := range cs {
		st, err := c.Runtime.ContainerStatus(c.Context(ctx), ctr.Id, false)
		if err == nil && st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_EXITED && st.GetStatus().GetReason() == "OOMKilled" {
			oom = fmt.Sprintf("container %.13s EXITED, exit code %d, reason OOMKilled", ctr.Id, st.GetStatus().GetExitCode())
		}
	}
	if oom != "" {
		results = append(results, Done("%s (POST /v1/containers/ID/exit)", oom))
	} else {
		results = append(results, NotYet("no container has exited with reason OOMKilled", hint+` (POST /v1/containers/$CTR/exit -d '{"exitCode":1,"reason":"OOMKilled"}')`))
	}

	sbs, err := c.Pods(ctx, nil)
	if err != nil {
		return append(results, NotYet("ListPodSandbox: "+err.Error(), lab06Start))
	}
	notReady := ""
	for _, sb := range sbs {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
			notReady = fmt.Sprintf("sandbox %.13s (%s/%s) is NOTREADY", sb.Id, sb.GetMetadata().GetNamespace(), sb.GetMetadata().GetName())
		}
	}
	if notReady != "" {
		results = append(results, Done("%s (POST /v1/sandboxes/ID/notready)", notReady))
	} else {
		results = append(results, NotYet("no sandbox is NOTREADY", hint+" (POST /v1/sandboxes/$POD/notready)"))
	}

	info, err := c.Info(ctx)
	switch {
	case err != nil:
		results = append(results, NotYet("CRI Status: "+err.Error(), lab06Start))
	case !info.Ready(runtimeapi.NetworkReady):
		results = append(results, Done("the runtime reports NetworkReady=false (PUT /v1/conditions/NetworkReady)"))
	default:
		results = append(results, NotYet("the runtime still reports NetworkReady=true", hint+` (PUT /v1/conditions/NetworkReady -d '{"status":false,"reason":"NoCNI"}')`))
	}
	return results
}

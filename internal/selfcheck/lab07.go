package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"kubelet-labs/mycore/cri"
)

// Lab 07's part 1 removes its pod and its PLEG lives only in the lab's
// process, so part 1 appends what it saw to 07-pleg/part1.log; part 2
// runs until Ctrl-C on the mock at 07-pleg/mockcri.sock, where the demo
// pod lab07/web shows what the second terminal did to it.
func init() {
	register("07", labCheck{Title: "the PLEG: how the kubelet notices that a container died", Check: checkLab07})
}

const lab07Part2 = "start part 2 in another terminal and leave it running: go run ./labs/07-pleg --steps=false (README: Part 2)"

func checkLab07(ctx context.Context, e *Env) []Result {
	record, _ := os.ReadFile(e.StatePath("07-pleg", "part1.log"))
	results := []Result{lab07Part1(string(record), "our mock CRI runtime, started by this lab",
		"part 1 on the lab's own mock", "run part 1: go run ./labs/07-pleg --live=false (README: Part 1)")}

	c, err := lab07Runtime(ctx, e)
	if err != nil {
		results = append(results,
			NotYet("part 2: its mock does not answer on 07-pleg/mockcri.sock: "+err.Error(), lab07Part2),
			NotYet("nginx made to exit and removed: cannot tell, part 2 is not running", lab07Part2+", then run the second terminal's commands"),
			NotYet("a container extra started in the demo pod: cannot tell, part 2 is not running", lab07Part2+", then run the second terminal's commands"))
	} else {
		defer c.Close()
		results = append(results, Done("part 2 runs: its mock answers on 07-pleg/mockcri.sock"))
		results = append(results, lab07Demo(ctx, c)...)
	}

	return append(results, lab07Part1(string(record), "a mock CRI runtime started by someone else",
		"part 1 on lab 06's mock (--cri-endpoint)", "start lab 06 (go run ./labs/06-cri-mock), then run part 1 on its socket with --cri-endpoint (README: Watching lab 06's mock)"))
}

// lab07Part1 is done when part1.log has a run on the runtime whose words
// are whose, in which the PLEG sent ContainerDied and ContainerRemoved and
// went unhealthy and back.
func lab07Part1(record, whose, what, hint string) Result {
	found := false
	for _, line := range strings.Split(record, "\n") {
		if !strings.Contains(line, " part 1 on "+whose+" (") {
			continue
		}
		found = true
		if strings.Contains(line, "ContainerDied") && strings.Contains(line, "ContainerRemoved") &&
			strings.Contains(line, "Healthy() after the pause: false, after the last relist: true") {
			return Done("%s: the PLEG sent ContainerStarted, ContainerDied and ContainerRemoved, went unhealthy after the pause and healthy after a relist (07-pleg/part1.log)", what)
		}
	}
	if found {
		return NotYet(what+": part1.log has a run without the events ContainerDied and ContainerRemoved", hint)
	}
	return NotYet(what+": no such run in 07-pleg/part1.log", hint)
}

// lab07Runtime connects to part 2's mock, if it runs.
func lab07Runtime(ctx context.Context, e *Env) (*cri.Client, error) {
	sock := e.StatePath("07-pleg", "mockcri.sock")
	if !exists(sock) {
		return nil, fmt.Errorf("no socket (the lab is not running)")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return e.CRI(ctx, "unix://"+sock)
}

// lab07Demo looks at the demo pod lab07/web after the second terminal's
// commands: nginx exited and removed, extra created and started.
func lab07Demo(ctx context.Context, c *cri.Client) []Result {
	const hint = "run the second terminal's commands of Part 2"
	sbs, err := c.Pods(ctx, map[string]string{cri.LabelPodName: "web", cri.LabelPodNamespace: "lab07"})
	if err != nil || len(sbs) == 0 {
		why := "no pod lab07/web in part 2's mock"
		if err != nil {
			why = err.Error()
		}
		return []Result{NotYet(why, lab07Part2), NotYet(why, lab07Part2)}
	}
	cs, err := c.Runtime.ListContainers(c.Context(ctx), &runtimeapi.ContainerFilter{PodSandboxId: sbs[0].Id})
	if err != nil {
		return []Result{NotYet("ListContainers: "+err.Error(), lab07Part2), NotYet("ListContainers: "+err.Error(), lab07Part2)}
	}
	state := map[string]runtimeapi.ContainerState{}
	for _, ctr := range cs {
		state[ctr.GetMetadata().GetName()] = ctr.State
	}
	var results []Result
	switch st, ok := state["nginx"]; {
	case !ok:
		results = append(results, Done("nginx made to exit and removed: the demo pod lab07/web has no nginx (the curl: ContainerDied; crictl rm: ContainerRemoved)"))
	case st == runtimeapi.ContainerState_CONTAINER_EXITED:
		results = append(results, NotYet("nginx exited but is still there", hint+": crictl rm $NGINX (ContainerRemoved)"))
	default:
		results = append(results, NotYet("nginx is still "+strings.TrimPrefix(st.String(), "CONTAINER_"), hint+": the curl to the control API that makes it exit (ContainerDied), then crictl rm $NGINX"))
	}
	switch st, ok := state["extra"]; {
	case ok && st == runtimeapi.ContainerState_CONTAINER_RUNNING:
		results = append(results, Done("a container extra started in the demo pod (crictl create extra.json, crictl start: ContainerStarted)"))
	case ok:
		results = append(results, NotYet("the container extra is "+strings.TrimPrefix(st.String(), "CONTAINER_")+", not running", hint+": crictl start $EXTRA (ContainerStarted; nothing after create)"))
	default:
		results = append(results, NotYet("no container extra in the demo pod", hint+`: crictl create $POD "$S/07-pleg/extra.json" "$S/07-pleg/sandbox.json", then crictl start it`))
	}
	return results
}

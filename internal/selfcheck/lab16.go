package main

import (
	"context"
	"fmt"
	"os"
	"strings"
)

func init() {
	register("16", labCheck{Title: "KillPod: every container at once, then the sandbox, then GC", Check: check16})
}

// check16 reads the record each run of lab 16 leaves (a run to the end
// leaves nothing else: the collector and the final delete removed it all),
// one per runtime in the README's order, the mock then containerd: did
// KillPod stop the containers side by side, and did the collector remove
// everything while the pod object was still there?
func check16(_ context.Context, e *Env) []Result {
	var rs []Result
	for _, run := range []struct{ kind, command string }{
		{"mock", "go run ./labs/16-kill-pod"},
		{"containerd", "go run ./labs/16-kill-pod --runtime containerd"},
	} {
		rs = append(rs, killRecord(e, run.kind, run.command)...)
	}
	return rs
}

// killRun is what lab 16's record says (labs/16-kill-pod/record.go).
type killRun struct {
	took              float64
	grace, containers int
	results           []string // "KillContainer one ok"
	exits             map[string]int
	removedContainers int
	removedSandboxes  int
	removedLogDirs    int
	left              int
	objectThere, gone bool
}

func parseKillRun(text string) (killRun, error) {
	r := killRun{exits: map[string]int{}}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(line, "#") {
			continue
		}
		var err error
		switch f[0] {
		case "killpod":
			_, err = fmt.Sscanf(line, "killpod took %fs grace %ds containers %d", &r.took, &r.grace, &r.containers)
		case "result":
			r.results = append(r.results, strings.Join(f[1:], " "))
		case "exit":
			var name string
			var code int
			_, err = fmt.Sscanf(line, "exit %s %d", &name, &code)
			r.exits[name] = code
		case "gc":
			_, err = fmt.Sscanf(line, "gc removed %d containers %d sandboxes %d logdirs, left %d, object there %t",
				&r.removedContainers, &r.removedSandboxes, &r.removedLogDirs, &r.left, &r.objectThere)
		case "object":
			_, err = fmt.Sscanf(line, "object gone %t", &r.gone)
		}
		if err != nil {
			return r, fmt.Errorf("line %q: %v", line, err)
		}
	}
	if r.containers == 0 {
		return r, fmt.Errorf("no killpod line")
	}
	return r, nil
}

// killRecord is two results for one run: KillPod, then the collection.
func killRecord(e *Env, kind, command string) []Result {
	rel := "16-kill-pod/last-run-" + kind + ".txt"
	hint := "run the lab (Run it): " + command
	data, err := os.ReadFile(e.StatePath("16-kill-pod", "last-run-"+kind+".txt"))
	if err != nil {
		return []Result{NotYet(fmt.Sprintf("no run on %s recorded yet (%s in the state folder)", kind, rel), hint)}
	}
	r, err := parseKillRun(string(data))
	if err != nil {
		return []Result{NotYet(fmt.Sprintf("%s: %v", rel, err), hint)}
	}
	var rs []Result
	n := 0
	for _, code := range r.exits {
		if code == 137 {
			n++
		}
	}
	switch {
	case len(r.results) != r.containers+1 || !strings.HasPrefix(r.results[len(r.results)-1], "KillPodSandbox"):
		rs = append(rs, NotYet(fmt.Sprintf("on %s: SyncResults %q, want one per container and the sandbox's last", kind, r.results), hint))
	case n != 3 || r.containers != 3:
		rs = append(rs, NotYet(fmt.Sprintf("on %s: %d containers, exit codes %v: not the lab's pod.yaml (three that ignore SIGTERM, all 137)", kind, r.containers, r.exits), hint+" (without --pod)"))
	case r.took >= float64(2*r.grace):
		rs = append(rs, NotYet(fmt.Sprintf("on %s: KillPod took %.3fs, two grace periods of %ds or more: the stops did not run side by side", kind, r.took, r.grace), hint))
	default:
		rs = append(rs, Done("on %s: KillPod stopped %d containers side by side in %.3fs (grace %ds each), exit 137, then the sandbox: %d SyncResults", kind, r.containers, r.took, r.grace, len(r.results)))
	}
	if r.left != 0 || r.removedSandboxes == 0 || !r.objectThere || !r.gone {
		rs = append(rs, NotYet(fmt.Sprintf("on %s: the collection left %d, removed %d sandbox(es), pod object there at the time %t, gone at the end %t", kind, r.left, r.removedSandboxes, r.objectThere, r.gone), hint))
	} else {
		rs = append(rs, Done("on %s: the garbage collector removed %d containers, %d sandbox and %d log folder while the pod object was still there; then the final delete", kind, r.removedContainers, r.removedSandboxes, r.removedLogDirs))
	}
	return rs
}

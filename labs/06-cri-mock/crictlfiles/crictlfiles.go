// Package crictlfiles writes the files lab 06's walk-through hands to
// crictl: crictl.yaml (which socket to talk to, for crictl --config) and
// three CRI requests,
// pod.json for `crictl runp` and container.json / ignore-sigterm.json for
// `crictl create`.
//
// They are generated, not committed, because a sandbox's log_directory
// must be an absolute path and the repository can live anywhere. They are
// written in the CRI's own JSON field names — what crictl runp/create
// parse — so they double as a reading exercise: this is (a small part of)
// what the kubelet sends in RunPodSandbox and CreateContainer.
package crictlfiles

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Pod is what the requests name: the pod hello in namespace lab06.
const (
	PodName      = "hello"
	PodNamespace = "lab06"
	PodUID       = "lab06-hello-0001"
)

// Write writes crictl.yaml for endpoint and the requests, whose containers
// run image, into dir.
func Write(dir, endpoint, image string) error {
	logDir := filepath.Join(dir, "logs", PodName)
	pod := map[string]any{
		"metadata": map[string]any{
			"name": PodName, "namespace": PodNamespace, "uid": PodUID, "attempt": 0,
		},
		"hostname":      PodName,
		"log_directory": logDir,
		"labels":        map[string]string{"app": PodName},
		"dns_config": map[string]any{
			"servers": []string{"10.96.0.10"}, "searches": []string{PodNamespace + ".svc.cluster.local"},
		},
		// crictl warns without a cgroup parent; the mock has no cgroups
		// and only records it.
		"linux": map[string]any{"cgroup_parent": "/kubepods/besteffort/pod" + PodUID},
	}
	// The io.kubernetes.* labels are the ones the kubelet puts on every
	// container (pkg/kubelet/kuberuntime/labels.go); crictl ps reads the
	// POD and NAMESPACE columns from them, and a PLEG groups containers
	// into pods by the pod UID (lab 07).
	kubeletLabels := func(name string) map[string]string {
		return map[string]string{
			"io.kubernetes.pod.name":       PodName,
			"io.kubernetes.pod.namespace":  PodNamespace,
			"io.kubernetes.pod.uid":        PodUID,
			"io.kubernetes.container.name": name,
		}
	}
	ctr := map[string]any{
		"metadata": map[string]any{"name": "hello", "attempt": 0},
		"image":    map[string]any{"image": image},
		"command":  []string{"sh", "-c", "echo hello from the mock runtime; while true; do echo tick; sleep 5; done"},
		"envs":     []map[string]string{{"key": "GREETING", "value": "hello"}},
		"log_path": "hello.log",
		"labels":   kubeletLabels("hello"),
	}
	stubborn := map[string]any{
		"metadata": map[string]any{"name": "stubborn", "attempt": 0},
		"image":    map[string]any{"image": image},
		// The same command ignores SIGTERM on containerd: a trap with an
		// empty action. fakecri also honours an annotation (see README).
		"command":  []string{"sh", "-c", "trap '' TERM; echo ignoring SIGTERM; while true; do sleep 1; done"},
		"log_path": "stubborn.log",
		"labels":   kubeletLabels("stubborn"),
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	// crictl --config reads its endpoints from here (as it would from
	// $CRI_CONFIG_FILE): no endpoint flags to type, and no warning about a
	// missing /etc/crictl.yaml.
	crictlYAML := fmt.Sprintf("runtime-endpoint: %s\nimage-endpoint: %s\ntimeout: 30\n", endpoint, endpoint)
	if err := os.WriteFile(filepath.Join(dir, "crictl.yaml"), []byte(crictlYAML), 0o644); err != nil {
		return err
	}
	for name, v := range map[string]any{"pod.json": pod, "container.json": ctr, "ignore-sigterm.json": stubborn} {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// The crictl configs are generated, not committed, because a sandbox's
// log_directory must be an absolute path and the repository can live
// anywhere. They are written in the CRI's own JSON field names — what
// crictl runp/create parse — so they double as a reading exercise: this
// is (a small part of) what the kubelet sends in RunPodSandbox and
// CreateContainer.

func writeExamples(dir, endpoint string) error {
	logDir := filepath.Join(dir, "logs", "hello")
	pod := map[string]any{
		"metadata": map[string]any{
			"name": "hello", "namespace": "lab06", "uid": "lab06-hello-0001", "attempt": 0,
		},
		"hostname":      "hello",
		"log_directory": logDir,
		"labels":        map[string]string{"app": "hello"},
		"dns_config": map[string]any{
			"servers": []string{"10.96.0.10"}, "searches": []string{"lab06.svc.cluster.local"},
		},
		// crictl warns without a cgroup parent; the mock has no cgroups
		// and only records it.
		"linux": map[string]any{"cgroup_parent": "/kubepods/besteffort/podlab06-hello-0001"},
	}
	// The io.kubernetes.* labels are the ones the kubelet puts on every
	// container (pkg/kubelet/kuberuntime/labels.go); crictl ps reads the
	// POD and NAMESPACE columns from them.
	kubeletLabels := func(name string) map[string]string {
		return map[string]string{
			"io.kubernetes.pod.name":       "hello",
			"io.kubernetes.pod.namespace":  "lab06",
			"io.kubernetes.pod.uid":        "lab06-hello-0001",
			"io.kubernetes.container.name": name,
		}
	}
	ctr := map[string]any{
		"metadata": map[string]any{"name": "hello", "attempt": 0},
		"image":    map[string]any{"image": "busybox"},
		"command":  []string{"sh", "-c", "echo hello from the mock runtime; while true; do echo tick; sleep 5; done"},
		"envs":     []map[string]string{{"key": "GREETING", "value": "hello"}},
		"log_path": "hello.log",
		"labels":   kubeletLabels("hello"),
	}
	stubborn := map[string]any{
		"metadata": map[string]any{"name": "stubborn", "attempt": 0},
		"image":    map[string]any{"image": "busybox"},
		// The same command ignores SIGTERM on containerd: a trap with an
		// empty action. fakecri also honours an annotation (see README).
		"command":  []string{"sh", "-c", "trap '' TERM; echo ignoring SIGTERM; while true; do sleep 1; done"},
		"log_path": "stubborn.log",
		"labels":   kubeletLabels("stubborn"),
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	// crictl reads its endpoints from $CRI_CONFIG_FILE: no flags to type,
	// and no warning about a missing /etc/crictl.yaml.
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

package mykubelet

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"

	"kubelet-labs/internal/testenv"
)

// The pod-level parts of the status a user reads with kubectl get pod -o
// yaml, on one node (the mock runtime: nothing here is in a container):
//
//   - a pod for another OS is rejected, never run: Failed with upstream's
//     reason (spec.os.name; the kubernetes.io/os label);
//   - a container whose env names a config map that does not exist waits
//     in CreateContainerConfigError with the apiserver's message, and
//     starts once the config map is created;
//   - a pod with a readiness gate is Ready only once the gate's condition,
//     patched into its status by someone else, is True;
//   - a host-network pod's IPs are the node's.
func TestPodAdmissionAndStatus(t *testing.T) {
	n := startNode(t, "t-admit", Options{})
	ns := n.namespace(t)
	ctx := context.Background()
	pods := n.admin.CoreV1().Pods(ns)

	newPod := func(name string, edit func(*v1.Pod)) *v1.Pod {
		t.Helper()
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: v1.PodSpec{NodeName: n.name, Containers: []v1.Container{{Name: "main", Image: mockBusyboxImage,
				Command: []string{"sh", "-c", "echo ready; sleep 3600"}}}},
		}
		edit(p)
		got, err := pods.Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	windows := newPod("windows", func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: v1.Windows} })
	labelled := newPod("labelled", func(p *v1.Pod) { p.Labels = map[string]string{v1.LabelOSStable: "windows"} })
	missing := newPod("missing-cm", func(p *v1.Pod) {
		p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: "later"}, Key: "x"}}}}
	})
	gated := newPod("gated", func(p *v1.Pod) {
		p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/gate"}}
	})
	host := newPod("host", func(p *v1.Pod) { p.Spec.HostNetwork = true })

	for _, c := range []struct {
		pod                   *v1.Pod
		reason, messagePrefix string
	}{
		{windows, "PodOSNotSupported", "Pod was rejected: Failed to admit pod as the OS field doesn't match node OS"},
		{labelled, "PodOSSelectorNodeLabelDoesNotMatch", "Pod was rejected: Failed to admit pod as the `kubernetes.io/os` label"},
	} {
		testenv.PollNil(t, "pod "+c.pod.Name+" Failed", patient, func() error {
			p, err := n.getPod(ns, c.pod.Name)
			if err != nil {
				return err
			}
			if p.Status.Phase != v1.PodFailed || p.Status.Reason != c.reason || !strings.HasPrefix(p.Status.Message, c.messagePrefix) {
				return fmt.Errorf("phase %q reason %q message %q, want Failed %s", p.Status.Phase, p.Status.Reason, p.Status.Message, c.reason)
			}
			return nil
		})
		if cs := n.containers(t, string(c.pod.UID)); len(cs) > 0 {
			t.Errorf("rejected pod %s has %d container(s) in the runtime", c.pod.Name, len(cs))
		}
	}

	testenv.PollNil(t, "missing-cm waiting in CreateContainerConfigError", patient, func() error {
		p, err := n.getPod(ns, missing.Name)
		if err != nil {
			return err
		}
		if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Waiting == nil {
			return fmt.Errorf("container statuses %v", p.Status.ContainerStatuses)
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		if w.Reason != "CreateContainerConfigError" || w.Message != `configmaps "later" not found` {
			return fmt.Errorf("waiting %q %q, want CreateContainerConfigError: configmaps \"later\" not found", w.Reason, w.Message)
		}
		return nil
	})
	if _, err := n.admin.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "later"}, Data: map[string]string{"x": "1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.runningPod(t, ns, missing.Name)

	// The gate: containers ready, the pod not, until the condition is True.
	p := n.runningPod(t, ns, gated.Name)
	testenv.PollNil(t, "gated: containers ready, pod not ready", patient, func() error {
		var err error
		if p, err = n.getPod(ns, gated.Name); err != nil {
			return err
		}
		if cond(p, v1.ContainersReady) != v1.ConditionTrue || cond(p, v1.PodReady) != v1.ConditionFalse {
			return fmt.Errorf("ContainersReady %s, Ready %s", cond(p, v1.ContainersReady), cond(p, v1.PodReady))
		}
		return nil
	})
	p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: "example.com/gate", Status: v1.ConditionTrue})
	if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.PollNil(t, "gated Ready once its gate is True", patient, func() error {
		p, err := n.getPod(ns, gated.Name)
		if err != nil {
			return err
		}
		if cond(p, v1.PodReady) != v1.ConditionTrue {
			return fmt.Errorf("Ready %s", cond(p, v1.PodReady))
		}
		return nil
	})

	hp := n.runningPod(t, ns, host.Name)
	if hp.Status.PodIP != "127.0.0.1" || len(hp.Status.PodIPs) != 1 || hp.Status.PodIPs[0].IP != "127.0.0.1" {
		t.Errorf("host-network pod: podIP %q podIPs %v, want the node's 127.0.0.1", hp.Status.PodIP, hp.Status.PodIPs)
	}
}

// cond is the status of the pod's condition of type c ("" if absent).
func cond(p *v1.Pod, c v1.PodConditionType) v1.ConditionStatus {
	for _, x := range p.Status.Conditions {
		if x.Type == c {
			return x.Status
		}
	}
	return ""
}

// TestSysctlAdmission: upstream's allowlist admits the safe sysctls (with
// either separator) and rejects an unsafe one, and a net sysctl on a host
// network pod, with reason SysctlForbidden — what the conformance spec
// "should not launch unsafe, but not explicitly enabled sysctls" expects.
func TestSysctlAdmission(t *testing.T) {
	admission, err := newSysctlAdmission(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		sysctl  string
		hostNet bool
		admit   bool
	}{
		{"safe", "kernel.shm_rmid_forced", false, true},
		{"safe with slashes", "kernel/shm_rmid_forced", false, true},
		{"unsafe", "kernel.msgmax", false, false},
		{"net on the host's network", "net.ipv4.ip_unprivileged_port_start", true, false},
		{"net in the pod's network", "net.ipv4.ip_unprivileged_port_start", false, true},
	} {
		pod := &v1.Pod{Spec: v1.PodSpec{HostNetwork: tc.hostNet,
			SecurityContext: &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: tc.sysctl, Value: "1"}}}}}
		r := admission.Admit(&lifecycle.PodAdmitAttributes{Pod: pod})
		if r.Admit != tc.admit || (!r.Admit && r.Reason != "SysctlForbidden") {
			t.Errorf("%s (%s): admit=%v reason %q %q, want admit=%v (reason SysctlForbidden when not)", tc.name, tc.sysctl, r.Admit, r.Reason, r.Message, tc.admit)
		}
	}
}

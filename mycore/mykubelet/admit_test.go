package mykubelet

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"

	"kubelet-labs/internal/testenv"
	"kubelet-labs/mylib/fakecri"
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
//   - a host-network pod's IPs are the node's;
//   - a pod with an unsafe sysctl is rejected (SysctlForbidden), one with
//     a safe sysctl runs in a sandbox that carries it (crictl inspectp);
//   - a pod with supplementalGroupsPolicy: Strict runs, as the runtime
//     (the mock playing containerd 2.x) says it supports it.
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
	unsafeSysctl := newPod("unsafe-sysctl", func(p *v1.Pod) {
		p.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel.msgmax", Value: "65536"}}}
	})
	safeSysctl := newPod("safe-sysctl", func(p *v1.Pod) {
		p.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel/shm_rmid_forced", Value: "1"}}}
	})
	strict := newPod("strict-groups", func(p *v1.Pod) {
		policy := v1.SupplementalGroupsPolicyStrict
		p.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: &policy}
	})

	for _, c := range []struct {
		pod                   *v1.Pod
		reason, messagePrefix string
	}{
		{windows, "PodOSNotSupported", "Pod was rejected: Failed to admit pod as the OS field doesn't match node OS"},
		{labelled, "PodOSSelectorNodeLabelDoesNotMatch", "Pod was rejected: Failed to admit pod as the `kubernetes.io/os` label"},
		{unsafeSysctl, "SysctlForbidden", `Pod was rejected: forbidden sysctl: "kernel.msgmax" not allowlisted`},
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

	n.runningPod(t, ns, safeSysctl.Name)
	if got := n.sandboxSysctls(t, string(safeSysctl.UID)); !maps.Equal(got, map[string]string{"kernel.shm_rmid_forced": "1"}) {
		t.Errorf("safe-sysctl's sandbox has sysctls %v, want kernel.shm_rmid_forced=1 (the pod's, dot-separated)", got)
	}
	n.runningPod(t, ns, strict.Name)

	hp := n.runningPod(t, ns, host.Name)
	if hp.Status.PodIP != "127.0.0.1" || len(hp.Status.PodIPs) != 1 || hp.Status.PodIPs[0].IP != "127.0.0.1" {
		t.Errorf("host-network pod: podIP %q podIPs %v, want the node's 127.0.0.1", hp.Status.PodIP, hp.Status.PodIPs)
	}
}

// On a runtime that does not implement supplementalGroupsPolicy
// (containerd 1.6: the mock told so), a pod asking for Strict is rejected
// with upstream's reason and message (lifecycle/predicate.go:151-158) and
// never reaches the runtime, where the field would be dropped and the
// image's groups merged in; a pod asking for Merge runs.
func TestStrictSupplementalGroupsOnARuntimeWithout(t *testing.T) {
	n := newNode(t, "t-strict16", fakecri.WithSupplementalGroupsPolicy(false))
	n.start(t, Options{})
	ns := n.namespace(t)
	create := func(name string, policy v1.SupplementalGroupsPolicy) *v1.Pod {
		t.Helper()
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: v1.PodSpec{NodeName: n.name, SecurityContext: &v1.PodSecurityContext{SupplementalGroupsPolicy: &policy},
				Containers: []v1.Container{{Name: "main", Image: mockBusyboxImage, Command: []string{"sh", "-c", "echo ready; sleep 3600"}}}},
		}
		got, err := n.admin.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	strict := create("strict", v1.SupplementalGroupsPolicyStrict)
	create("merge", v1.SupplementalGroupsPolicyMerge)

	const reason, message = "SupplementalGroupsPolicyNotSupported", "Pod was rejected: SupplementalGroupsPolicy=Strict is not supported in this node"
	testenv.PollNil(t, "pod strict Failed", patient, func() error {
		p, err := n.getPod(ns, strict.Name)
		if err != nil {
			return err
		}
		if p.Status.Phase != v1.PodFailed || p.Status.Reason != reason || p.Status.Message != message {
			return fmt.Errorf("phase %q reason %q message %q, want Failed %s %q", p.Status.Phase, p.Status.Reason, p.Status.Message, reason, message)
		}
		return nil
	})
	n.runningPod(t, ns, "merge")
	if sbs, err := n.cri.Pods(context.Background(), map[string]string{"io.kubernetes.pod.uid": string(strict.UID)}); err != nil || len(sbs) > 0 {
		t.Errorf("rejected pod strict: %d sandbox(es) in the runtime (err %v), want none", len(sbs), err)
	}
}

// sandboxSysctls are the sysctls the runtime's sandboxes of the pod with
// this UID were created with, from their inspect (crictl inspectp's
// info.config.linux.sysctls, as containerd shows them too).
func (n *testNode) sandboxSysctls(t *testing.T, uid string) map[string]string {
	t.Helper()
	ctx := context.Background()
	sbs, err := n.cri.Pods(ctx, map[string]string{"io.kubernetes.pod.uid": uid})
	if err != nil || len(sbs) == 0 {
		t.Fatalf("the pod's sandboxes: %d, %v", len(sbs), err)
	}
	resp, err := n.cri.Runtime.PodSandboxStatus(n.cri.Context(ctx), sbs[0].Id, true)
	if err != nil {
		t.Fatal(err)
	}
	sysctls, err := fakecri.SandboxSysctls(resp.GetInfo())
	if err != nil {
		t.Fatalf("inspect of sandbox %s: %v", sbs[0].Id, err)
	}
	return sysctls
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

// TestPredicateAdmission: upstream's predicate admit handler decides what
// the node runs, as the kubelet's does (lifecycle/predicate.go), against
// the Node the node registered and the pods it already admitted:
//
//   - a second pod asking for a host port the first holds is Failed with
//     reason NodePorts, never run — what the conformance spec "Should
//     recreate evicted statefulset" waits for (statefulset.go:870-960);
//     once the first is gone, a pod asking for the same port runs, as the
//     rejected one (Failed) holds nothing;
//   - a pod asking for more CPU than the node's allocatable: OutOfcpu;
//   - a pod whose nodeSelector the node's labels do not match:
//     NodeAffinity.
//
// Each is checked once the node has decided (the pod left Pending), so
// a node that runs what it should refuse fails every case.
func TestPredicateAdmission(t *testing.T) {
	n := startNode(t, "t-predicates", Options{})
	ns := n.namespace(t)
	ctx := context.Background()
	pods := n.admin.CoreV1().Pods(ns)
	create := func(name string, edit func(*v1.Pod)) *v1.Pod {
		t.Helper()
		grace := int64(1)
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: v1.PodSpec{NodeName: n.name, TerminationGracePeriodSeconds: &grace, Containers: []v1.Container{{Name: "main", Image: mockBusyboxImage,
				Command: []string{"sh", "-c", "echo ready; sleep 3600"}}}},
		}
		edit(p)
		got, err := pods.Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	hostPort := func(p *v1.Pod) {
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 21017, HostPort: 21017, Protocol: v1.ProtocolTCP}}
	}

	create("port-a", hostPort)
	n.runningPod(t, ns, "port-a")
	portB := create("port-b", hostPort)
	tooBig := create("too-big", func(p *v1.Pod) {
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1000")}
	})
	elsewhere := create("elsewhere", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"kubelet-labs.dev/zone": "nowhere"} })

	nodeObj, err := n.admin.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		pod             *v1.Pod
		reason, message string
	}{
		{portB, "NodePorts", "Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"},
		{tooBig, "OutOfcpu", fmt.Sprintf("Pod was rejected: Node didn't have enough resource: cpu, requested: 1000000, used: 0, capacity: %d",
			nodeObj.Status.Allocatable.Cpu().MilliValue())},
		{elsewhere, "NodeAffinity", "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"},
	} {
		p := n.decided(t, ns, c.pod.Name)
		if p.Status.Phase != v1.PodFailed || p.Status.Reason != c.reason || p.Status.Message != c.message {
			t.Errorf("pod %s: phase %s reason %q message %q, want Failed, %s, %q", c.pod.Name, p.Status.Phase, p.Status.Reason, p.Status.Message, c.reason, c.message)
		}
		if cs := n.containers(t, string(c.pod.UID)); len(cs) > 0 {
			t.Errorf("rejected pod %s has %d container(s) in the runtime", c.pod.Name, len(cs))
		}
	}
	if t.Failed() {
		return
	}

	// The port is free again once its holder is gone; the Failed port-b
	// never held it.
	if err := pods.Delete(ctx, "port-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.PollNil(t, "port-a gone", patient, func() error {
		_, err := n.getPod(ns, "port-a")
		return notFound(err)
	})
	create("port-c", hostPort)
	n.runningPod(t, ns, "port-c")
}

// decided waits until the node has admitted or rejected the pod: its
// phase is no longer Pending (or unset).
func (n *testNode) decided(t *testing.T, ns, name string) *v1.Pod {
	t.Helper()
	var p *v1.Pod
	testenv.PollNil(t, "the node's verdict on pod "+name, patient, func() error {
		var err error
		if p, err = n.getPod(ns, name); err != nil {
			return err
		}
		if p.Status.Phase == "" || p.Status.Phase == v1.PodPending {
			return fmt.Errorf("phase %q", p.Status.Phase)
		}
		return nil
	})
	return p
}

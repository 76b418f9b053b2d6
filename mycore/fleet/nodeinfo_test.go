package fleet

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/node"
)

// TestFleetNodesTellTheTruth: every node of a fleet says what it runs on —
// this machine's OS image, kernel and IDs (read once for the whole
// process, node.ThisHost) and its own mock runtime's answer to the CRI
// Version call — as `kubectl get nodes -o wide` shows: OS-IMAGE the
// machine's, CONTAINER-RUNTIME fakecri://0.1.0, not <unknown>.
func TestFleetNodesTellTheTruth(t *testing.T) {
	admin := testenv.AdminClient(t)
	r := startFleet(t, Options{Config: testenv.AdminConfig(t), Nodes: 2, Prefix: "tinfo"})
	select {
	case <-r.f.Ready():
	case <-time.After(2 * time.Minute):
		t.Fatalf("the fleet was not Ready within 2m:\n%s", r.log)
	}
	host := node.ThisHost()
	for _, name := range r.f.Names() {
		n, err := admin.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		info := n.Status.NodeInfo
		if info.ContainerRuntimeVersion != "fakecri://0.1.0" || info.OSImage != host.OSImage || info.KernelVersion != host.KernelVersion ||
			info.MachineID != host.MachineID || info.BootID != host.BootID || info.SystemUUID != host.SystemUUID {
			t.Errorf("node %s says runtime %q, OS image %q, kernel %q, machine %q, boot %q, system %q; want fakecri://0.1.0 on %+v",
				name, info.ContainerRuntimeVersion, info.OSImage, info.KernelVersion, info.MachineID, info.BootID, info.SystemUUID, host)
		}
	}
}

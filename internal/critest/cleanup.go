package critest

import (
	"context"
	"testing"
	"time"

	kubetypes "k8s.io/kubelet/pkg/types"

	"kubelet-labs/mycore/cri"
)

// RemoveNamespaceAtEnd removes every sandbox (containers included) of the
// pods of namespace ns from the runtime when the test ends, whatever the
// node under test did or left: a shared containerd is left as found.
// Call it before the node starts, so that it runs after the node stopped
// (cleanups run last-registered first).
func RemoveNamespaceAtEnd(t testing.TB, c *cri.Client, ns string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		pods, err := c.Pods(ctx, map[string]string{kubetypes.KubernetesPodNamespaceLabel: ns})
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		for _, p := range pods {
			// A shim that is exiting answers "ttrpc: closed" for a moment
			// (containerd 1.6): try again before calling it a failure.
			var err error
			for range 10 {
				if err = c.RemovePod(ctx, p.Id, 0); err == nil {
					break
				}
				time.Sleep(time.Second)
			}
			if err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
}

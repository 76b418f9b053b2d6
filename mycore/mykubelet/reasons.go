package mykubelet

import (
	"errors"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

// reasonCache is the kubelet's reason cache (reason_cache.go): the last
// reason each container failed to start, by pod and container name, so the
// status can say CrashLoopBackOff or CreateContainerError instead of a bare
// "not running". A successful start clears it.
type reasonCache struct {
	mu sync.Mutex
	m  map[types.UID]map[string]reason
}

type reason struct{ reason, message string }

func newReasonCache() *reasonCache {
	return &reasonCache{m: map[types.UID]map[string]reason{}}
}

// update records the StartContainer results of a sync (reason_cache.go
// Update) and reports whether a start failed: the status should show why.
func (c *reasonCache) update(uid types.UID, result kubecontainer.PodSyncResult) (failed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range result.SyncResults {
		if r.Action != kubecontainer.StartContainer {
			continue
		}
		name, _ := r.Target.(string)
		if r.Error == nil {
			delete(c.m[uid], name)
			continue
		}
		failed = true
		if c.m[uid] == nil {
			c.m[uid] = map[string]reason{}
		}
		why := r.Error.Error()
		var be *kubecontainer.BackoffError
		if errors.As(r.Error, &be) {
			why = kubecontainer.ErrCrashLoopBackOff.Error()
		}
		c.m[uid][name] = reason{reason: why, message: r.Message}
	}
	return failed
}

func (c *reasonCache) get(uid types.UID, name string) (reason, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[uid][name]
	return r, ok
}

// forgetMessages drops the pod's reasons whose message starts with
// prefix (a failure of the kubelet's own, such as a volume, once it is
// mended).
func (c *reasonCache) forgetMessages(uid types.UID, prefix string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, r := range c.m[uid] {
		if strings.HasPrefix(r.message, prefix) {
			delete(c.m[uid], name)
		}
	}
}

// forget drops a pod's reasons (when the pod is gone).
func (c *reasonCache) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, uid)
}

// uids lists the pods that have reasons.
func (c *reasonCache) uids() map[types.UID]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[types.UID]bool, len(c.m))
	for uid := range c.m {
		out[uid] = true
	}
	return out
}

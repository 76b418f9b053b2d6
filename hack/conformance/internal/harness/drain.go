package harness

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// drainTimeout bounds drain: kube-proxy and CoreDNS stop in seconds, and a
// pod a spec left behind gets its own grace period (30 s by default).
const drainTimeout = 2 * time.Minute

// drain deletes every pod of the cluster, as `kubectl drain` would, and
// waits until the apiserver has none left — which, for a graceful delete,
// is when its node reported its containers stopped (the status manager
// deletes the object only then, status_manager.go:1210-1224 at v1.36.3).
//
// Why before the nodes stop: lab 18 removes its pods' containers when it
// stops, the real kubelet (NODE=01) does not — a kubelet that restarts
// adopts what runs. Without this, kube-proxy's container outlived a
// NODE=01 run on its containerd and wrote its rules into this host's nat
// table again after the harness's `kube-proxy --cleanup`; every pod a
// spec left behind kept running too. The add-ons' DaemonSet and
// Deployment go first, or their controllers would make the pods again.
func (c *Cluster) drain() error {
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	sys := metav1.NamespaceSystem
	if err := c.Client.AppsV1().DaemonSets(sys).Delete(ctx, "kube-proxy", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("drain: kube-proxy's DaemonSet: %w", err)
	}
	if err := c.Client.AppsV1().Deployments(sys).Delete(ctx, "coredns", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("drain: CoreDNS's Deployment: %w", err)
	}
	for {
		pods, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("drain: %w", err)
		}
		var left []string
		for _, p := range pods.Items {
			if _, mirror := p.Annotations[v1.MirrorPodAnnotationKey]; mirror {
				continue // a static pod's: its node makes it again, as kubectl drain skips it
			}
			left = append(left, p.Namespace+"/"+p.Name+" on "+p.Spec.NodeName)
			if p.DeletionTimestamp == nil {
				if err := c.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("drain: %s/%s: %w", p.Namespace, p.Name, err)
				}
			}
		}
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			sort.Strings(left)
			return fmt.Errorf("drain: %d pods not gone after %s (their containers may still run): %s", len(left), drainTimeout, strings.Join(left, ", "))
		case <-time.After(time.Second):
		}
	}
}

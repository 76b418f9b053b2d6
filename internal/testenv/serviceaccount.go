package testenv

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// WaitDefaultServiceAccount waits until the ServiceAccount "default" of
// the namespace default exists. The ServiceAccount admission plugin
// refuses pods until the controller-manager has made it, a few seconds
// after a fresh control plane starts: a test that creates pods right
// away calls this first.
func WaitDefaultServiceAccount(tb testing.TB, c kubernetes.Interface) {
	tb.Helper()
	WaitServiceAccount(tb, c, "default")
}

// WaitServiceAccount is WaitDefaultServiceAccount for a namespace the test
// made: the controller-manager makes its "default" a moment after.
func WaitServiceAccount(tb testing.TB, c kubernetes.Interface, namespace string) {
	tb.Helper()
	Poll(tb, "the service account "+namespace+"/default (made by the controller-manager)", time.Minute, func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := c.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

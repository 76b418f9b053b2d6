package plegruntime_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"kubelet-labs/internal/critest"
	"kubelet-labs/mycore/plegruntime"
)

// TestStubsSayWhereTheRealOneIs: SyncPod and KillPod are stubs here, and
// whoever reaches one (by handing this runtime to code that changes pods)
// reads in the error where pods are really started and stopped.
func TestStubsSayWhereTheRealOneIs(t *testing.T) {
	r := plegruntime.New(critest.Dial(t, critest.FakeCRI(t))) // the stubs make no CRI call
	res := r.SyncPod(context.Background(), nil, nil, nil, nil, false)
	kill := r.KillPod(context.Background(), nil, kubecontainer.Pod{}, nil)
	for name, err := range map[string]error{"SyncPod": res.SyncError, "KillPod": kill} {
		if !errors.Is(err, plegruntime.ErrNotImplemented) {
			t.Errorf("%s = %v, want an error wrapping ErrNotImplemented", name, err)
			continue
		}
		for _, want := range []string{"kubecontainer.Runtime." + name, "mycore/kuberuntime.Manager"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s's error %q does not say %q", name, err, want)
			}
		}
	}
}

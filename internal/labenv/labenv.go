// Package labenv is what every lab's main.go shares: finding the cluster
// (KUBECONFIG or the embedded control plane's admin kubeconfig), checking it
// answers, and exiting with a clear message when something is missing.
package labenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"kubelet-labs/internal/state"
)

// Kubeconfig returns the kubeconfig path a lab should use: $KUBECONFIG if
// set, else the admin kubeconfig lab 00 writes into the state folder.
func Kubeconfig() (string, error) {
	if p := os.Getenv("KUBECONFIG"); p != "" {
		return p, nil
	}
	p, err := state.Path("admin.kubeconfig")
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("no cluster: %s does not exist and KUBECONFIG is not set; start the embedded control plane in another terminal with `go run ./labs/00-cluster`, or export KUBECONFIG for your own cluster (e.g. kind)", p)
	}
	return p, nil
}

// RESTConfig loads a kubeconfig (path "" = Kubeconfig()) and checks that the
// apiserver answers, so a lab fails in one line instead of a retry loop.
func RESTConfig(ctx context.Context, path string) (*rest.Config, error) {
	if path == "" {
		var err error
		if path, err = Kubeconfig(); err != nil {
			return nil, err
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("bad kubeconfig %s: %w", path, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("bad kubeconfig %s: %w", path, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return nil, fmt.Errorf("the cluster in %s (%s) is not reachable or not ready: %w; is `go run ./labs/00-cluster` running?", path, cfg.Host, err)
	}
	return cfg, nil
}

// Fatal prints err and exits 1: labs fail with one clear line, not a panic.
func Fatal(err error) {
	fmt.Fprintln(os.Stderr, "error:", err)
	os.Exit(1)
}

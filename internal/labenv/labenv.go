// Package labenv is what every lab's main.go shares: finding the cluster
// (KUBECONFIG or the embedded control plane's admin kubeconfig), checking it
// answers, checking a node name before it becomes a folder, and exiting with
// a clear message when something is missing.
package labenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"kubelet-labs/internal/state"
	"kubelet-labs/mycore/bootstrap"
)

// Kubeconfig returns where a lab finds its cluster: $KUBECONFIG if set —
// one file, or a list of files joined by ':' that is merged the way kubectl
// merges it — else the admin kubeconfig lab 00 writes into the state folder.
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

// clientConfig loads path ("" = Kubeconfig()) with client-go's own loading
// rules, as kubectl does: one file must exist and be valid; in a list, the
// files that exist are merged (for a map key, the first file that sets it
// wins; current-context comes from the first file that has one) and the
// missing ones are skipped — but not all of them.
func clientConfig(path string) (clientcmd.ClientConfig, string, error) {
	if path == "" {
		var err error
		if path, err = Kubeconfig(); err != nil {
			return nil, "", err
		}
	}
	files := filepath.SplitList(path)
	rules := &clientcmd.ClientConfigLoadingRules{}
	if len(files) == 1 {
		rules.ExplicitPath = files[0]
	} else {
		rules.Precedence = files
		found := false
		for _, f := range files {
			if _, err := os.Stat(f); err == nil {
				found = true
			}
		}
		if !found {
			return nil, path, fmt.Errorf("bad kubeconfig %s: none of these files exists", path)
		}
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}), path, nil
}

// Load returns the client configuration of path ("" = Kubeconfig(), and a
// list is merged), without contacting the cluster.
func Load(path string) (*rest.Config, error) {
	cc, path, err := clientConfig(path)
	if err != nil {
		return nil, err
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("bad kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// RESTConfig loads a kubeconfig (path "" = Kubeconfig(); a list is merged
// as kubectl does) and checks that the apiserver answers, so a lab fails in
// one line instead of a retry loop.
func RESTConfig(ctx context.Context, path string) (*rest.Config, error) {
	cc, path, err := clientConfig(path)
	if err != nil {
		return nil, err
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("bad kubeconfig %s: %w", path, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("bad kubeconfig %s: %w", path, err)
	}
	if err := waitReady(ctx, client.Discovery().RESTClient()); err != nil {
		return nil, fmt.Errorf("the cluster in %s (%s) is not reachable or not ready: %w; is `go run ./labs/00-cluster` running?", path, cfg.Host, err)
	}
	return cfg, nil
}

// readyPatience is how long a lab waits for an apiserver that answers but
// says it is not ready yet: one still starting, or a slow one whose etcd
// check fails now and then (kind under QEMU's emulator did, 2026-11-29).
// One that does not answer at all fails at once: lab 00 is not running.
var readyPatience = 30 * time.Second

// readyRetry is the pause between two asks.
var readyRetry = time.Second

// failedCheck picks /readyz's failed checks ("[-]etcd failed: reason
// withheld") out of the body an error quotes.
var failedCheck = regexp.MustCompile(`\[-\][^\\"]*`)

// waitReady asks the apiserver's /readyz until it says ok, for at most
// readyPatience when it answers "not ready".
func waitReady(ctx context.Context, c rest.Interface) error {
	deadline := time.Now().Add(readyPatience)
	for {
		askCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := c.Get().AbsPath("/readyz").DoRaw(askCtx)
		cancel()
		if err == nil {
			return nil
		}
		var answered apierrors.APIStatus
		if !errors.As(err, &answered) || ctx.Err() != nil {
			return err // no answer: nothing to wait for
		}
		if !time.Now().Before(deadline) {
			if checks := failedCheck.FindAllString(err.Error(), -1); len(checks) > 0 {
				return fmt.Errorf("/readyz says %s (for %s)", strings.Join(checks, ", "), readyPatience)
			}
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(readyRetry):
		}
	}
}

// WriteFlat writes the kubeconfig that path ("" = Kubeconfig(); a list is
// merged) resolves to as one self-contained file (0600): the current
// context only, certificates embedded — what `kubectl config view
// --minify --flatten` prints. For programs that take exactly one file,
// like the kubelet's --bootstrap-kubeconfig.
func WriteFlat(path, out string) error {
	cc, path, err := clientConfig(path)
	if err != nil {
		return err
	}
	raw, err := cc.RawConfig()
	if err != nil {
		return fmt.Errorf("bad kubeconfig %s: %w", path, err)
	}
	if err := clientcmdapi.MinifyConfig(&raw); err != nil {
		return fmt.Errorf("bad kubeconfig %s: %w", path, err)
	}
	if err := clientcmdapi.FlattenConfig(&raw); err != nil {
		return fmt.Errorf("bad kubeconfig %s: %w", path, err)
	}
	return clientcmd.WriteToFile(raw, out)
}

// CheckNodeName refuses a name the apiserver would reject for a Node (a
// lowercase DNS subdomain) before it becomes a folder in the state folder:
// "../x" must not climb out of it, and "Bad_Name" would make the kubelet
// register a name nobody waits for.
func CheckNodeName(name string) error {
	if err := bootstrap.ValidateNodeName(name); err != nil {
		return fmt.Errorf("--node-name %w", err)
	}
	return nil
}

// Fatal prints err and exits 1: labs fail with one clear line, not a panic.
func Fatal(err error) {
	fmt.Fprintln(os.Stderr, "error:", err)
	os.Exit(1)
}

// NodeDir checks a node name and returns the node's folder in the state
// folder (nodes/NAME, created 0700): where its keys, certificates and
// kubeconfig live. mycore/node.Join is given this folder.
func NodeDir(name string) (string, error) {
	if err := CheckNodeName(name); err != nil {
		return "", err
	}
	return state.Ensure("nodes", name)
}

// StaticPodFolder is the kubelet's staticPodPath for a node whose state
// folder is nodeDir: flagValue if set, else manifests/ in nodeDir; made if
// missing, returned absolute. Run as root, a folder another user could write
// is refused (state.CheckRootSafe): whoever can drop a file there chooses
// what root's runtime runs — a hostPID, privileged pod, say.
func StaticPodFolder(nodeDir, flagValue string) (string, error) {
	dir := flagValue
	if dir == "" {
		dir = filepath.Join(nodeDir, "manifests")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := state.CheckRootSafe(dir); err != nil {
		return "", fmt.Errorf("static pod folder: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("static pod folder: %w", err)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return "", fmt.Errorf("static pod folder %s is not a folder", dir)
	}
	return dir, nil
}

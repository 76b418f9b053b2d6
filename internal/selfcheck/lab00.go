package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kubelet-labs/internal/controlplane"
)

// Lab 00 leaves a running control plane: the checks ask it (readyz,
// version, who the admin kubeconfig is, what the controller-manager has
// done) and look at what it wrote into the state folder (PKI, kubeconfig,
// kubectl). Helpers are prefixed lab00: every lab's file shares package main.
func init() {
	register("00", labCheck{Title: "an embedded, real control plane", Check: checkLab00})
}

func checkLab00(ctx context.Context, e *Env) []Result {
	kube, err := e.Kube(ctx)
	if err != nil {
		return NoCluster(err)
	}
	return []Result{
		lab00APIServer(ctx, kube),
		lab00PKI(e),
		lab00Admin(ctx, e, kube),
		lab00ControllerManager(ctx, e, kube),
		lab00Kubectl(ctx, e),
	}
}

// lab00APIServer: the README's first step, go run ./labs/00-cluster.
func lab00APIServer(ctx context.Context, kube kubernetes.Interface) Result {
	hint := "start lab 00 in another terminal: go run ./labs/00-cluster (README, Run it)"
	ready, err := kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil || strings.TrimSpace(string(ready)) != "ok" {
		return NotYet(fmt.Sprintf("kube-apiserver /readyz: %q %v", strings.TrimSpace(string(ready)), err), hint)
	}
	v, err := kube.Discovery().ServerVersion()
	if err != nil {
		return NotYet("kube-apiserver version: "+err.Error(), hint)
	}
	if v.GitVersion != controlplane.KubernetesVersion {
		return NotYet("kube-apiserver is "+v.GitVersion+", not lab 00's "+controlplane.KubernetesVersion+" (KUBECONFIG points at another cluster?)",
			"unset KUBECONFIG or export the one lab 00 printed, and start lab 00: go run ./labs/00-cluster")
	}
	return Done("kube-apiserver answers: /readyz ok, Kubernetes %s", v.GitVersion)
}

// lab00PKI: the cluster CA and etcd's separate CA lab 00 made, with the
// private key readable by you only.
func lab00PKI(e *Env) Result {
	hint := "start lab 00 (go run ./labs/00-cluster): it writes its PKI into the state folder's cluster/pki/"
	dir := e.StatePath("cluster", "pki")
	ca, err := lab00Cert(filepath.Join(dir, controlplane.CAName+".crt"))
	if err != nil {
		return NotYet("the cluster CA: "+err.Error(), hint)
	}
	etcdCA, err := lab00Cert(filepath.Join(dir, controlplane.EtcdCAName+".crt"))
	if err != nil {
		return NotYet("etcd's CA: "+err.Error(), hint)
	}
	if bytes.Equal(ca.Raw, etcdCA.Raw) {
		return NotYet("cluster/pki: etcd's CA is the cluster CA, so a node certificate could reach etcd", "remove the state folder's cluster/pki and restart lab 00: it makes two CAs")
	}
	key := filepath.Join(dir, controlplane.CAName+".key")
	info, err := os.Stat(key)
	if err != nil {
		return NotYet("the cluster CA's key: "+err.Error(), hint)
	}
	if info.Mode().Perm()&0o077 != 0 {
		return NotYet(fmt.Sprintf("%s is mode %#o: others may read the key that signs every certificate", key, info.Mode().Perm()), "chmod 600 "+key)
	}
	return Done("PKI in cluster/pki: cluster CA %q and a separate etcd CA %q; ca.key mode %#o", ca.Subject.CommonName, etcdCA.Subject.CommonName, info.Mode().Perm())
}

func lab00Cert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM certificate", path)
	}
	return x509.ParseCertificate(block.Bytes)
}

// lab00Admin: the admin kubeconfig lab 00 wrote, and who it makes you (the
// README's `export KUBECONFIG=…; kubectl version`).
func lab00Admin(ctx context.Context, e *Env, kube kubernetes.Interface) Result {
	path := e.StatePath("admin.kubeconfig")
	if !exists(path) {
		return NotYet("no admin kubeconfig in the state folder ("+path+")", "start lab 00: go run ./labs/00-cluster writes it")
	}
	review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return NotYet("who am I (SelfSubjectReview): "+err.Error(), "export KUBECONFIG=\"${LABS_STATE_DIR:-$PWD/.labs}/admin.kubeconfig\" as lab 00 printed")
	}
	u := review.Status.UserInfo
	return Done("admin kubeconfig %s: you are %s (groups %s)", filepath.Base(path), u.Username, strings.Join(u.Groups, ", "))
}

// lab00ControllerManager: what kube-controller-manager's controllers made
// on their own (only a running controller-manager makes them), and the
// grace period it runs with, from its command line.
func lab00ControllerManager(ctx context.Context, e *Env, kube kubernetes.Interface) Result {
	hint := "kube-controller-manager is not doing its work: look at the state folder's cluster/logs/kube-controller-manager.log, restart lab 00"
	if _, err := kube.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
		return NotYet("ServiceAccount default/default (the serviceaccount controller makes it): "+err.Error(), hint)
	}
	if _, err := kube.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{}); err != nil {
		return NotYet("ConfigMap default/kube-root-ca.crt (the root-ca-cert-publisher makes it): "+err.Error(), hint)
	}
	grace := ""
	if g := lab00GracePeriod(e); g != "" {
		grace = ", --node-monitor-grace-period=" + g
	}
	return Done("kube-controller-manager runs its controllers (ServiceAccount default/default, ConfigMap kube-root-ca.crt)%s", grace)
}

// lab00GracePeriod reads --node-monitor-grace-period from the command line
// of the kube-controller-manager lab 00 started (its pid is in the state
// folder's cluster/pids); "" when that cannot be read.
func lab00GracePeriod(e *Env) string {
	pids, err := os.ReadFile(e.StatePath("cluster", "pids"))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(pids), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || f[0] != "kube-controller-manager" {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			return ""
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", f[1], "cmdline"))
		if err != nil {
			return ""
		}
		for _, arg := range strings.Split(string(cmdline), "\x00") {
			if v, ok := strings.CutPrefix(arg, "--node-monitor-grace-period="); ok {
				return v
			}
		}
	}
	return ""
}

// lab00Kubectl: the kubectl the README puts on your PATH.
func lab00Kubectl(ctx context.Context, e *Env) Result {
	path := e.StatePath("bin", "kubectl")
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm()&0o111 == 0 {
		return NotYet("no kubectl in the state folder's bin/", "start lab 00 (go run ./labs/00-cluster) or build it: go run ./labs/00-cluster --build-only")
	}
	out, err := exec.CommandContext(ctx, path, "version", "--client").Output()
	if err != nil {
		return NotYet(path+" version --client: "+err.Error(), "rebuild it: go run ./labs/00-cluster --build-only")
	}
	version, _, _ := strings.Cut(strings.TrimPrefix(string(out), "Client Version: "), "\n")
	return Done("kubectl %s in the state folder's bin/, for your PATH", version)
}

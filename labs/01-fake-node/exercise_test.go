package main

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"

	"kubelet-labs/internal/controlplane"
	"kubelet-labs/internal/testenv"
)

// The exercise: node A makes four requests with ITS OWN credentials (what
// fake-node-2's kubelet.kubeconfig holds: user system:node:NAME in group
// system:nodes). For each, predict what happens: "allowed", or which part
// of the apiserver refuses it — "authorizer" (the Node authorizer, then
// RBAC: may this user do this verb on this resource at all?) or
// "admission" (the NodeRestriction admission plugin: may this node make
// this change to this object?). Write your predictions here, then run
//
//	make check LAB=01 EXERCISE=1
var answer = struct {
	// kubectl label node <B> x=y — the README's command: another node.
	LabelOtherNode string
	// The same change to node B as one PATCH request and nothing else, as
	// a kubelet's client-go sends it (kubectl label first reads the node).
	PatchOtherNode string
	// kubectl label node <A> x=y — its own node.
	LabelOwnNode string
	// kubectl label node <A> node-restriction.kubernetes.io/x=y — its own
	// node, a label in the node-restriction.kubernetes.io/ namespace.
	LabelOwnNodeRestricted string
}{
	LabelOtherNode:         "",
	PatchOtherNode:         "",
	LabelOwnNode:           "",
	LabelOwnNodeRestricted: "",
}

func TestExercise(t *testing.T) {
	testenv.Exercise(t)
	const nodeA, nodeB = "ex01-node-a", "ex01-node-b"
	ctx := context.Background()
	var kubeconfigA string // node A's credentials, made below
	kubectlAsA := func(args ...string) request {
		args = append([]string{"--kubeconfig", kubeconfigA}, args...)
		out, errOut, code := testenv.Kubectl(t, "", args...)
		return request{"kubectl " + strings.Join(args[2:], " "), strings.TrimSpace(out + errOut), code}
	}
	patchAsA := func(node, patch string) request {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigA)
		if err != nil {
			t.Fatal(err)
		}
		r := request{what: "PATCH /api/v1/nodes/" + node + " " + patch, output: "patched"}
		if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			r.output, r.code = "Error from server (Forbidden): "+err.Error(), 1
		}
		return r
	}
	attempts := []struct {
		name, predicted string
		do              func() request
	}{
		{"LabelOtherNode", answer.LabelOtherNode, func() request { return kubectlAsA("label", "node", nodeB, "x=y") }},
		{"PatchOtherNode", answer.PatchOtherNode, func() request { return patchAsA(nodeB, `{"metadata":{"labels":{"x":"y"}}}`) }},
		{"LabelOwnNode", answer.LabelOwnNode, func() request { return kubectlAsA("label", "node", nodeA, "x=y") }},
		{"LabelOwnNodeRestricted", answer.LabelOwnNodeRestricted, func() request {
			return kubectlAsA("label", "node", nodeA, "node-restriction.kubernetes.io/x=y")
		}},
	}
	for _, a := range attempts {
		switch a.predicted {
		case "allowed", "authorizer", "admission":
		default:
			t.Fatalf("answer.%s is %q: predict first — write \"allowed\", \"authorizer\" or \"admission\" for each request in labs/01-fake-node/exercise_test.go", a.name, a.predicted)
		}
	}

	admin := testenv.AdminClient(t)
	for _, name := range []string{nodeA, nodeB} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { admin.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	kubeconfigA = nodeKubeconfig(t, nodeA)
	for _, a := range attempts {
		r := a.do()
		got, why := whoRefused(r.code, r.output)
		if got != a.predicted {
			t.Errorf("%s: you predicted %q; it was %s.\n  $ %s\n  %s", a.name, a.predicted, why, r.what, r.output)
		} else {
			t.Logf("%s: %s, as you predicted", a.name, why)
		}
	}
}

// request is one request node A made and what it got back.
type request struct {
	what, output string
	code         int // exit code, as kubectl's
}

// authzDenied is how the apiserver words a refusal by its authorizers
// (k8s.io/apiserver pkg/endpoints/handlers/responsewriters/errors.go,
// forbiddenMessage, line 60); an admission plugin's refusal is the
// plugin's own message (admission.NewForbidden).
var authzDenied = regexp.MustCompile(`User "[^"]*" cannot (\S+) resource "([^"]*)"`)

// whoRefused says, from kubectl's exit code and error, what happened.
func whoRefused(code int, output string) (string, string) {
	switch {
	case code == 0:
		return "allowed", `"allowed": the change was made`
	case !strings.Contains(output, "(Forbidden)"):
		return "error", "an error that is not a refusal"
	case authzDenied.MatchString(output):
		m := authzDenied.FindStringSubmatch(output)
		return "authorizer", `"authorizer": the authorizers refused the request to ` + m[1] + ` ` + m[2]
	}
	return "admission", `"admission": the authorizers let the request through and an admission plugin refused it`
}

// nodeKubeconfig writes a kubeconfig for user system:node:NAME in group
// system:nodes: the identity the kubelet's TLS bootstrap gets (a node's
// kubelet.kubeconfig), signed here directly with the cluster CA — as the
// controller-manager's CSR signer would — so no kubelet has to run.
func nodeKubeconfig(t *testing.T, name string) string {
	t.Helper()
	cp := testenv.ControlPlane(t)
	cas, err := certutil.CertsFromFile(cp.PKI().CAFile())
	if err != nil {
		t.Fatal(err)
	}
	caKey, err := keyutil.PrivateKeyFromFile(cp.PKI().CAKeyFile())
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := controlplane.NewSignedCertAndKey(cas[0], caKey.(crypto.Signer), "system:node:"+name, []string{"system:nodes"},
		[]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "node.crt"), filepath.Join(dir, "node.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "kubelet.kubeconfig")
	if err := controlplane.WriteKubeconfig(path, cp.URL(), cp.PKI().CAFile(), certFile, keyFile, "system:node:"+name); err != nil {
		t.Fatal(err)
	}
	return path
}

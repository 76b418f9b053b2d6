package bootstrap

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/keyutil"
	kubeletbootstrap "k8s.io/kubernetes/pkg/kubelet/certificate/bootstrap"

	"kubelet-labs/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// fixedKey is a P-256 key derived from a fixed string, so NodeCSRName has
// one known answer. It is a test key and guards nothing.
func fixedKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	scalar := sha256.Sum256([]byte("kubelet-labs TestNodeCSRName"))
	key, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), scalar[:])
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// fixedKeyCSRName is the name the kubelet v1.36.3 gives the CSR of
// fixedKey for node "csr-name-node": TestNodeCSRNameIsTheKubelets obtains
// it on every run from the kubelet's own code path (LoadClientCert →
// requestNodeCertificate → digestedName in pkg/kubelet/certificate/
// bootstrap/bootstrap.go) against a real apiserver; the literal was copied
// from that test's log.
const fixedKeyCSRName = "node-csr-tSc2btefxYYMwbifLue6hpfWiC2IcJqzsi2f2KvPCno"

// TestNodeCSRName: the fixed key gets the kubelet's name; the name changes
// with the key, the node and the usages (an RSA key asks for key
// encipherment too), so a restarted kubelet finds exactly its own CSR.
func TestNodeCSRName(t *testing.T) {
	key := fixedKey(t)
	name, err := NodeCSRName(key.Public(), NodeSubject("csr-name-node"), NodeClientUsages(key))
	if err != nil {
		t.Fatal(err)
	}
	if name != fixedKeyCSRName {
		t.Errorf("NodeCSRName(fixed key, csr-name-node) = %q, want the kubelet's %s: digestedName hashes (SHA-512/256) the PKIX public key, CN, each O and each usage, each as unpadded base64url + '|' (pkg/kubelet/certificate/bootstrap/bootstrap.go:368-398, v1.36.3)", name, fixedKeyCSRName)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for what, got := range map[string]func() (string, error){
		"another key": func() (string, error) {
			return NodeCSRName(other.Public(), NodeSubject("csr-name-node"), NodeClientUsages(key))
		},
		"another node": func() (string, error) {
			return NodeCSRName(key.Public(), NodeSubject("csr-name-node2"), NodeClientUsages(key))
		},
		"RSA usages": func() (string, error) {
			return NodeCSRName(key.Public(), NodeSubject("csr-name-node"), append(NodeClientUsages(key), "key encipherment"))
		},
	} {
		if n, err := got(); err != nil || n == name {
			t.Errorf("NodeCSRName with %s = %q %v, want a name other than %q: the key, subject and usages all go into the hash (bootstrap.go:383-395, v1.36.3)", what, n, err, name)
		}
	}
}

// TestNodeCSRNameIsTheKubelets runs the kubelet's own TLS bootstrap
// (kubeletbootstrap.LoadClientCert, v1.36.3) with a key we chose, against
// the test control plane, finds the CSR it posted by its subject, and
// checks that NodeCSRName names it the same — for the fixed ECDSA key and
// for an RSA key (whose usages add key encipherment).
func TestNodeCSRNameIsTheKubelets(t *testing.T) {
	ctx := context.Background()
	cfg := testenv.AdminConfig(t)
	admin := testenv.AdminClient(t)
	if _, err := EnsureNodeBootstrapRBAC(ctx, admin); err != nil {
		t.Fatal(err)
	}
	tok, err := CreateToken(ctx, admin, TokenOptions{TTL: 10 * time.Minute, ExtraGroups: []string{AutoApproveGroup}})
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _, err := ClusterCA(ctx, cfg, admin)
	if err != nil {
		t.Fatal(err)
	}
	bootKubeconfig := filepath.Join(t.TempDir(), "bootstrap-kubelet.kubeconfig")
	if err := WriteBootstrapKubeconfig(bootKubeconfig, cfg.Host, caPEM, tok); err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for node, key := range map[string]crypto.Signer{"csr-name-node": fixedKey(t), "csr-name-rsa": rsaKey} {
		keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
		if err != nil {
			t.Fatal(err)
		}
		certDir := t.TempDir()
		// The kubelet reuses a pending key from this file: that is how
		// it uses ours.
		if err := keyutil.WriteKey(filepath.Join(certDir, "kubelet-client.key.tmp"), keyPEM); err != nil {
			t.Fatal(err)
		}
		lctx, cancel := context.WithTimeout(ctx, time.Minute)
		err = kubeletbootstrap.LoadClientCert(lctx, filepath.Join(certDir, "kubelet.kubeconfig"), bootKubeconfig, certDir, types.NodeName(node))
		cancel()
		if err != nil {
			t.Fatalf("the kubelet's LoadClientCert for %s: %v", node, err)
		}

		posted := postedCSRName(t, admin, tok.User(), node)
		ours, err := NodeCSRName(key.Public(), NodeSubject(node), NodeClientUsages(key))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s (%T): the kubelet posted %s, NodeCSRName says %s", node, key, posted, ours)
		if posted != ours {
			t.Errorf("%s: the kubelet posted CSR %s, NodeCSRName says %s", node, posted, ours)
		}
		if node == "csr-name-node" && posted != fixedKeyCSRName {
			t.Errorf("the kubelet names the fixed key's CSR %s; update fixedKeyCSRName (now %s)", posted, fixedKeyCSRName)
		}
	}
}

// postedCSRName finds the CSR requester posted for node by reading each
// CSR's request (not by the name we expect, which would prove nothing).
func postedCSRName(t *testing.T, admin kubernetes.Interface, requester, node string) string {
	t.Helper()
	list, err := admin.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, c := range list.Items {
		block, _ := pem.Decode(c.Spec.Request)
		if block == nil {
			t.Fatalf("CSR %s: request is not PEM", c.Name)
		}
		req, err := x509.ParseCertificateRequest(block.Bytes)
		if err != nil {
			t.Fatalf("CSR %s: %v", c.Name, err)
		}
		if c.Spec.Username == requester && req.Subject.CommonName == "system:node:"+node {
			found = append(found, c.Name)
		}
	}
	if len(found) != 1 {
		t.Fatalf("CSRs by %s for node %s: %v, want exactly one", requester, node, found)
	}
	return found[0]
}

// TestEnsureNodeBootstrapRBAC: created, then exists; a binding whose
// subjects were changed is put right ("updated"); a binding that binds
// another role is an error that says how to fix it.
func TestEnsureNodeBootstrapRBAC(t *testing.T) {
	ctx := context.Background()
	admin := testenv.AdminClient(t)
	crbs := admin.RbacV1().ClusterRoleBindings()
	actions := func() map[string]string {
		t.Helper()
		res, err := EnsureNodeBootstrapRBAC(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, r := range res {
			m[r.Binding.Name] = r.Action
		}
		return m
	}
	actions() // created, or exists when another test ran first
	for name, action := range actions() {
		if action != "exists" {
			t.Errorf("second run: %s %s, want exists", name, action)
		}
	}

	// Someone changed the subjects of the bootstrappers' binding.
	const target = "kubelet-labs:kubelet-bootstrap"
	b, err := crbs.Get(ctx, target, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Subjects = []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "somebody-else"}}
	if _, err := crbs.Update(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := actions()
	if got[target] != "updated" {
		t.Errorf("after changing its subjects: %s %s, want updated (all: %v)", target, got[target], got)
	}
	if b, err = crbs.Get(ctx, target, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(b.Subjects) != 1 || b.Subjects[0].Name != "system:bootstrappers" {
		t.Errorf("subjects after update: %+v", b.Subjects)
	}

	// Someone made a binding of that name for another role: roleRef is
	// immutable, so only deleting it helps, and the error says so.
	if err := crbs.Delete(ctx, target, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wrong := NodeBootstrapBindings()[0]
	wrong.RoleRef.Name = "view"
	if _, err := crbs.Create(ctx, &wrong, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = EnsureNodeBootstrapRBAC(ctx, admin)
	if err == nil || !strings.Contains(err.Error(), "binds view, not system:node-bootstrapper") || !strings.Contains(err.Error(), "kubectl delete clusterrolebinding "+target) {
		t.Errorf("err = %v, want the role mismatch and the command that fixes it", err)
	}
	if err := crbs.Delete(ctx, target, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := actions(); got[target] != "created" {
		t.Errorf("after deleting it: %s %s, want created", target, got[target])
	}
}

// TestJoinReusesOrReplacesCredentials: a second Join with the credentials
// of the first is skipped, as the kubelet skips bootstrap; credentials
// signed by another CA (a recreated cluster) or for another server are not
// reused: Join says why and bootstraps again.
func TestJoinReusesOrReplacesCredentials(t *testing.T) {
	ctx := context.Background()
	cfg := testenv.AdminConfig(t)
	dir := filepath.Join(t.TempDir(), "nodes", "t-reuse")
	var log []string
	join := func() *JoinResult {
		t.Helper()
		log = nil
		res, err := Join(ctx, JoinOptions{Admin: cfg, NodeName: "t-reuse", Dir: dir, Timeout: time.Minute,
			Log: func(f string, a ...any) { log = append(log, strings.TrimSpace(fmt.Sprintf(f, a...))) }})
		if err != nil {
			t.Fatalf("join: %v\n%s", err, strings.Join(log, "\n"))
		}
		return res
	}
	if res := join(); res.Skipped || res.CSR == nil {
		t.Fatalf("first join skipped the bootstrap: %+v", res)
	}
	if res := join(); !res.Skipped || res.Node.Username != "system:node:t-reuse" {
		t.Fatalf("second join did not reuse valid credentials: skipped=%v node=%s\n%s", res.Skipped, res.Node.Username, strings.Join(log, "\n"))
	}

	// The same folder, but a certificate from another CA.
	creds := CredentialsIn(dir)
	other := newTestCA(t, "another-cluster-ca")
	now := time.Now()
	certPEM, keyPEM := other.leaf(t, NodeSubject("t-reuse"), now.Add(-time.Hour), now.Add(time.Hour), x509.ExtKeyUsageClientAuth)
	caPEM, _, err := ClusterCA(ctx, cfg, testenv.AdminClient(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := creds.Write(cfg.Host, caPEM, certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	res := join()
	if res.Skipped || !slices.ContainsFunc(log, func(l string) bool {
		return strings.Contains(l, "not usable") && strings.Contains(l, "unknown authority")
	}) {
		t.Errorf("credentials of another CA: skipped=%v, log:\n%s", res.Skipped, strings.Join(log, "\n"))
	}
	if _, err := creds.Check("t-reuse", cfg.Host, caPEM); err != nil {
		t.Errorf("after the new bootstrap: %v", err)
	}
	var unknown x509.UnknownAuthorityError
	if _, err := (Credentials{Kubeconfig: creds.Kubeconfig}).Check("t-reuse", cfg.Host, other.pem); !errors.As(err, &unknown) {
		t.Errorf("new credentials checked against the other CA: %v, want unknown authority", err)
	}
	if _, err := os.Stat(creds.PendingKeyFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pending key left after success: %v", err)
	}

	// The same folder, but a kubeconfig for another server (lab 00 restarted
	// on another port, say).
	if err := creds.Write("https://127.0.0.1:1", caPEM, certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	res = join()
	if res.Skipped || !slices.ContainsFunc(log, func(l string) bool {
		return strings.Contains(l, "not usable") && strings.Contains(l, "is for https://127.0.0.1:1, not "+cfg.Host)
	}) {
		t.Errorf("credentials for another server: skipped=%v, log:\n%s", res.Skipped, strings.Join(log, "\n"))
	}
}

// TestJoinDeletesTheTokenItMade: a token Join made for itself is deleted
// once the join is over (nothing needs it; left alone it would work until
// it expires). A token it was given (lab 03's) is kept: it is not ours.
func TestJoinDeletesTheTokenItMade(t *testing.T) {
	ctx := context.Background()
	cfg := testenv.AdminConfig(t)
	admin := testenv.AdminClient(t)
	secret := func(tok Token) error {
		_, err := admin.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, tok.SecretName(), metav1.GetOptions{})
		return err
	}

	var log []string
	res, err := Join(ctx, JoinOptions{Admin: cfg, NodeName: "t-own-token", Dir: filepath.Join(t.TempDir(), "own"), Timeout: time.Minute,
		Log: func(f string, a ...any) { log = append(log, strings.TrimSpace(fmt.Sprintf(f, a...))) }})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TokenCreated || !res.TokenDeleted {
		t.Errorf("created=%v deleted=%v", res.TokenCreated, res.TokenDeleted)
	}
	if err := secret(res.Token); !apierrors.IsNotFound(err) {
		t.Errorf("Secret kube-system/%s after the join: %v; want NotFound", res.Token.SecretName(), err)
	}
	if !slices.Contains(log, "token       deleted kube-system/"+res.Token.SecretName()+": the join is over, nothing needs the token any more") {
		t.Errorf("no line says the token was deleted:\n%s", strings.Join(log, "\n"))
	}

	given, err := CreateToken(ctx, admin, TokenOptions{TTL: 10 * time.Minute, ExtraGroups: []string{AutoApproveGroup}})
	if err != nil {
		t.Fatal(err)
	}
	res, err = Join(ctx, JoinOptions{Admin: cfg, Token: given.String(), NodeName: "t-given-token", Dir: filepath.Join(t.TempDir(), "given"), Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if res.TokenCreated || res.TokenDeleted {
		t.Errorf("given token: created=%v deleted=%v", res.TokenCreated, res.TokenDeleted)
	}
	if err := secret(given); err != nil {
		t.Errorf("the token we were given is gone: %v", err)
	}
}

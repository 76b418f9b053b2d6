package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"

	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/bootstrap"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func opts(t *testing.T, node, approve string) options {
	t.Setenv("LABS_STATE_DIR", t.TempDir())
	return options{kubeconfig: testenv.ControlPlane(t).AdminKubeconfig(), nodeName: node, approve: approve, timeout: time.Minute}
}

// TestAutoApprovedCertificate is the whole lab: the issued certificate is a
// kubelet client certificate of the cluster CA, and its kubeconfig logs in
// as system:node:NAME.
func TestAutoApprovedCertificate(t *testing.T) {
	ctx := context.Background()
	cp := testenv.ControlPlane(t)
	var out bytes.Buffer
	res, err := run(ctx, opts(t, "t04-auto", "auto"), &out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Logf("output:\n%s", out.String())
	if !strings.HasPrefix(res.CSR.Approval, "AutoApproved:") || !strings.HasPrefix(res.CSR.Requester, "system:bootstrap:") {
		t.Errorf("approval %q by requester %q, want AutoApproved for a system:bootstrap: requester", res.CSR.Approval, res.CSR.Requester)
	}
	checkCredentials(t, res.Creds, "t04-auto", cp.PKI().CAFile())

	// The CSR object: the kubelet signer, ECDSA usages (no key encipherment).
	csr, err := testenv.AdminClient(t).CertificatesV1().CertificateSigningRequests().Get(ctx, res.CSR.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName ||
		!slices.Equal(csr.Spec.Usages, []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}) {
		t.Errorf("CSR spec: signer %s usages %v", csr.Spec.SignerName, csr.Spec.Usages)
	}
	if _, err := os.Stat(res.Creds.PendingKeyFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pending key still there after success: %v", err)
	}
}

func checkCredentials(t *testing.T, c bootstrap.Credentials, node, caFile string) {
	t.Helper()
	certs, err := certutil.CertsFromFile(c.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	cert := certs[0]
	if cert.Subject.CommonName != "system:node:"+node || !slices.Equal(cert.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("subject %s", cert.Subject)
	}
	if _, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok {
		t.Errorf("public key %T, want ECDSA", cert.PublicKey)
	}
	pool, err := certutil.NewPool(caFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("certificate does not chain to the cluster CA as a client cert: %v", err)
	}
	info, err := os.Stat(c.KeyFile)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v %v", info, err)
	}
	if key, err := keyutil.PrivateKeyFromFile(c.KeyFile); err != nil {
		t.Error(err)
	} else if _, ok := key.(*ecdsa.PrivateKey); !ok {
		t.Errorf("key %T, want ECDSA", key)
	}
	if info, err := os.Stat(c.Kubeconfig); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("kubeconfig: %v %v", info, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := os.ReadFile(caFile)
	if cfg.Insecure || !bytes.Equal(cfg.CAData, ca) {
		t.Errorf("kubeconfig does not verify the server with the cluster CA (insecure=%v)", cfg.Insecure)
	}
	who, err := bootstrap.WhoAmI(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if who.Username != "system:node:"+node || !slices.Contains(who.Groups, "system:nodes") {
		t.Errorf("node kubeconfig is %s %v", who.Username, who.Groups)
	}
}

// TestAdminApproves: with a token outside the auto-approve group nobody but
// us approves, and the approval says so.
func TestAdminApproves(t *testing.T) {
	cp := testenv.ControlPlane(t)
	res, err := run(context.Background(), opts(t, "t04-admin", "admin"), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.CSR.Approval, "KubeletLabsApprove:") {
		t.Errorf("approval %q", res.CSR.Approval)
	}
	checkCredentials(t, res.Creds, "t04-admin", cp.PKI().CAFile())
}

// TestManualTimesOut: nobody approves within the timeout: a clear error,
// and the key is kept for the next run.
func TestManualTimesOut(t *testing.T) {
	o := opts(t, "t04-timeout", "manual")
	o.timeout = 2 * time.Second
	t0 := time.Now()
	_, err := run(context.Background(), o, &bytes.Buffer{})
	var te *bootstrap.TimeoutError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "still Pending") || !strings.Contains(err.Error(), "kubectl certificate approve "+te.Name) {
		t.Fatalf("err = %v, want a timeout that says Pending and how to approve", err)
	}
	if d := time.Since(t0); d > 15*time.Second {
		t.Errorf("a 2s timeout took %s", d)
	}
	if !strings.Contains(err.Error(), "is kept") {
		t.Errorf("error does not say the key is kept: %v", err)
	}
}

// TestDeniedIsAnError: a denied CSR ends the wait at once with the reason.
func TestDeniedIsAnError(t *testing.T) {
	ctx := context.Background()
	o := opts(t, "t04-denied", "manual")
	admin := testenv.AdminClient(t)
	out := &testenv.SyncBuffer{}
	errc := make(chan error, 1)
	go func() { _, err := run(ctx, o, out); errc <- err }()
	name := waitCSRName(t, out, nil)
	if err := bootstrap.SetApproval(ctx, admin, name, false, "NotOnMyWatch", "test denies it"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		var de *bootstrap.DeniedError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), "CSR "+name+" was denied: NotOnMyWatch (test denies it)") {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("still waiting 30s after the denial")
	}
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		o    func(*options)
		want string
	}{
		{func(o *options) { o.approve = "maybe" }, "want auto"},
		{func(o *options) { o.nodeName = "Not_A_Node" }, "node name"},
		{func(o *options) { o.token = "short.token" }, "not a bootstrap token"},
		{func(o *options) { o.token = "zzzzzz.0000000000000000" }, "401 Unauthorized"},
		{func(o *options) { o.kubeconfig = "/nonexistent" }, "bad kubeconfig"},
		{func(o *options) { o.kubeconfig = ""; t.Setenv("KUBECONFIG", "") }, "no cluster"},
	} {
		o := opts(t, "t04-bad", "auto")
		tc.o(&o)
		if _, err := run(ctx, o, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", o, err, tc.want)
		}
	}
}

// TestProgramWithKubectl runs the built lab in manual mode and approves (or
// denies) its CSR with the real kubectl, as a learner does.
func TestProgramWithKubectl(t *testing.T) {
	cp := testenv.ControlPlane(t)
	_, binDir := testenv.Binaries(t)
	bin := testenv.BuildLab(t, "./labs/04-csr")
	stateDir := t.TempDir()
	for _, verb := range []string{"approve", "deny"} {
		t.Run(verb, func(t *testing.T) {
			node := "t04-kubectl-" + verb
			p := testenv.StartProgram(t, bin, []string{"KUBECONFIG=" + cp.AdminKubeconfig(), "LABS_STATE_DIR=" + stateDir},
				"--approve=manual", "--node-name="+node, "--timeout=1m")
			p.WaitFor(t, "kubectl certificate approve node-csr-", 30*time.Second)
			name := approveLine.FindStringSubmatch(p.Output())[1]
			kubectl := exec.Command(filepath.Join(binDir, "kubectl"), "certificate", verb, name)
			kubectl.Env = append(os.Environ(), "KUBECONFIG="+cp.AdminKubeconfig())
			if b, err := kubectl.CombinedOutput(); err != nil {
				t.Fatalf("kubectl certificate %s: %v\n%s", verb, err, b)
			}
			if !p.WaitExit(30 * time.Second) {
				t.Fatalf("lab still running 30s after kubectl certificate %s:\n%s", verb, p.Output())
			}
			code, out := p.ExitCode(), p.Output()
			switch verb {
			case "approve":
				if code != 0 || !strings.Contains(out, "identity    system:node:"+node) {
					t.Errorf("exit %d:\n%s", code, out)
				}
				checkCredentials(t, bootstrap.CredentialsIn(filepath.Join(stateDir, "nodes", node)), node, cp.PKI().CAFile())
			case "deny":
				if code == 0 || !strings.Contains(out, "error: CSR "+name+" was denied: KubectlDeny") {
					t.Errorf("exit %d:\n%s", code, out)
				}
			}
		})
	}
}

var approveLine = regexp.MustCompile(`kubectl certificate approve (node-csr-\S+)`)

// waitCSRName waits for the lab to print the CSR it waits on.
func waitCSRName(t *testing.T, out *testenv.SyncBuffer, exited <-chan struct{}) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		if m := approveLine.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		select {
		case <-exited:
			t.Fatalf("lab exited before posting its CSR:\n%s", out)
		case <-deadline:
			t.Fatalf("no CSR after 30s:\n%s", out)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

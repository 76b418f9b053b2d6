package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"errors"
	"fmt"
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

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/readmerun"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/bootstrap"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func opts(t *testing.T, node, approve string) options {
	// The control plane first: it finds its binaries in the real state
	// folder, which the lab's own LABS_STATE_DIR below would hide.
	kubeconfig := testenv.ControlPlane(t).AdminKubeconfig()
	t.Setenv("LABS_STATE_DIR", t.TempDir())
	return options{kubeconfig: kubeconfig, nodeName: node, approve: approve, timeout: time.Minute}
}

// TestAutoApprovedCertificate is the whole lab: the issued certificate is a
// kubelet client certificate of the cluster CA, and its kubeconfig logs in
// as system:node:NAME.
func TestAutoApprovedCertificate(t *testing.T) {
	ctx := context.Background()
	cp := testenv.ControlPlane(t)
	var out bytes.Buffer
	res, err := run(ctx, opts(t, "t04-auto", "auto"), labenv.NewPrinter(&out))
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
	res, err := run(context.Background(), opts(t, "t04-admin", "admin"), labenv.NewPrinter(&bytes.Buffer{}))
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
	_, err := run(context.Background(), o, labenv.NewPrinter(&bytes.Buffer{}))
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
	go func() { _, err := run(ctx, o, labenv.NewPrinter(out)); errc <- err }()
	var name string
	testenv.Poll(t, "the lab to post its CSR", 30*time.Second, func() (bool, error) {
		select {
		case err := <-errc:
			return false, fmt.Errorf("the lab ended before posting its CSR: %v\n%s", err, out)
		default:
		}
		if m := approveLine.FindStringSubmatch(out.String()); m != nil {
			name = m[1]
			return true, nil
		}
		return false, nil
	})
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
		{func(o *options) { o.nodeName = "Not_A_Node" }, "not a valid Node name"},
		{func(o *options) { o.nodeName = "../escape" }, `--node-name "../escape" is not a valid Node name`},
		{func(o *options) { o.expirationSeconds = -1 }, "--expiration-seconds=-1"},
		{func(o *options) { o.token = "short.token" }, "not a bootstrap token"},
		{func(o *options) { o.token = "zzzzzz.0000000000000000" }, "401 Unauthorized"},
		{func(o *options) { o.tokenFile = sharedTokenFile(t) }, "group or others may read it"},
		{func(o *options) { o.token, o.tokenFile = "abcdef.0123456789abcdef", sharedTokenFile(t) }, "both given"},
		{func(o *options) { o.kubeconfig = "/nonexistent" }, "bad kubeconfig"},
		{func(o *options) { o.kubeconfig = ""; t.Setenv("KUBECONFIG", "") }, "no cluster"},
	} {
		o := opts(t, "t04-bad", "auto")
		tc.o(&o)
		if _, err := run(ctx, o, labenv.NewPrinter(&bytes.Buffer{})); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", o, err, tc.want)
		}
		// Refused before anything was made: no node folder, none outside nodes/.
		state := os.Getenv("LABS_STATE_DIR")
		for _, p := range []string{filepath.Join(state, "nodes", o.nodeName), filepath.Join(state, "escape")} {
			if _, err := os.Stat(p); tc.want != "401 Unauthorized" && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%+v: %s exists after a refused run", o, p)
			}
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

// TestExpirationSeconds: the lifetime asked for is the lifetime issued, up
// to the signer's maximum (--cluster-signing-duration, one year on the test
// control plane as upstream); notBefore is back-dated 5 minutes; below 600
// seconds the apiserver refuses the CSR.
func TestExpirationSeconds(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		seconds          int
		wantMin, wantMax time.Duration // notAfter - now
	}{
		{3600, 59 * time.Minute, 61 * time.Minute},
		{2 * 365 * 24 * 3600, 364 * 24 * time.Hour, 365 * 24 * time.Hour},
	} {
		o := opts(t, fmt.Sprintf("t04-life-%d", tc.seconds), "auto")
		o.expirationSeconds = tc.seconds
		var out bytes.Buffer
		res, err := run(ctx, o, labenv.NewPrinter(&out))
		if err != nil {
			t.Fatalf("expiration %d: %v\n%s", tc.seconds, err, out.String())
		}
		now := time.Now()
		if life := res.Cert.NotAfter.Sub(now); life < tc.wantMin || life > tc.wantMax {
			t.Errorf("expiration %ds: notAfter in %s, want %s..%s", tc.seconds, life, tc.wantMin, tc.wantMax)
		}
		if back := now.Sub(res.Cert.NotBefore); back < 4*time.Minute || back > 6*time.Minute {
			t.Errorf("notBefore %s ago, want ~5m (back-dated)", back)
		}
		csr, err := testenv.AdminClient(t).CertificatesV1().CertificateSigningRequests().Get(ctx, res.CSR.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if csr.Spec.ExpirationSeconds == nil || int(*csr.Spec.ExpirationSeconds) != tc.seconds {
			t.Errorf("spec.expirationSeconds = %v, want %d", csr.Spec.ExpirationSeconds, tc.seconds)
		}
		if !strings.Contains(lifetimeLine(out.String()), fmt.Sprintf("(spec.expirationSeconds=%d); issued: notBefore", tc.seconds)) {
			t.Errorf("output does not say the lifetime:\n%s", out.String())
		}
		t.Logf("%s", lifetimeLine(out.String()))
	}
	o := opts(t, "t04-life-short", "auto")
	o.expirationSeconds = 300
	if _, err := run(ctx, o, labenv.NewPrinter(&bytes.Buffer{})); err == nil || !strings.Contains(err.Error(), "may not specify a duration less than 600 seconds") {
		t.Errorf("300s: err = %v, want the apiserver's refusal", err)
	}
}

func lifetimeLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "lifetime") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// TestByHandSections runs the README's two by-hand blocks as written (bash,
// openssl, the real kubectl; go run of lab 03 is the built lab 03) with the
// state folder in LABS_STATE_DIR, and checks what they print: a Pending
// client CSR of 60m, issued after kubectl approves it, a certificate that
// logs in as system:node:hand-node; a serving CSR that nobody approves
// automatically, issued with its SANs after approval; NodeRestriction
// refusing a CSR for another node's name.
func TestByHandSections(t *testing.T) {
	cp := testenv.ControlPlane(t)
	root, binDir := testenv.Binaries(t)
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Fatalf("the by-hand section needs openssl (apt-get install openssl): %v", err)
	}
	lab03 := testenv.BuildLab(t, "./labs/03-bootstrap-token")
	readme := filepath.Join(root, "labs", "04-csr", "README.md")
	clientBlock := readmerun.ScriptAfter(t, readme, "## By hand, with openssl and kubectl")
	servingBlock := readmerun.ScriptAfter(t, readme, "### Two signers for a node: client and serving")
	stateDir := t.TempDir()
	// `go run ./labs/03-bootstrap-token` runs the lab 03 program built above.
	goShim := `go() { if [ "$1 $2" = "run ./labs/03-bootstrap-token" ]; then shift 2; "$LAB03" "$@"; else command go "$@"; fi; }` + "\n"
	for i, script := range []string{clientBlock, servingBlock} {
		cmd := exec.Command("bash", "-u", "-c", goShim+script)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.AdminKubeconfig(), "LABS_STATE_DIR="+stateDir,
			"PATH="+binDir+":"+os.Getenv("PATH"), "LAB03="+lab03)
		b, err := cmd.CombinedOutput()
		out := string(b)
		t.Logf("block %d (exit %v):\n%s", i+1, err, out)
		want := []string{
			"certificatesigningrequest.certificates.k8s.io/hand-node created",
			"60m                 Pending",
			"60m                 Approved,Issued",
			"subject=O = system:nodes, CN = system:node:hand-node",
			"TLS Web Client Authentication",
			"hand-node.crt: OK",
			"system:node:hand-node",
		}
		if i == 1 {
			want = []string{
				"certificatesigningrequest.certificates.k8s.io/hand-node-serving created",
				"kubernetes.io/kubelet-serving   system:node:hand-node   <none>              Pending",
				"TLS Web Server Authentication",
				"DNS:hand-node, IP Address:127.0.0.1",
				`"other-node-serving" is forbidden: can only create a node CSR with CN=system:node:hand-node`,
			}
		} else if err != nil {
			t.Errorf("the client block failed: %v", err)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("block %d does not print %q", i+1, w)
			}
		}
	}
	for _, d := range []string{"04-csr", filepath.Join("04-csr", "by-hand")} {
		if info, err := os.Stat(filepath.Join(stateDir, d)); err != nil || info.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v, want a 0700 folder", d, info, err)
		}
	}
	for _, f := range []string{"hand-node.key", "hand-node-serving.key", "hand-node.kubeconfig"} {
		if info, err := os.Stat(filepath.Join(stateDir, "04-csr", "by-hand", f)); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600 in the state folder", f, info, err)
		}
	}
}

// sharedTokenFile is a token file the group may read: refused.
func sharedTokenFile(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "token")
	os.WriteFile(p, []byte("abcdef.0123456789abcdef\n"), 0o640)
	return p
}

// TestTokenFile: the token from a 0600 file (lab 03's) is the one the CSR
// is posted with, and since it was given, not made, the join keeps it.
func TestTokenFile(t *testing.T) {
	ctx := context.Background()
	admin := testenv.AdminClient(t)
	if _, err := bootstrap.EnsureNodeBootstrapRBAC(ctx, admin); err != nil { // lab 03's part
		t.Fatal(err)
	}
	tok, err := bootstrap.CreateToken(ctx, admin, bootstrap.TokenOptions{TTL: 10 * time.Minute, ExtraGroups: []string{bootstrap.AutoApproveGroup}})
	if err != nil {
		t.Fatal(err)
	}
	o := opts(t, "t04-token-file", "auto")
	o.tokenFile = filepath.Join(t.TempDir(), "token")
	if err := bootstrap.WriteTokenFile(o.tokenFile, tok); err != nil {
		t.Fatal(err)
	}
	res, err := run(ctx, o, labenv.NewPrinter(&bytes.Buffer{}))
	if err != nil {
		t.Fatal(err)
	}
	if res.TokenCreated || res.Token.ID != tok.ID || res.CSR.Requester != "system:bootstrap:"+tok.ID {
		t.Errorf("created=%v token %s, CSR by %q; want %s's", res.TokenCreated, res.Token.ID, res.CSR.Requester, tok.ID)
	}
	if _, err := admin.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, tok.SecretName(), metav1.GetOptions{}); err != nil {
		t.Errorf("the given token's Secret: %v", err)
	}
}

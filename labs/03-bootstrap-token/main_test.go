package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/readmerun"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/bootstrap"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var tokenLine = regexp.MustCompile(`(?m)^bootstrap token\s+([a-z0-9]{6}\.[a-z0-9]{16})$`)

func labOptions(t *testing.T) options {
	cp := testenv.ControlPlane(t)
	return options{
		kubeconfig: cp.AdminKubeconfig(), ttl: time.Hour, autoApprove: true, description: "test",
		bootstrapKubeconfig: filepath.Join(t.TempDir(), "bootstrap-kubelet.kubeconfig"),
		writeTokenFile:      filepath.Join(t.TempDir(), "token"),
	}
}

// TestTokenAuthenticates: the lab's token logs in as system:bootstrap:ID in
// the bootstrappers groups, and so does its bootstrap kubeconfig.
func TestTokenAuthenticates(t *testing.T) {
	ctx := context.Background()
	o := labOptions(t)
	var out bytes.Buffer
	if err := run(ctx, o, labenv.NewPrinter(&out)); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Logf("output:\n%s", out.String())
	m := tokenLine.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no token printed:\n%s", out.String())
	}
	tok, err := bootstrap.ParseToken(m[1])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"username        system:bootstrap:" + tok.ID, "system:bootstrappers, " + bootstrap.AutoApproveGroup + ", system:authenticated", "jws-kubeconfig-" + tok.ID + " verified"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}

	// The bootstrap kubeconfig is private and works on its own.
	info, err := os.Stat(o.bootstrapKubeconfig)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("bootstrap kubeconfig: %v %v", info, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.bootstrapKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Insecure || len(cfg.CAData) == 0 {
		t.Errorf("bootstrap kubeconfig does not verify the server: insecure=%v, CA %d bytes", cfg.Insecure, len(cfg.CAData))
	}
	who, err := bootstrap.WhoAmI(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if who.Username != "system:bootstrap:"+tok.ID || !slices.Contains(who.Groups, "system:bootstrappers") || !slices.Contains(who.Groups, bootstrap.AutoApproveGroup) {
		t.Errorf("bootstrap kubeconfig authenticates as %s %v", who.Username, who.Groups)
	}

	// The Secret says what the lab promised: both usages, an expiry ~1h away.
	s, err := testenv.AdminClient(t).CoreV1().Secrets("kube-system").Get(ctx, tok.SecretName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(s.Type) != "bootstrap.kubernetes.io/token" || string(s.Data["usage-bootstrap-authentication"]) != "true" || string(s.Data["usage-bootstrap-signing"]) != "true" {
		t.Errorf("secret %s: type %s data %v", s.Name, s.Type, s.Data)
	}
	exp, err := time.Parse(time.RFC3339, string(s.Data["expiration"]))
	if err != nil || time.Until(exp) < 59*time.Minute || time.Until(exp) > 61*time.Minute {
		t.Errorf("expiration %q (%v), want ~1h from now", s.Data["expiration"], err)
	}
}

// TestBindingsExistAndRunIsIdempotent: the three bindings a joining node
// needs exist with the right roles and groups; a second run keeps them.
func TestBindingsExistAndRunIsIdempotent(t *testing.T) {
	ctx := context.Background()
	o := labOptions(t)
	for i := 0; i < 2; i++ {
		var out bytes.Buffer
		if err := run(ctx, o, labenv.NewPrinter(&out)); err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, out.String())
		}
		if i == 1 && strings.Contains(out.String(), "created  ClusterRoleBinding") {
			t.Errorf("second run created bindings again:\n%s", out.String())
		}
	}
	want := map[string][2]string{ // binding -> role, group
		"kubelet-labs:kubelet-bootstrap":                     {"system:node-bootstrapper", "system:bootstrappers"},
		"kubelet-labs:node-autoapprove-bootstrap":            {"system:certificates.k8s.io:certificatesigningrequests:nodeclient", bootstrap.AutoApproveGroup},
		"kubelet-labs:node-autoapprove-certificate-rotation": {"system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"},
	}
	admin := testenv.AdminClient(t)
	for name, rg := range want {
		b, err := admin.RbacV1().ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("binding %s: %v", name, err)
			continue
		}
		if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.Name != rg[0] || len(b.Subjects) != 1 || b.Subjects[0].Kind != "Group" || b.Subjects[0].Name != rg[1] {
			t.Errorf("binding %s: roleRef %+v subjects %+v, want %s -> group %s", name, b.RoleRef, b.Subjects, rg[0], rg[1])
		}
		// The role itself is built in: the apiserver's bootstrap policy.
		if _, err := admin.RbacV1().ClusterRoles().Get(ctx, rg[0], metav1.GetOptions{}); err != nil {
			t.Errorf("ClusterRole %s: %v", rg[0], err)
		}
	}
}

// TestWrongSecretIsExplained: a real ID with a wrong secret part gets a 401
// and a sentence that says the secret part is wrong.
func TestWrongSecretIsExplained(t *testing.T) {
	ctx := context.Background()
	o := labOptions(t)
	admin := testenv.AdminClient(t)
	tok, err := bootstrap.CreateToken(ctx, admin, bootstrap.TokenOptions{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	o.token = tok.ID + ".0000000000000000"
	var out bytes.Buffer
	err = run(ctx, o, labenv.NewPrinter(&out))
	var rejected *bootstrap.TokenRejectedError
	if !errors.As(err, &rejected) || !errors.Is(err, bootstrap.ErrUnauthorized) {
		t.Fatalf("err = %v, want a TokenRejectedError (401)", err)
	}
	for _, want := range []string{"401 Unauthorized", "secret part", "is wrong"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "0000000000000000") {
		t.Errorf("error repeats the secret: %v", err)
	}
}

// TestExpiredTokenIsExplained: a token whose expiration is in the past is
// refused, and the error says it expired (whether or not the tokencleaner
// has deleted it yet).
func TestExpiredTokenIsExplained(t *testing.T) {
	ctx := context.Background()
	cp := testenv.ControlPlane(t)
	cfg, err := cp.AdminConfig()
	if err != nil {
		t.Fatal(err)
	}
	admin := testenv.AdminClient(t)
	tok, err := bootstrap.CreateToken(ctx, admin, bootstrap.TokenOptions{Expires: time.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bootstrap.AuthenticateToken(ctx, cfg, tok, admin, 2*time.Second)
	if !errors.Is(err, bootstrap.ErrUnauthorized) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("err = %v, want 401 explained as expired", err)
	}
	t.Logf("expired: %v", err)

	// Without an admin client the lab cannot look inside, but still says what a 401 means.
	_, err = bootstrap.AuthenticateToken(ctx, cfg, tok, nil, 0)
	if !errors.Is(err, bootstrap.ErrUnauthorized) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("err = %v, want 401 with the possible reasons", err)
	}
}

// TestUnknownAndMalformedTokens: an ID nobody created, and a string that is
// not a token at all (refused before any request).
func TestUnknownAndMalformedTokens(t *testing.T) {
	ctx := context.Background()
	o := labOptions(t)
	o.token = "zzzzzz.0123456789abcdef"
	if err := run(ctx, o, labenv.NewPrinter(&bytes.Buffer{})); !errors.Is(err, bootstrap.ErrUnauthorized) || !strings.Contains(err.Error(), "no token with ID zzzzzz") {
		t.Errorf("unknown token: %v", err)
	}
	o.token = "not-a-token"
	o.kubeconfig = "/nonexistent" // proves nothing was contacted
	if err := run(ctx, o, labenv.NewPrinter(&bytes.Buffer{})); err == nil || !strings.Contains(err.Error(), "is not a bootstrap token") {
		t.Errorf("malformed token: %v", err)
	}
}

// TestProgram runs the built lab as a learner does.
func TestProgram(t *testing.T) {
	cp := testenv.ControlPlane(t)
	stateDir := t.TempDir()
	env := []string{"KUBECONFIG=" + cp.AdminKubeconfig(), "LABS_STATE_DIR=" + stateDir}

	out, code := runLab(t, env)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	m := tokenLine.FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "system:bootstrap:") {
		t.Fatalf("output:\n%s", out)
	}
	if info, err := os.Stat(filepath.Join(stateDir, "bootstrap", "bootstrap-kubelet.kubeconfig")); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("bootstrap kubeconfig in the state folder: %v %v", info, err)
	}

	// The token alone, 0600, for --token-file; the next line names the
	// file, not the token.
	tokenFile := filepath.Join(stateDir, "bootstrap", "token")
	if b, err := os.ReadFile(tokenFile); err != nil || string(b) != m[1]+"\n" {
		t.Errorf("token file: %q, %v", b, err)
	}
	if info, err := os.Stat(tokenFile); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("token file mode: %v %v", info, err)
	}
	if !strings.Contains(out, "next: go run ./labs/04-csr --token-file "+tokenFile+"\n") || strings.Contains(out, "--token "+m[1]) {
		t.Errorf("the next line should name the token file, not the token:\n%s", out)
	}
	out, code = runLab(t, env, "--token-file", tokenFile)
	if code != 0 || !strings.Contains(out, "username        system:bootstrap:"+m[1][:6]) {
		t.Errorf("--token-file: exit %d:\n%s", code, out)
	}
	os.Chmod(tokenFile, 0o640)
	out, code = runLab(t, env, "--token-file", tokenFile)
	if code == 0 || !strings.Contains(out, "is mode 0640: group or others may read it") || strings.Contains(out, m[1]) {
		t.Errorf("--token-file readable by the group: exit %d:\n%s", code, out)
	}
	out, code = runLab(t, env, "--token-file", tokenFile, "--token", m[1])
	if code == 0 || !strings.Contains(out, "--token and --token-file both given") {
		t.Errorf("both flags: exit %d:\n%s", code, out)
	}

	out, code = runLab(t, env, "--token", m[1][:7]+"aaaaaaaaaaaaaaaa")
	if code == 0 || !strings.Contains(out, "401 Unauthorized") || strings.Contains(out, "panic") {
		t.Errorf("wrong token: exit %d:\n%s", code, out)
	}
	out, code = runLab(t, []string{"KUBECONFIG=", "LABS_STATE_DIR=" + t.TempDir()})
	if code == 0 || !strings.Contains(out, "no cluster") {
		t.Errorf("no cluster: exit %d:\n%s", code, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.kubeconfig")
	os.WriteFile(bad, []byte("this is not yaml: ["), 0o600)
	out, code = runLab(t, []string{"KUBECONFIG=" + bad, "LABS_STATE_DIR=" + stateDir})
	if code == 0 || !strings.Contains(out, "bad kubeconfig") {
		t.Errorf("bad kubeconfig: exit %d:\n%s", code, out)
	}
}

func runLab(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	return testenv.RunProgram(t, testenv.BuildLab(t, "./labs/03-bootstrap-token"), env, args...)
}

// TestByHandSection runs the README's "The same by hand" block as written
// (bash, the real kubectl v1.36.3, the state folder in LABS_STATE_DIR as in
// the VM), twice, then checks the hand-made token with the lab. The token
// must be the block's own, random one — never one written in the README,
// which anyone who read the course could use to get a node certificate in
// the learner's cluster (the token is in the auto-approve group): each run
// makes a new one, shows it once, keeps it in a 0600 file, and it
// authenticates as system:bootstrap:ID, in the groups its Secret names,
// with RBAC refusing it everything but CSRs.
func TestByHandSection(t *testing.T) {
	root, binDir := testenv.Binaries(t)
	script := readmerun.ScriptAfter(t, filepath.Join(root, "labs", "03-bootstrap-token", "README.md"), "### The same by hand")
	if m := anyToken.FindString(script); m != "" {
		t.Fatalf("the by-hand block uses the fixed token %s: whoever read the README could join a node to the learner's cluster; the block must make a random one", m)
	}
	cp := testenv.ControlPlane(t)
	byHand := func() (string, bootstrap.Token, string) {
		stateDir := t.TempDir()
		cmd := exec.Command("bash", "-u", "-c", script)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.AdminKubeconfig(), "LABS_STATE_DIR="+stateDir, "PATH="+binDir+":"+os.Getenv("PATH"))
		b, _ := cmd.CombinedOutput() // the last command fails on purpose (403)
		t.Logf("by hand:\n%s", b)
		tokenFile := filepath.Join(stateDir, "bootstrap", "by-hand-token")
		tok, err := bootstrap.ReadTokenFile(tokenFile) // 0600, or it is refused
		if err != nil {
			t.Fatalf("the by-hand block left no private token file: %v", err)
		}
		if info, err := os.Stat(filepath.Join(stateDir, "bootstrap", "by-hand.kubeconfig")); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("by-hand kubeconfig in the state folder: %v %v", info, err)
		}
		return string(b), tok, tokenFile
	}

	out, tok, tokenFile := byHand()
	if tok.String() == "abcdef.0123456789abcdef" {
		t.Errorf("the by-hand block made the fixed token %s", tok)
	}
	if n := strings.Count(out, tok.Secret); n != 1 {
		t.Errorf("the token's secret part is printed %d times, want once (when it is made)", n)
	}
	for _, want := range []string{
		"bootstrap token " + tok.String() + " (keep it secret",
		"secret/" + tok.SecretName() + " created",
		"Username    " + tok.User(),
		"[system:bootstrappers system:bootstrappers:kubelet-labs:auto-approve system:authenticated]",
		"\nyes\n",
		`Error from server (Forbidden): nodes is forbidden: User "` + tok.User() + `" cannot list resource "nodes"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the by-hand block does not print %q", want)
		}
	}
	// A second run (a second learner, or the same one again): another token.
	if _, again, _ := byHand(); again.ID == tok.ID || again.Secret == tok.Secret {
		t.Errorf("two runs of the by-hand block made %s and %s: the token is not random", tok.Redacted(), again.Redacted())
	}

	o := labOptions(t)
	o.tokenFile = tokenFile
	var lab bytes.Buffer
	if err := run(context.Background(), o, labenv.NewPrinter(&lab)); err != nil {
		t.Fatalf("the lab refuses the hand-made token: %v", err)
	}
	for _, want := range []string{"username        " + tok.User(), "groups          system:bootstrappers, " + bootstrap.AutoApproveGroup + ", system:authenticated"} {
		if !strings.Contains(lab.String(), want) {
			t.Errorf("lab output lacks %q:\n%s", want, lab.String())
		}
	}
}

// anyToken is a bootstrap token written out, ID.SECRET.
var anyToken = regexp.MustCompile(`\b[a-z0-9]{6}\.[a-z0-9]{16}\b`)

package bootstrap

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
)

func TestParseToken(t *testing.T) {
	tok, err := ParseToken(" abcdef.0123456789abcdef\n")
	if err != nil || tok.ID != "abcdef" || tok.Secret != "0123456789abcdef" || tok.String() != "abcdef.0123456789abcdef" {
		t.Fatalf("%+v %v", tok, err)
	}
	if tok.SecretName() != "bootstrap-token-abcdef" || tok.User() != "system:bootstrap:abcdef" || strings.Contains(tok.Redacted(), tok.Secret) {
		t.Errorf("%s %s %s", tok.SecretName(), tok.User(), tok.Redacted())
	}
	// A test token, parsed only: it never reaches a cluster.
	shape := regexp.MustCompile(`[a-z0-9]{6}\.[a-z0-9]{16}`)
	for _, bad := range []string{"", "abcdef", "ABCDEF.0123456789abcdef", "abcdef.0123456789abcde", "abcde.0123456789abcdef", "abcdef:0123456789abcdef"} {
		_, err := ParseToken(bad)
		if err == nil {
			t.Errorf("ParseToken(%q) accepted", bad)
			continue
		}
		// The message says what a token looks like, and offers none to
		// copy: a token everybody has read is nobody's secret.
		if m := shape.FindString(strings.ReplaceAll(err.Error(), fmt.Sprintf("%q", bad), "")); m != "" {
			t.Errorf("ParseToken(%q): %v — offers the token %s", bad, err, m)
		}
	}
}

func TestNodeClientUsages(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rs, _ := rsa.GenerateKey(rand.Reader, 2048)
	if u := NodeClientUsages(ec); slices.Contains(u, certificatesv1.UsageKeyEncipherment) || len(u) != 2 {
		t.Errorf("NodeClientUsages(ECDSA key) = %v, want [digital signature client auth]: the kubelet adds key encipherment for an RSA key only (pkg/kubelet/certificate/bootstrap/bootstrap.go:332-338, v1.36.3)", u)
	}
	if u := NodeClientUsages(rs); !slices.Contains(u, certificatesv1.UsageKeyEncipherment) {
		t.Errorf("NodeClientUsages(RSA key) = %v, want [digital signature client auth key encipherment] (pkg/kubelet/certificate/bootstrap/bootstrap.go:332-338, v1.36.3)", u)
	}
}

func TestParseApproveMode(t *testing.T) {
	for _, ok := range []string{"auto", "admin", "manual"} {
		if _, err := ParseApproveMode(ok); err != nil {
			t.Error(err)
		}
	}
	if _, err := ParseApproveMode("yes"); err == nil {
		t.Error("accepted yes")
	}
}

// TestTokenFile: WriteTokenFile writes 0600 (replacing a looser file);
// ReadTokenFile takes only a file group and others cannot read, and never
// echoes a file's content in an error.
func TestTokenFile(t *testing.T) {
	dir := t.TempDir()
	tok, err := ParseToken("abcdef.0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "sub", "token")
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(p, []byte("old"), 0o644)
	if err := WriteTokenFile(p, tok); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode: %v %v", fi, err)
	}
	if got, err := ReadTokenFile(p); err != nil || got.String() != tok.String() {
		t.Fatalf("ReadTokenFile = %v, %v", got, err)
	}

	for mode, want := range map[os.FileMode]string{
		0o640: "is mode 0640: group or others may read it, and a token is a password; chmod 600 " + p,
		0o604: "is mode 0604",
		0o620: "is mode 0620",
		0o400: "",
	} {
		os.Chmod(p, mode)
		_, err := ReadTokenFile(p)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("mode %04o: %v; want %q", mode, err, want)
		}
	}

	wrong := filepath.Join(dir, "wrong")
	os.WriteFile(wrong, []byte("not-a-token-but-maybe-a-password\n"), 0o600)
	if _, err := ReadTokenFile(wrong); err == nil || !strings.Contains(err.Error(), "does not hold a bootstrap token") || strings.Contains(err.Error(), "maybe-a-password") {
		t.Errorf("a file without a token: %v", err)
	}
	if _, err := ReadTokenFile(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a folder: %v", err)
	}
	if _, err := ReadTokenFile(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a missing file: %v", err)
	}
}

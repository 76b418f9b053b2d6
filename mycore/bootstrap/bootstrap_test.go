package bootstrap

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
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
	for _, bad := range []string{"", "abcdef", "ABCDEF.0123456789abcdef", "abcdef.0123456789abcde", "abcde.0123456789abcdef", "abcdef:0123456789abcdef"} {
		if _, err := ParseToken(bad); err == nil {
			t.Errorf("ParseToken(%q) accepted", bad)
		}
	}
}

func TestNodeClientUsages(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rs, _ := rsa.GenerateKey(rand.Reader, 2048)
	if u := NodeClientUsages(ec); slices.Contains(u, certificatesv1.UsageKeyEncipherment) || len(u) != 2 {
		t.Errorf("ECDSA usages %v", u)
	}
	if u := NodeClientUsages(rs); !slices.Contains(u, certificatesv1.UsageKeyEncipherment) {
		t.Errorf("RSA usages %v", u)
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

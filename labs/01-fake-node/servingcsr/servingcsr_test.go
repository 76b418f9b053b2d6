package servingcsr

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"

	"kubelet-labs/mycore/server"
)

// TestCheckRefusesClusterIPs: being an address of this machine is not
// enough. Loopback (lab 01's node never publishes it), the service range
// and the apiserver's own address are refused even when local; the
// machine's other addresses pass.
func TestCheckRefusesClusterIPs(t *testing.T) {
	_, svc, _ := net.ParseCIDR("10.0.0.0/24")
	policy := server.ServingIPPolicy{APIServerIPs: []net.IP{net.ParseIP("192.0.2.1")}, ServiceCIDRs: []*net.IPNet{svc}}
	local := map[string]bool{"127.0.0.1": true, "10.0.0.1": true, "192.0.2.1": true, "192.0.2.7": true}
	for ip, want := range map[string]string{
		"127.0.0.1":    "is loopback",
		"::1":          "is loopback",
		"10.0.0.1":     "in the service range 10.0.0.0/24",
		"192.0.2.1":    "the apiserver's own address",
		"198.51.100.9": "not an address of this machine",
		"192.0.2.7":    "",
	} {
		err := check(request(t, "fake-node-1", net.ParseIP(ip)), "fake-node-1", policy, local)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("IP %s: %v; want %q", ip, err, want)
		}
	}
}

func request(t *testing.T, node string, ip net.IP) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}, IPAddresses: []net.IP{ip}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
		Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})}}
}

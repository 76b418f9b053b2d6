package controlplane_test

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"kubelet-labs/internal/controlplane"
)

// The apiserver's certificate follows the address lab 00 serves on: named
// when --apiserver-address names it, gone again when lab 00 is back on
// loopback — and issued by the same CA throughout, so every kubeconfig and
// node certificate made in between stays valid.
func TestServingCertificateNamesTheAPIServerAddress(t *testing.T) {
	dir := t.TempDir()
	bridge := net.ParseIP("172.18.0.1")
	names := func() []string {
		t.Helper()
		var out []string
		for _, ip := range readCert(t, dir, "apiserver").IPAddresses {
			out = append(out, ip.String())
		}
		return out
	}

	first, err := controlplane.EnsurePKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(); slices.Contains(got, "172.18.0.1") || !slices.Contains(got, "127.0.0.1") {
		t.Errorf("on loopback the certificate names %v: want 127.0.0.1 and not 172.18.0.1", got)
	}
	opened, err := controlplane.EnsurePKI(dir, bridge)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(); !slices.Contains(got, "172.18.0.1") || !slices.Contains(got, "127.0.0.1") {
		t.Errorf("with the apiserver on 172.18.0.1 the certificate names %v: want both", got)
	}
	if !opened.CACert.Equal(first.CACert) {
		t.Error("naming an address made a new CA: every kubeconfig would break")
	}
	if _, err := controlplane.EnsurePKI(dir); err != nil {
		t.Fatal(err)
	}
	if got := names(); slices.Contains(got, "172.18.0.1") {
		t.Errorf("back on loopback the certificate still names %v", got)
	}
}

// The aggregator's client certificate comes from a CA of its own, as
// kubeadm's front-proxy-ca: an extension apiserver that trusts it for the
// X-Remote-User headers trusts no node or admin certificate of the
// cluster CA for them, and the cluster CA's clients cannot present it.
func TestFrontProxyClientHasACAOfItsOwn(t *testing.T) {
	dir := t.TempDir()
	cluster, err := controlplane.EnsurePKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	client, ca := readCert(t, dir, "front-proxy-client"), readCert(t, dir, controlplane.FrontProxyCAName)
	if client.Subject.CommonName != "front-proxy-client" {
		t.Errorf("front-proxy client CN %q, want front-proxy-client (the name --requestheader-allowed-names admits)", client.Subject.CommonName)
	}
	if err := client.CheckSignatureFrom(ca); err != nil {
		t.Errorf("front-proxy client not signed by the front-proxy CA: %v", err)
	}
	if ca.Equal(cluster.CACert) || client.CheckSignatureFrom(cluster.CACert) == nil {
		t.Error("the front-proxy client is the cluster CA's: want a CA of its own")
	}
}

// readCert reads dir/NAME.crt.
func readCert(t *testing.T, dir, name string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name+".crt"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s.crt: no PEM block", name)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

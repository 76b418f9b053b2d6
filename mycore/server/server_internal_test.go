package server

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	certutil "k8s.io/client-go/util/cert"
	internalapi "k8s.io/cri-api/pkg/apis"
)

// TestHTTPServerLimits: the http.Server New builds closes idle keep-alive
// connections and caps request headers as the kubelet's does
// (pkg/kubelet/server/server.go:197-204). No request is sent: Go's own
// default header cap is the same 1 MiB, and the idle timeout is 90 s, so
// the configuration is what can be checked in a unit test.
func TestHTTPServerLimits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	caPEM, _, err := certutil.GenerateSelfSignedCertKey("test-ca", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{NodeName: "limits", Listener: ln, Certificate: &tls.Certificate{}, ClientCA: caPEM,
		Client: fake.NewClientset(), Pods: noPods{}, Runtime: noRuntime{}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.http.IdleTimeout, 90*time.Second; got != want {
		t.Errorf("IdleTimeout %v, want %v (the kubelet's; 0 keeps idle connections forever)", got, want)
	}
	if got, want := s.http.MaxHeaderBytes, 1<<20; got != want {
		t.Errorf("MaxHeaderBytes %d, want %d (the kubelet's)", got, want)
	}
	if got, want := s.http.ReadHeaderTimeout, 10*time.Second; got != want {
		t.Errorf("ReadHeaderTimeout %v, want %v", got, want)
	}
}

type noPods struct{ PodLookup }

// noRuntime is a RuntimeService that is never called: New only checks
// that there is one.
type noRuntime struct{ internalapi.RuntimeService }

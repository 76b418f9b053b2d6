package node

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// apiserverSlice is the "kubernetes" EndpointSlice as kube-apiserver
// writes it with --advertise-address=ip (kind: the control-plane
// container's address on the Docker network).
func apiserverSlice(ip string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "kubernetes", Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](6443), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
}

// thisMachine is an address of this machine that is not loopback: the
// one of the default route, as `ip -4 route get 1.1.1.1` shows it.
func thisMachine(t *testing.T) net.IP {
	ip, err := utilnet.ResolveBindAddress(net.IPv4zero)
	if err != nil || ip.IsLoopback() {
		t.Skipf("this machine has no address besides loopback (%v): nothing to route to", err)
	}
	return ip
}

// TestChooseNodeIPLab00: lab 00's apiserver advertises nothing (its
// endpoint reconciler is off) and is on 127.0.0.1, where the kubeconfig
// points: the route stays on loopback, so our labs' nodes publish
// 127.0.0.1 as they always did there — and lab 01, whose real kubelet
// refuses loopback, gets the default route's address, as before.
func TestChooseNodeIPLab00(t *testing.T) {
	c, err := ChooseNodeIP(context.Background(), fake.NewClientset(), "https://127.0.0.1:6443", true)
	if err != nil {
		t.Fatal(err)
	}
	if !c.IP.Equal(net.IPv4(127, 0, 0, 1)) || c.DefaultRoute {
		t.Errorf("lab 00, loopback allowed: %s; want 127.0.0.1", c)
	}
	if want := "127.0.0.1, this machine's address on the route to the apiserver at 127.0.0.1:6443 (the kubeconfig's server; EndpointSlice default/kubernetes lists no address)"; c.String() != want {
		t.Errorf("the lab prints\n  %s\nwant\n  %s", c, want)
	}

	want := thisMachine(t)
	c, err = ChooseNodeIP(context.Background(), fake.NewClientset(), "https://127.0.0.1:6443", false)
	if err != nil {
		t.Fatal(err)
	}
	if !c.IP.Equal(want) || !c.DefaultRoute {
		t.Errorf("lab 00, loopback refused: %s; want %s, the default route's address (lab 01 until now)", c, want)
	}
	if !strings.Contains(c.String(), "the default route's address: the route to the apiserver at 127.0.0.1:6443") {
		t.Errorf("the lab prints %q; want it to say the default route's address was taken", c)
	}
}

// TestChooseNodeIPAdvertised: the kind case. The kubeconfig says
// 127.0.0.1 (a Docker port forward), the apiserver advertises where it
// really is: the node publishes this machine's address on the route to
// that — here an address of this machine itself, so the route's source is
// that address.
func TestChooseNodeIPAdvertised(t *testing.T) {
	ip := thisMachine(t)
	admin := fake.NewClientset(apiserverSlice(ip.String()))
	for _, allowLoopback := range []bool{true, false} {
		c, err := ChooseNodeIP(context.Background(), admin, "https://127.0.0.1:40123", allowLoopback)
		if err != nil {
			t.Fatal(err)
		}
		if !c.IP.Equal(ip) || c.DefaultRoute {
			t.Errorf("advertised %s, loopback allowed %v: chose %s; want %s", ip, allowLoopback, c, ip)
		}
		if want := ip.String() + ", this machine's address on the route to the apiserver at " + ip.String() + ":6443 (advertised in EndpointSlice default/kubernetes)"; c.String() != want {
			t.Errorf("the lab prints\n  %s\nwant\n  %s", c, want)
		}
	}

	// An endpoint that is not ready is not where the apiserver is.
	notReady := apiserverSlice("203.0.113.7")
	notReady.Endpoints[0].Conditions.Ready = ptr.To(false)
	c, err := ChooseNodeIP(context.Background(), fake.NewClientset(notReady), "https://127.0.0.1:6443", true)
	if err != nil || !c.IP.IsLoopback() {
		t.Errorf("only a not-ready endpoint: %s, %v; want the kubeconfig's server, 127.0.0.1", c, err)
	}
}

// TestChooseNodeIPNoRoute: an apiserver this machine has no route to is a
// one-line error at once, naming the address and the kernel's answer.
// (fe80::1 on the loopback interface: no link-local route there, on any
// Linux; with IPv6 off the kernel refuses the family, an error too.)
func TestChooseNodeIPNoRoute(t *testing.T) {
	_, err := ChooseNodeIP(context.Background(), fake.NewClientset(), "https://[fe80::1%25lo]:6443", true)
	if err == nil {
		t.Fatal("no route to the apiserver, and no error")
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "no route from this machine to the apiserver (the kubeconfig's server; EndpointSlice default/kubernetes lists no address): [fe80::1%lo]:6443: ") || strings.Contains(msg, "\n") {
		t.Errorf("error %q; want one line naming the apiserver's address and why", msg)
	}
}

// TestChooseNodeIPCannotRead: without the EndpointSlice there is no
// telling where the apiserver is; the error says what could not be read.
func TestChooseNodeIPCannotRead(t *testing.T) {
	admin := fake.NewClientset()
	admin.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New(`endpointslices.discovery.k8s.io is forbidden: User "bob" cannot list resource "endpointslices"`)
	})
	_, err := ChooseNodeIP(context.Background(), admin, "https://127.0.0.1:6443", true)
	if err == nil || !strings.HasPrefix(err.Error(), `read the "kubernetes" EndpointSlice in namespace default, where the apiserver advertises its address: `) {
		t.Errorf("error %v; want it to name the EndpointSlice it could not read", err)
	}
}

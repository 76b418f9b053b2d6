package labnode

import (
	"context"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/state"
)

// The flags of a node without a server: the lab's defaults, then what the
// learner typed; Check refuses what the kubelet could not run with.
func TestFlags(t *testing.T) {
	o := Defaults("99-test", "lab-node-99")
	o.Kubelet.BackOffInitial = time.Second
	fs := flag.NewFlagSet("lab", flag.ContinueOnError)
	o.Register(fs)
	if err := fs.Parse([]string{"--node-name", "n1", "--relist-period", "2s", "--runtime", "mock"}); err != nil {
		t.Fatal(err)
	}
	if o.Name != "n1" || o.Kubelet.RelistPeriod != 2*time.Second || o.Kubelet.BackOffInitial != time.Second || o.Runtime.Kind != "mock" || o.Server != nil {
		t.Errorf("after the flags: %+v", o)
	}
	if err := o.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	for _, tc := range []struct {
		flag, want string
	}{
		{"--relist-period=0", "--relist-period"},
		{"--backoff-max=1ms", "--backoff-max"},
		{"--gc-period=-1s", "--gc-period"},
		{"--node-name=Bad_Name", "not a valid Node name"},
	} {
		o := Defaults("99-test", "lab-node-99")
		fs := flag.NewFlagSet("lab", flag.ContinueOnError)
		o.Register(fs)
		if err := fs.Parse([]string{tc.flag}); err != nil {
			t.Fatal(err)
		}
		if err := o.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Check says %v, want an error naming %q", tc.flag, err, tc.want)
		}
	}
}

// Start refuses what it cannot run with before it opens, listens on or
// registers anything: no control plane is needed to see these.
func TestStartRefusesBeforeAnything(t *testing.T) {
	t.Setenv(state.EnvVar, t.TempDir())
	base := Defaults("99-test", "lab-node-99")
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"no timeout", func(o *Options) { o.Timeout = 0 }, "--timeout"},
		{"back-off max below initial", func(o *Options) { o.Kubelet.BackOffMax = time.Millisecond }, "--backoff-max 1ms is below --backoff-initial 10s"},
		{"bad node name", func(o *Options) { o.Name = "../x" }, "not a valid Node name"},
		{"bad address", func(o *Options) { o.Server = &ServerOptions{Address: "localhost"} }, `--address "localhost" is not an IP address`},
		{"node IP elsewhere", func(o *Options) { o.Server = &ServerOptions{Address: "127.0.0.1", NodeIP: "10.1.2.3"} }, "--node-ip 10.1.2.3 but --address 127.0.0.1"},
		{"unknown runtime", func(o *Options) { o.Runtime.Kind = "docker" }, `--runtime "docker"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.edit(&o)
			n, err := Start(context.Background(), o, labenv.NewPrinter(io.Discard))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				if n != nil {
					n.Close()
				}
				t.Fatalf("Start: %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

// What the server's flags decide, and what they leave to the route to the
// apiserver (nil): with neither flag both; with --address 0.0.0.0 the IP.
func TestServerAddresses(t *testing.T) {
	for _, tc := range []struct{ address, nodeIP, listen, ip string }{
		{"", "", "<nil>", "<nil>"},
		{"", "10.0.0.5", "10.0.0.5", "10.0.0.5"},
		{"127.0.0.1", "", "127.0.0.1", "127.0.0.1"},
		{"0.0.0.0", "", "0.0.0.0", "<nil>"},
		{"0.0.0.0", "10.0.0.5", "0.0.0.0", "10.0.0.5"},
		{"10.0.0.5", "10.0.0.5", "10.0.0.5", "10.0.0.5"},
	} {
		listen, ip, err := serverAddresses(tc.address, tc.nodeIP)
		if err != nil || listen.String() != tc.listen || ip.String() != tc.ip {
			t.Errorf("--address %q --node-ip %q: listen %v, publish %v (%v); want %s, %s", tc.address, tc.nodeIP, listen, ip, err, tc.listen, tc.ip)
		}
	}
}

package main

import (
	"strings"
	"testing"
)

// Bad configuration is refused at start with one line naming the variable
// (main exits 1 with it), where kind panics or writes a broken config.
func TestParseConfig(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, c := range []struct {
		env  func(string) string
		want string
	}{
		{env(), `HOST_IP="" is not an IP address`},
		{env("HOST_IP", "node1"), `HOST_IP="node1" is not an IP address`},
		{env("HOST_IP", "172.18.0.2"), "POD_SUBNET is not set"},
		{env("HOST_IP", "172.18.0.2", "POD_SUBNET", "10.244.0.0/16,10.300.0.0/16"), `"10.300.0.0/16" is not a CIDR`},
		{env("HOST_IP", "172.18.0.2", "POD_SUBNET", "10.244.0.0/16", "CONTROL_PLANE_ENDPOINT", "cp"), `CONTROL_PLANE_ENDPOINT="cp" is not host:port`},
	} {
		_, err := parseConfig(c.env)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("parseConfig: %v; want one line with %q", err, c.want)
		}
	}
	cfg, err := parseConfig(env("HOST_IP", "172.18.0.2", "POD_SUBNET", " 10.244.0.0/16, fd00:10:244::/56 ", "CONTROL_PLANE_ENDPOINT", "kind-control-plane:6443"))
	if err != nil || cfg.hostIP.String() != "172.18.0.2" || len(cfg.podSubnets) != 2 || cfg.endpoint != "kind-control-plane:6443" {
		t.Errorf("parseConfig of kind's environment: %+v, %v", cfg, err)
	}
}

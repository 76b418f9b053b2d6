package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kubelet-labs/internal/testenv"
)

// TestClusterDNSFlagErrors: a bad --cluster-dns or --cluster-domain is a
// usage error — one line that names the flag, exit 2 — before the lab
// reads a kubeconfig or makes the node's folder. Good ones (IPv4 and IPv6,
// spaces after the commas) pass, and reach the kubelet as its clusterDNS.
func TestClusterDNSFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		o    options
		want string
	}{
		{options{clusterDNS: "10.0.0.10,ten"}, `--cluster-dns "ten" is not an IP address: want comma-separated IPs, e.g. 10.0.0.10`},
		{options{clusterDNS: "10.0.0.10,"}, `--cluster-dns "" is not an IP address`},
		{options{clusterDomain: "Cluster_Local"}, `--cluster-domain "Cluster_Local" is not a DNS domain`},
	} {
		if err := tc.o.check(); err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("--cluster-dns %q --cluster-domain %q: %v, want one line that starts %q", tc.o.clusterDNS, tc.o.clusterDomain, err, tc.want)
		}
	}
	ok := options{clusterDNS: "10.0.0.10, fd00::a", clusterDomain: "cluster.local"}
	if err := ok.check(); err != nil {
		t.Errorf("--cluster-dns %q --cluster-domain %q: %v", ok.clusterDNS, ok.clusterDomain, err)
	}
	if ips, _ := ok.clusterDNSIPs(); strings.Join(ips, ",") != "10.0.0.10,fd00::a" {
		t.Errorf("--cluster-dns %q gives the kubelet clusterDNS %q, want [10.0.0.10 fd00::a]", ok.clusterDNS, ips)
	}

	// As the learner sees it: the program exits 2 with that line, and
	// no cluster is needed to be told (the kubeconfig here does not exist).
	bin := testenv.BuildLab(t, "./labs/01-fake-node")
	state := t.TempDir()
	out, code := testenv.RunProgram(t, bin, []string{"LABS_STATE_DIR=" + state, "KUBECONFIG=" + filepath.Join(state, "missing")},
		"--cluster-dns=10.0.0.10,ten", "--cluster-domain=cluster.local")
	want := `error: --cluster-dns "ten" is not an IP address: want comma-separated IPs, e.g. 10.0.0.10` + "\n"
	if code != 2 || out != want {
		t.Errorf("--cluster-dns=10.0.0.10,ten: exit %d, output %q; want exit 2, output %q", code, out, want)
	}
	if entries, _ := os.ReadDir(state); len(entries) != 0 {
		t.Errorf("a refused flag left files in the state folder: %v", entries)
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
)

// cniConfigPath is where containerd's CRI plugin looks for a network
// config (kind cni.go:80-81): until it is there, no pod gets a sandbox.
const cniConfigPath = "/etc/cni/net.d/10-kindnet.conflist"

// conflist is the config kind's template writes (kind cni.go:83-121),
// encoded as JSON rather than filled into text: a ptp veth per pod, addresses
// from host-local over the node's podCIDRs, a default route per family,
// and portmap for hostPort. ipMasq is off: masq.go does that, once, for
// the whole node.
func conflist(podCIDRs []netip.Prefix, mtu int) ([]byte, error) {
	type obj = map[string]any // encoding/json sorts the keys: a stable file
	var routes, ranges []any
	seen := map[bool]bool{} // IPv6?
	for _, p := range podCIDRs {
		ranges = append(ranges, []obj{{"subnet": p.String()}})
		// kind cni.go:43-62: a default route for each family the node has
		if v6 := p.Addr().Is6(); !seen[v6] {
			seen[v6] = true
			routes = append(routes, obj{"dst": map[bool]string{false: "0.0.0.0/0", true: "::/0"}[v6]})
		}
	}
	ptp := obj{
		"type":   "ptp",
		"ipMasq": false,
		"ipam": obj{
			"type":    "host-local",
			"dataDir": "/run/cni-ipam-state",
			"routes":  routes,
			"ranges":  ranges,
		},
	}
	if mtu > 0 { // else the kernel's default (kind cni.go:65-66)
		ptp["mtu"] = mtu
	}
	b, err := json.MarshalIndent(obj{
		"cniVersion": "0.3.1",
		"name":       "kindnet",
		"plugins":    []obj{ptp, {"type": "portmap", "capabilities": obj{"portMappings": true}}},
	}, "", "\t")
	return append(b, '\n'), err
}

// eth0MTU is the MTU of the node's link to the others, for the pods' veths
// (kind cni.go:65-78): the docker network's MTU may be below 1500. Zero
// (the kernel's default) if there is no eth0.
func eth0MTU() int {
	if i, err := net.InterfaceByName("eth0"); err == nil {
		return i.MTU
	}
	return 0
}

// cniWriter writes the config when it changes.
type cniWriter struct {
	path string
	mtu  int
}

// write mirrors kind cni.go:131-163: the file appears whole or not at all
// (a temporary file with an extension CNI does not read, then a rename),
// because containerd reloads the folder whenever it changes. Unlike kind's
// fixed name ".temp", CreateTemp never follows a link someone left there.
// It reports whether the file changed.
func (w *cniWriter) write(podCIDRs []netip.Prefix) (bool, error) {
	want, err := conflist(podCIDRs, w.mtu)
	if err != nil {
		return false, err
	}
	if have, err := os.ReadFile(w.path); err == nil && bytes.Equal(have, want) {
		return false, nil
	}
	f, err := os.CreateTemp(filepath.Dir(w.path), filepath.Base(w.path)+".*.temp")
	if err != nil {
		return false, err
	}
	defer os.Remove(f.Name()) // after the rename: nothing to remove
	_, err = f.Write(want)
	// 0644 as kind's os.Create makes it, not CreateTemp's 0600
	if err = errors.Join(err, f.Chmod(0o644), f.Sync(), f.Close()); err != nil {
		return false, err
	}
	return true, os.Rename(f.Name(), w.path)
}

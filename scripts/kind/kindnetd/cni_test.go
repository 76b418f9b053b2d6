package main

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

// The config is the one kind's template writes (testdata holds it, checked
// against kind cni.go:83-121 rendered with the same inputs): containerd
// reads this file, so every field counts.
func TestConflistIsKindsConfig(t *testing.T) {
	for _, c := range []struct {
		golden string
		cidrs  []string
		mtu    int
	}{
		{"single-stack.conflist", []string{"10.244.0.0/24"}, 1500},
		{"dual-stack.conflist", []string{"10.244.1.0/24", "fd00:10:244:1::/64"}, 0},
	} {
		var cidrs []netip.Prefix
		for _, s := range c.cidrs {
			cidrs = append(cidrs, netip.MustParsePrefix(s))
		}
		got, err := conflist(cidrs, c.mtu)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("testdata", c.golden))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("conflist(%v, mtu %d):\n%s\nwant testdata/%s:\n%s", c.cidrs, c.mtu, got, c.golden, want)
		}
	}
}

// The file is written whole, with the mode containerd expects, once: a
// second pass with the same podCIDRs leaves it alone, and no temporary
// file is left behind for CNI to trip over.
func TestCNIWriterWritesOnceAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	w := cniWriter{path: filepath.Join(dir, "10-kindnet.conflist"), mtu: 1500}
	cidrs := []netip.Prefix{netip.MustParsePrefix("10.244.0.0/24")}
	for i, want := range []bool{true, false} {
		wrote, err := w.write(cidrs)
		if err != nil || wrote != want {
			t.Fatalf("write #%d: wrote %v, %v; want %v, nil", i+1, wrote, err, want)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("folder holds %v, want only 10-kindnet.conflist", entries)
	}
	st, err := os.Stat(w.path)
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("stat: %v, %v; want mode 0644", st, err)
	}
	golden, _ := os.ReadFile("testdata/single-stack.conflist")
	if got, _ := os.ReadFile(w.path); string(got) != string(golden) {
		t.Errorf("wrote:\n%s\nwant testdata/single-stack.conflist", got)
	}
	// a new podCIDR (the node was re-created) is written again
	if wrote, err := w.write([]netip.Prefix{netip.MustParsePrefix("10.244.3.0/24")}); !wrote || err != nil {
		t.Errorf("write of a changed podCIDR: wrote %v, %v; want true, nil", wrote, err)
	}
}

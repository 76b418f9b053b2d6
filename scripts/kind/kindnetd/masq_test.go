package main

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

const (
	returnComment = "kind-masq-agent: local traffic is not subject to MASQUERADE"
	masqComment   = "kind-masq-agent: outbound traffic is subject to MASQUERADE (must be last in chain)"
	jumpComment   = "kind-masq-agent: ensure nat POSTROUTING directs all non-LOCAL destination traffic to our custom KIND-MASQ-AGENT chain"
)

// kind masq.go:104-117's rules, argument for argument, in order: what
// `iptables -t nat -S` shows on the node is what it shows in any kind
// cluster.
func TestMasqRules(t *testing.T) {
	got := masqRules([]netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")})
	want := [][]string{
		{"KIND-MASQ-AGENT", "-d", "10.244.0.0/16", "-j", "RETURN", "-m", "comment", "--comment", returnComment},
		{"KIND-MASQ-AGENT", "-j", "MASQUERADE", "-m", "comment", "--comment", masqComment},
		{"POSTROUTING", "-m", "addrtype", "!", "--dst-type", "LOCAL", "-j", "KIND-MASQ-AGENT", "-m", "comment", "--comment", jumpComment},
	}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("masqRules:\n got %q\nwant %q", got, want)
	}
}

// fakeIPTables is the nat table as iptables would answer: -S/-N for the
// chain, -C/-A for rules (exit 1: no such chain or rule).
type fakeIPTables struct {
	chain bool
	rules []string
	calls []string
}

func (f *fakeIPTables) run(args ...string) (int, string) {
	f.calls = append(f.calls, strings.Join(args, " "))
	rule := strings.Join(args[1:], " ")
	switch args[0] {
	case "-S":
		if !f.chain {
			return 1, "iptables: No chain/target/match by that name."
		}
	case "-N":
		f.chain = true
	case "-C":
		if !slices.Contains(f.rules, rule) {
			return 1, "iptables: Bad rule (does a matching rule exist in that chain?)."
		}
	case "-A":
		f.rules = append(f.rules, rule)
	}
	return 0, ""
}

// The first sync makes the chain and the three rules; the next adds
// nothing (kind's AppendUnique): resyncing every minute never piles up
// rules. A real error (exit 2, say a missing extension) is one line.
func TestSyncMasqIsIdempotent(t *testing.T) {
	f := &fakeIPTables{}
	pods := []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
	for range 2 {
		if err := syncMasq(f.run, pods); err != nil {
			t.Fatal(err)
		}
	}
	if !f.chain || len(f.rules) != 3 {
		t.Fatalf("after two syncs: chain %v, rules %q; want the chain and 3 rules", f.chain, f.rules)
	}
	var appends int
	for _, c := range f.calls {
		if strings.HasPrefix(c, "-A ") || strings.HasPrefix(c, "-N ") {
			appends++
		}
	}
	if appends != 4 {
		t.Errorf("calls %q: want one -N and three -A in all", f.calls)
	}
	broken := func(args ...string) (int, string) {
		return 2, "iptables v1.8.9 (legacy): Couldn't load match `addrtype'"
	}
	err := syncMasq(broken, pods)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "Couldn't load match") {
		t.Errorf("with a broken iptables: %v; want one line with iptables' message", err)
	}
}

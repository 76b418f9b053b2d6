package readmerun

import (
	"strings"
	"testing"
)

func TestNormalise(t *testing.T) {
	for in, want := range map[string]string{
		"control plane (Kubernetes v1.36.3) ready in 2.9s":                   "control plane (Kubernetes v<n>.<n>) ready in <dur>",
		"12:01:02.345 PLEG  ContainerDied  c7b7d3b7cbacd  (1.5ms)":           "<time> PLEG ContainerDied <n> (<dur>)",
		"pod web uid 3f1c2a4e-1b2c-4d5e-8f90-123456789abc on 10.231.22.7/24": "pod web uid <uid> on <ip>",
		"  apiserver   https://127.0.0.1:6443":                               "apiserver https://<ip>:<n>",
		"back-off 1m20s restarting failed container":                         "back-off <dur> restarting failed container",
		"deadbeef facade":                                        "deadbeef facade",
		"[ 9.87s] Node lab-node-05 created":                      "[<dur>] Node lab-node-<n> created",
		"[10.02s] Node lab-node-05 created":                      "[<dur>] Node lab-node-<n> created",
		"1df1ee46363a4   Less than a second ago   Running   app": "<n> <ago> Running app",
		"d7ca220aec182   3 seconds ago   Running   app":          "<n> <ago> Running app",
		"d7ca220aec182   About a minute ago   Running   app":     "<n> <ago> Running app",
		// a hash prefix that happens to be all digits matches one that is not
		"kubernetes.io/config.mirror=56803245, owner Node/n": "kubernetes.io/config.mirror=<n>, owner Node/n",
		"kubernetes.io/config.mirror=d8dc5a56, owner Node/n": "kubernetes.io/config.mirror=<n>, owner Node/n",
		// the live view's token differs each run
		"view      http://127.0.0.1:41285/?token=eW3hRyi42Dbf6wKum_C4E2NA7prmlRwR   (the live view)": "view http://<ip>:<n>/?token=<token> (the live view)",
	} {
		if got := Normalise(in); got != want {
			t.Errorf("Normalise(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMatch(t *testing.T) {
	actual := "building\nready in 3.1s\n  apiserver https://127.0.0.1:6443\nnoise\nbye 2\n"
	for _, tc := range []struct {
		shown string
		ok    bool
	}{
		{"ready in 2.9s\n...\nbye 7\n", true},
		{"ready in 2.9s\n  apiserver https://127.0.0.1:16443\n", true},
		{"bye 2\nready in 2s\n", false}, // order matters
		{"ready in 2.9s\nnot printed\n", false},
		{"", true},
	} {
		err := Match(tc.shown, actual)
		if (err == nil) != tc.ok {
			t.Errorf("Match(%q): %v, want ok=%v", tc.shown, err, tc.ok)
		}
	}
}

func TestParse(t *testing.T) {
	md := strings.Join([]string{
		"# lab", "",
		"<!-- run: background ready=\"ready in\" session timeout=20m -->", "```sh", "go run ./labs/00-cluster", "```",
		"<!-- output -->", "```text", "ready in 2.9s", "```",
		"<!-- run -->", "```sh", "kubectl get nodes", "```",
		"<!-- run: exit=1 lab00 -->", "```sh", "go run ./labs/03-bootstrap-token --token nope", "```",
		"<!-- run: skip reason=\"needs a VM\" -->", "```sh", "limactl start vm.yaml", "```",
		"```text", "not checked", "```",
	}, "\n")
	blocks, err := Parse([]byte(md))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 4 {
		t.Fatalf("%d blocks, want 4: %+v", len(blocks), blocks)
	}
	b := blocks[0]
	if b.Kind != Background || b.Ready != "ready in" || !b.Session || b.Timeout.Minutes() != 20 || b.Output == nil || *b.Output != "ready in 2.9s\n" {
		t.Errorf("block 1: %+v", b)
	}
	if blocks[1].Lab00 || !blocks[2].Lab00 {
		t.Errorf("only block 3 is marked lab00: %+v %+v", blocks[1], blocks[2])
	}
	if blocks[2].Exit != 1 || blocks[3].Kind != Skip || blocks[3].Reason != "needs a VM" {
		t.Errorf("blocks 3-4: %+v %+v", blocks[2], blocks[3])
	}

	for _, bad := range []string{
		"```sh\nkubectl get nodes\n```\n",                                             // no marker
		"<!-- run: background -->\n```sh\nx\n```\n",                                   // no ready text
		"<!-- run: skip -->\n```sh\nx\n```\n",                                         // no reason
		"<!-- run: exit=x -->\n```sh\nx\n```\n",                                       // bad exit
		"<!-- run: nope -->\n```sh\nx\n```\n",                                         // unknown option
		"intro\n<!-- output -->\n```text\nx\n```\n",                                   // output of nothing
		"<!-- run -->\n```sh\nx\n```\nsome words\n<!-- output -->\n```text\ny\n```\n", // output not right after? words between are fine
	}[:6] {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse accepted %q", bad)
		}
	}
}

func TestSameBlocks(t *testing.T) {
	en, _ := Parse([]byte("<!-- run -->\n```sh\nkubectl get nodes\n```\n<!-- output -->\n```text\nNAME\n```\n"))
	zh, _ := Parse([]byte("中文\n<!-- run -->\n```sh\nkubectl get nodes\n```\n<!-- output -->\n```text\nNAME\n```\n"))
	if err := SameBlocks(en, zh); err != nil {
		t.Errorf("same blocks refused: %v", err)
	}
	old, _ := Parse([]byte("<!-- run -->\n```sh\nkubectl get node\n```\n"))
	if err := SameBlocks(en, old); err == nil {
		t.Error("a different command accepted")
	}
}

func TestBlockAfter(t *testing.T) {
	md := []byte(strings.Join([]string{
		"# lab", "",
		"<!-- run -->", "```sh", "echo first", "```",
		"## By hand", "",
		"```text", "not a command", "```",
		"<!-- run: exit=1 -->", "```sh", "echo by hand", "```",
		"## Later", "",
		"<!-- run -->", "```sh", "echo later", "```",
	}, "\n"))
	b, err := blockAfter(md, "## By hand")
	if err != nil || b.Script != "echo by hand\n" || b.Exit != 1 {
		t.Errorf("after ## By hand: %+v, %v; want the exit=1 block", b, err)
	}
	if _, err := blockAfter(md, "## By han"); err == nil {
		t.Error("a heading that is only part of a line was found")
	}
	if _, err := blockAfter(append(md, "\n## Last\n\nno block\n"...), "## Last"); err == nil {
		t.Error("a block was found after the last heading, which has none")
	}
}

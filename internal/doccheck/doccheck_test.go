package doccheck

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"kubelet-labs/internal/state"
)

// TestEveryReferenceExists: every relative link, anchor, path of ours, lab
// name and go run/test target in docs/ and the READMEs, both languages;
// and every English page has its zh-CN twin.
func TestEveryReferenceExists(t *testing.T) {
	fsys := os.DirFS("../..")
	pages, err := Pages(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 45 {
		t.Fatalf("found %d pages, want at least the root READMEs, docs/ and 19 labs × 2: %v", len(pages), pages)
	}
	problems, stats := Check(fsys, pages)
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("checked %d pages: %d relative links (%d with an anchor), %d paths, %d go targets, %d lab names, %d zh-CN twins; %d links to other sites not checked",
		stats.Pages, stats.Links, stats.Anchors, stats.Paths, stats.GoTargets, stats.LabNames, stats.Twins, stats.External)
	// a check that finds nothing to check is broken, not passing
	if stats.Links < 100 || stats.Anchors < 10 || stats.Paths < 500 || stats.GoTargets < 100 || stats.LabNames < 40 || stats.Twins < 23 {
		t.Errorf("checked too little: %+v", stats)
	}
}

// TestCheckFindsBrokenReferences: each broken page of the table gives
// exactly the problem it is made for; the good page gives none.
func TestCheckFindsBrokenReferences(t *testing.T) {
	base := fstest.MapFS{
		"labs/07-pleg/main.go":          {Data: []byte("package main\n")},
		"labs/07-pleg/plegview/view.go": {Data: []byte("package plegview\n")},
		"mycore/node/node.go":           {Data: []byte("package node\n\nfunc Register() {}\n\ntype Config struct{}\n")},
		"docs/target.md":                {Data: []byte("# Target\n\n## Run it — as you\n\n## Run it — as you\n\n## `kubectl exec`: who is who?\n")},
		"docs/target.zh-CN.md":          {Data: []byte("# 目标\n\n## 运行（以你自己的身份）\n\n## 运行（以你自己的身份）\n\n## `kubectl exec`：谁是谁？\n")},
		"docs/good.zh-CN.md":            {Data: []byte("# 好\n")},
		"labs/07-pleg/README.zh-CN.md":  {Data: []byte("# 07\n")},
	}
	good := "# Good\n\n" +
		"[the target](target.md), [its run](target.md#run-it--as-you), [again](target.md#run-it--as-you-1),\n" +
		"[exec](target.md#kubectl-exec-who-is-who), [中文](target.zh-CN.md#运行以你自己的身份),\n" +
		"[encoded](target.zh-CN.md#%E8%BF%90%E8%A1%8C%E4%BB%A5%E4%BD%A0%E8%87%AA%E5%B7%B1%E7%9A%84%E8%BA%AB%E4%BB%BD-1), [self](#good),\n" +
		"[a site](https://kubernetes.io/docs/), [the lab](../labs/07-pleg).\n\n" +
		"`go run ./labs/07-pleg`, `go run labs/07-pleg/main.go`, `mycore/node.Register`, `mycore/node.Config`,\n" +
		"`labs/NN-name/main.go` (a pattern), `pkg/kubelet/pleg/generic.go` (upstream), lab 07-pleg, 07.\n\n" +
		"```sh\ngo test -race ./labs/07-pleg/... ./mycore/node   # go test ./nosuch in a comment\n```\n"
	cases := []struct {
		name, file, page string
		want             string // the problem's text, in part
	}{
		{"good", "docs/good.md", good, ""},
		{"missing file", "docs/good.md", "# Good\n\n[vm](vm.md)\n", `link "vm.md": docs/vm.md does not exist`},
		{"outside", "docs/good.md", "# Good\n\n[up](../../x.md)\n", "points outside the repository"},
		{"missing anchor", "docs/good.md", "# Good\n\n[run](target.md#run-it)\n", "has no heading with the anchor #run-it"},
		{"wrong Chinese anchor", "docs/good.md", "# Good\n\n[运行](target.zh-CN.md#运行)\n", "has no heading with the anchor #运行"},
		{"missing self anchor", "docs/good.md", "# Good\n\n[see](#bad)\n", "docs/good.md has no heading with the anchor #bad"},
		{"anchor in code", "docs/good.md", "# Good\n\n[main](../labs/07-pleg/main.go#run)\n", "which is not a Markdown page"},
		{"go run package", "docs/good.md", "# Good\n\n```sh\ngo run ./labs/99-nope\n```\n", "go run ./labs/99-nope: labs/99-nope does not exist"},
		{"go run file", "docs/good.md", "# Good\n\n`go run labs/07-pleg/mian.go`\n", "labs/07-pleg/mian.go does not exist"},
		{"go test", "docs/good.md", "# Good\n\n`go test -count=1 ./mycore/nosuch/...`\n", "go test ./mycore/nosuch/...: mycore/nosuch does not exist"},
		{"path", "docs/good.md", "# Good\n\nsee `mycore/lease/lease.go`\n", "mycore/lease/lease.go does not exist"},
		{"go name", "docs/good.md", "# Good\n\n`mycore/node.Registr`\n", "package mycore/node declares no Registr"},
		{"lab name", "docs/good.md", "# Good\n\nlab 07-plegg\n", "lab 07 is 07-pleg, not 07-plegg"},
		{"lab folder", "labs/07-pleg/README.md", "# 07\n\n`plegview/veiw.go`\n", "plegview/veiw.go does not exist (in labs/07-pleg)"},
		{"no twin", "docs/alone.md", "# Alone\n", "no zh-CN twin: docs/alone.zh-CN.md does not exist"},
		{"twin headings", "docs/target.md", "# Target\n\n## One\n", "2 headings, but docs/target.zh-CN.md has 4"},
		{"twin mermaid", "docs/good.md", "# Good\n\n```mermaid\nflowchart TD\n  a --> b\n```\n", "1 mermaid blocks, but docs/good.zh-CN.md has 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for k, v := range base {
				fsys[k] = v
			}
			fsys[tc.file] = &fstest.MapFile{Data: []byte(tc.page)}
			problems, _ := Check(fsys, []string{tc.file})
			if tc.want == "" {
				for _, p := range problems {
					t.Errorf("a good page gave: %s", p)
				}
				return
			}
			if len(problems) != 1 || !strings.Contains(problems[0].String(), tc.want) {
				t.Errorf("want one problem with %q, got %q", tc.want, problems)
			}
		})
	}
}

// TestPagesCoverBenchmarkRecords: a tool's record beside its README
// (hack/fleetbench/BENCHMARKS.md, moved there from lab 18) is checked as
// its README is: its links point into the labs and back.
func TestPagesCoverBenchmarkRecords(t *testing.T) {
	fsys := fstest.MapFS{
		"hack/fleetbench/README.md":           {Data: []byte("# fleetbench\n")},
		"hack/fleetbench/BENCHMARKS.md":       {Data: []byte("# record\n")},
		"hack/fleetbench/BENCHMARKS.zh-CN.md": {Data: []byte("# 记录\n")},
		"hack/fleetbench/notes.md":            {Data: []byte("# not a page of the course\n")},
	}
	pages, err := Pages(fsys)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"hack/fleetbench/BENCHMARKS.md", "hack/fleetbench/BENCHMARKS.zh-CN.md", "hack/fleetbench/README.md"}
	if !slices.Equal(pages, want) {
		t.Errorf("Pages = %v, want %v", pages, want)
	}
}

// TestSlug: GitHub's anchors for headings the course has.
func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Lab 00 — an embedded, real control plane":          "lab-00--an-embedded-real-control-plane",
		"`kubectl describe node`: what the kubelet reports": "kubectl-describe-node-what-the-kubelet-reports",
		"Root, once":                                    "root-once",
		"1.17 → 1.36":                                   "117--136",
		"5. WebSocket v5 or SPDY?":                      "5-websocket-v5-or-spdy",
		"Upstream files it mirrors (v1.36.3)":           "upstream-files-it-mirrors-v1363",
		"`get nodes/proxy` is not read-only":            "get-nodesproxy-is-not-read-only",
		"[Lab 07](../labs/07-pleg/README.md): the PLEG": "lab-07-the-pleg",
		"根权限，只需一次":                                      "根权限只需一次",
		"第 3 章：kubelet 的心脏（07-10、12-13）":                "第-3-章kubelet-的心脏07-1012-13",
		"运行（需要 `sudo scripts/containerd-up.sh`）":        "运行需要-sudo-scriptscontainerd-upsh",
		"snake_case stays":                              "snake_case-stays",
	} {
		if got := Slug(heading); got != want {
			t.Errorf("Slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// TestMermaidShapeRefusesBrokenBlocks: the shape check catches what a
// typo makes.
func TestMermaidShapeRefusesBrokenBlocks(t *testing.T) {
	for body, want := range map[string]string{
		"flowchart LR\n  a[\"A\"] --> b(B)\n":   "",
		"sequenceDiagram\n  A->>B: hi (there\n": "",
		"flowchrt LR\n  a --> b\n":              "want one of",
		"flowchart LR\n  a[\"A] --> b\n":        "quote does not close",
		"flowchart LR\n  a[A --> b\n":           "is not closed on its line",
		"flowchart LR\n  a[A]] --> b\n":         "closes nothing",
		"stateDiagram-v2\n\t[*] --> a\n":        "a tab",
		"sequenceDiagram\n  A->>B: one; two\n":  "ends a statement",
		"flowchart LR\n  a[\"one; two\"]\n":     "",
	} {
		err := MermaidShape(body)
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: %v", body, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: got %v, want an error with %q", body, err, want)
		}
	}
}

type block struct {
	where string
	body  string
}

func mermaidBlocks(t *testing.T) []block {
	fsys := os.DirFS("../..")
	pages, err := Pages(fsys)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []block
	for _, name := range pages {
		md, err := os.ReadFile(filepath.Join("../..", name))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range Mermaid(Parse(name, md)) {
			blocks = append(blocks, block{fmt.Sprintf("%s:%d", name, f.Line), f.Body})
		}
	}
	return blocks
}

// TestMermaidBlocksHaveTheirShape: every mermaid block of docs/ and the
// READMEs, without mermaid.
func TestMermaidBlocksHaveTheirShape(t *testing.T) {
	blocks := mermaidBlocks(t)
	for _, b := range blocks {
		if err := MermaidShape(b.body); err != nil {
			t.Errorf("%s: %v", b.where, err)
		}
	}
	t.Logf("%d mermaid blocks", len(blocks))
}

// TestMermaidBlocksRender: every mermaid block rendered by mermaid itself
// (mermaid-cli in Chromium), as GitHub would; all in one page, one browser.
// Without mermaid-cli it skips, saying how to install it; under CI=true it
// fails instead.
func TestMermaidBlocksRender(t *testing.T) {
	mmdc := os.Getenv("MMDC")
	if mmdc == "" {
		p, err := state.Path("mermaid-cli", "node_modules", ".bin", "mmdc")
		if err != nil {
			t.Fatal(err)
		}
		mmdc = p
	}
	browser := os.Getenv("PUPPETEER_EXECUTABLE_PATH")
	if browser == "" {
		browser, _ = exec.LookPath("chromium")
	}
	if _, err := os.Stat(mmdc); err != nil || browser == "" {
		msg := fmt.Sprintf("mermaid-cli (%s) or chromium missing: scripts/build-mermaid-cli.sh installs both; the shape of every block is still checked (TestMermaidBlocksHaveTheirShape)", mmdc)
		if os.Getenv("CI") != "" {
			t.Fatal("CI=true: " + msg)
		}
		t.Skip(msg)
	}
	blocks := mermaidBlocks(t)
	if len(blocks) == 0 {
		t.Fatal("no mermaid blocks found")
	}
	dir := t.TempDir()
	var md strings.Builder
	for _, b := range blocks {
		fmt.Fprintf(&md, "## %s\n\n```mermaid\n%s\n```\n\n", b.where, b.body)
	}
	in := filepath.Join(dir, "all.md")
	if err := os.WriteFile(in, []byte(md.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// Chromium refuses to run as root with its sandbox; the pages are
	// ours, the sandbox is not needed for them. No background networking:
	// this machine's network is closed, and nothing is fetched.
	cfg, _ := json.Marshal(map[string]any{"executablePath": browser, "args": []string{
		"--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync"}})
	pp := filepath.Join(dir, "puppeteer.json")
	if err := os.WriteFile(pp, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mmdc, "--quiet", "-p", pp, "-i", in, "-o", filepath.Join(dir, "out.md"))
	cmd.Env = append(os.Environ(), "HOME="+dir) // Chromium's profile, not the user's
	out, err := cmd.CombinedOutput()
	svgs, _ := filepath.Glob(filepath.Join(dir, "out-*.svg"))
	if err != nil {
		where := "?"
		if len(svgs) < len(blocks) {
			where = blocks[len(svgs)].where // mermaid-cli renders in order and stops at the first error
		}
		t.Fatalf("mermaid-cli: %v: the block at %s does not render:\n%s", err, where, firstLines(string(out), 12))
	}
	if len(svgs) != len(blocks) {
		t.Fatalf("mermaid-cli rendered %d of %d blocks:\n%s", len(svgs), len(blocks), out)
	}
	t.Logf("%d mermaid blocks rendered by %s", len(blocks), mmdc)
}

func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

package envcheck

import (
	"regexp"
	"strings"
	"testing"
)

// stateDirExpansion is how a README names the state folder in a command so
// that it works on both paths: `.labs/` at the repository root, or
// $LABS_STATE_DIR (the VM sets ~/.labs, outside its read-only mount).
var stateDirExpansion = regexp.MustCompile(`\$\{LABS_STATE_DIR:-[^}]*\}`)

// vmStateDir is the VM's own state folder, which docs/vm.md names on
// purpose in commands that only run in the VM.
var vmStateDir = regexp.MustCompile(`(~|\$HOME)/\.labs\b`)

// bareStateDir finds .labs used as a path (not part of a longer name).
var bareStateDir = regexp.MustCompile(`(^|[^\w.-])\.labs\b`)

// TestCommandsUseTheStateFolder: no command in a README's shell blocks
// (```sh, ```bash, and the "$ " lines of ```console) hard-codes .labs/: in
// the VM the repository is read-only and the state lives in
// $LABS_STATE_DIR, so such a command fails there. Comments and expected
// output may show paths; commands write "${LABS_STATE_DIR:-.labs}".
func TestCommandsUseTheStateFolder(t *testing.T) {
	for _, rel := range markdownFiles(t) {
		for _, c := range shellCommands(string(readRepoFile(t, rel))) {
			if bad := bareStateDirIn(c.text); bad {
				t.Errorf("%s:%d: command hard-codes .labs (use \"${LABS_STATE_DIR:-.labs}\"): %s", rel, c.line, c.text)
			}
		}
	}
}

func bareStateDirIn(cmd string) bool {
	cmd = stateDirExpansion.ReplaceAllString(cmd, "STATE")
	return bareStateDir.MatchString(vmStateDir.ReplaceAllString(cmd, "VMSTATE"))
}

type command struct {
	line int
	text string
}

// shellCommands returns the command lines of a Markdown text's shell
// blocks, without trailing comments.
func shellCommands(md string) []command {
	var out []command
	lang, in := "", false
	for i, line := range strings.Split(md, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			if in {
				in = false
			} else {
				in, lang = true, strings.TrimPrefix(trimmed, "```")
			}
			continue
		}
		if !in {
			continue
		}
		switch lang {
		case "sh", "bash", "shell":
		case "console":
			if !strings.HasPrefix(trimmed, "$ ") {
				continue
			}
			trimmed = strings.TrimPrefix(trimmed, "$ ")
		default:
			continue
		}
		if strings.HasPrefix(trimmed, "#") || trimmed == "" {
			continue
		}
		if c := strings.Index(trimmed, " #"); c >= 0 {
			trimmed = strings.TrimSpace(trimmed[:c])
		}
		out = append(out, command{line: i + 1, text: trimmed})
	}
	return out
}

// TestStateDirCheckCatchesHardCodedPaths: the check fails on what it is
// for and passes the forms the READMEs use.
func TestStateDirCheckCatchesHardCodedPaths(t *testing.T) {
	for cmd, bad := range map[string]bool{
		`kubectl --kubeconfig .labs/bootstrap/bootstrap-kubelet.kubeconfig auth whoami`: true,
		`BOOT=.labs/bootstrap/bootstrap-kubelet.kubeconfig`:                             true,
		`export KUBECONFIG=$PWD/.labs/admin.kubeconfig`:                                 true,
		`curl -s --unix-socket .labs/mockcri-control.sock http://x/v1/state`:            true,
		`ls .labs`: true,
		`kubectl --kubeconfig "${LABS_STATE_DIR:-.labs}/bootstrap/by-hand.kubeconfig" auth whoami`: false,
		`export KUBECONFIG="${LABS_STATE_DIR:-$PWD/.labs}/admin.kubeconfig"`:                       false,
		`docker cp kind-control-plane:/etc/kubernetes/pki/ca.crt ~/.labs/kind-ca.crt`:              false,
		`go run ./labs/04-csr --node-name=lab-node-04b`:                                            false,
		`cd kubelet-labs`: false,
	} {
		if got := bareStateDirIn(cmd); got != bad {
			t.Errorf("%q: flagged=%v, want %v", cmd, got, bad)
		}
	}
	md := "text `.labs/x`\n```sh\nls .labs/x   # a comment with .labs/\n# only a comment .labs/\n```\n```\n/…/.labs/out\n```\n```console\n$ cat .labs/y\n.labs/output\n```\n"
	got := shellCommands(md)
	if len(got) != 2 || got[0].text != "ls .labs/x" || got[1].text != "cat .labs/y" {
		t.Errorf("shellCommands = %+v", got)
	}
}

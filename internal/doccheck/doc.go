// Package doccheck keeps the course's Markdown honest: every relative
// link, file path, lab name and `go run` / `go test` target that docs/ and
// the READMEs (English and zh-CN) name must exist in the repository, every
// #anchor must be a heading of the page it points to (GitHub's slug rules,
// Chinese headings included), and every English page must have a zh-CN twin
// with as many headings and as many mermaid blocks.
//
// What it cannot know is left alone, and said so: links to other sites
// (no network in a test), paths of other projects (upstream Kubernetes'
// pkg/…, containerd's internal/cri/…), and the state folder's run-time
// files (.labs/…, /var/lib/kubelet-labs/…), which exist only after a lab
// ran.
//
// The mermaid blocks are checked twice: always for their shape (a diagram
// type GitHub renders, balanced brackets and quotes), and, where
// @mermaid-js/mermaid-cli is installed (scripts/build-mermaid-cli.sh; CI
// installs it), by rendering every block with mermaid itself.
package doccheck

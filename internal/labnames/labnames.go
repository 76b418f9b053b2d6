// Package labnames holds the names a lab makes and its self-check then
// looks for — the default node of each lab, the user lab 14 makes — in one
// place. A lab's main.go names its default here, and internal/selfcheck
// (which may not import labs/: imports go down only) reads the same
// constant, so a renamed default cannot leave the self-check looking for a
// node that no run makes.
//
// Only names both sides use are here. Names only a README and the
// self-check share (fake-node-2, lab-node-14-spdy: nodes the learner starts
// with --node-name) stay in the self-check, next to the hint that types
// them; a lab's default that no self-check reads (lab-node-15, lab-node-16)
// stays in its main.go, where the learner reads it.
package labnames

// The default --node-name of each lab whose self-check finds its node.
const (
	Node01 = "fake-node-1" // labs/01-fake-node: the real kubelet as a fake node
	Node02 = "lab-node-02" // labs/02-node-lease
	Node04 = "lab-node-04" // labs/04-csr: the node its certificate is for
	Node05 = "lab-node-05" // labs/05-register-node
	Node08 = "lab-node-08" // labs/08-static-pod
	Node09 = "lab-node-09" // labs/09-pod-manager
	Node10 = "lab-node-10" // labs/10-pod-workers
	Node12 = "lab-node-12" // labs/12-pleg-containerd
	Node13 = "lab-node-13" // labs/13-virtual-pod
	Node14 = "lab-node-14" // labs/14-exec
	Node17 = "lab-node-17" // labs/17-sync-pod
	Node18 = "mykubelet"   // labs/18-mykubelet, one node (fleet mode names its own)
)

// Visitor14 is the user lab 14's visitor certificate names (CN): the node
// server lets it in and, until the learner binds it a role, denies it.
const Visitor14 = "lab-14-visitor"

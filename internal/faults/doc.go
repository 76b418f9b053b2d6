// Command faults breaks a learner's running setup in one of a few ways a
// kubelet's operator meets — a CSR nobody approves, a node whose Lease is
// refused, a pod stuck Terminating, a crash loop, an image that cannot be
// pulled, a grace period too short for the container — and tells when it is
// fixed. The learner diagnoses each with kubectl, crictl, the node's log and
// the live view; the pages in docs/faults say where to look first, not the
// answer (that is folded away at the end of each page).
//
//	go run ./internal/faults                     # the list: name, lab, one line
//	go run ./internal/faults break NAME          # break it; says what it did and where to look
//	go run ./internal/faults check NAME          # fixed, or not yet with what it still sees (exit 0 only when fixed)
//	go run ./internal/faults undo NAME           # put it back (for an instructor)
//
// make break, make break SCENARIO=NAME and make check SCENARIO=NAME run the
// same. Each scenario is one file (csrpending.go, leasestopped.go, …) that
// registers itself in registry.go's list. What a break made carries the
// label kubelet-labs.dev/fault=NAME, and what check and undo need to find
// it again (the node, the namespace, a token ID) is kept in the state
// folder's faults/NAME.json.
package main

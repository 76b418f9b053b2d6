// Package liveview serves the live view of a kubelet of ours: a page that
// draws, as they happen, the steps the terminal prints — one lane per pod
// (config ops, worker states, computePodActions, CRI calls with their
// latency, PLEG events, probe results, status posts, back-offs), the pod
// worker state machine with each pod on it, and the PLEG's relists against
// its health threshold; in fleet mode, a grid of every node.
//
// It reads the node's journal (mycore/journal) — the same entries the
// terminal printer prints — and sends them to the page as Server-Sent
// Events. The page is static and embedded (static/): no CDN, nothing from
// the network, no build step.
//
// Who may look: the server listens on loopback unless told otherwise, and
// every request for the node's entries needs the token of the URL it
// printed, so another user of the machine who finds the port sees an empty
// page. The page keeps the token in sessionStorage (its origin's alone)
// and sends it as a query parameter, never in a cookie: a browser sends a
// cookie of 127.0.0.1 to every port of 127.0.0.1, so any process
// listening on another port the learner visits would receive it (guard.go).
// Off loopback it serves TLS with a certificate made at start, whose
// fingerprint it prints. A browser cannot be handed a client certificate
// the way kubectl is (the node server's way); the printed URL is the
// credential instead, as for Jupyter or the Go pprof UI behind a token.
package liveview

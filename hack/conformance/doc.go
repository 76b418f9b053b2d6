// Package conformance is the home of `make conformance`: upstream's
// conformance e2e tests (Kubernetes v1.36.3) against lab 18, our kubelet —
// the node's own selection on one node, or the whole certified suite on a
// full cluster of lab 18 nodes with kube-proxy and CoreDNS as their pods.
// It is a module of its own so that the e2e framework and its test
// dependencies, at the versions upstream's go.mod pins, stay out of the
// course's module; it imports the course's packages through a replace of
// kubelet-labs to the repository.
//
//   - e2e/: the e2e test binary (upstream's suite set-up and the spec
//     packages: the node's with build tag conformance, every one
//     test/e2e's binary loads with conformance,certified)
//   - cmd/conformance: the program `make conformance` runs
//   - internal/harness: builds, images, control plane + scheduler + nodes
//     (+ kube-proxy and CoreDNS: the full cluster), ginkgo
//   - internal/images, internal/ociimage: the e2e test images, made offline
//   - internal/report: ginkgo's JSON reports → passed/failed/skipped,
//     failures by SIG and cause, summary.txt and summary.md
//
// Its test, TestConformanceSlice, runs a fixed slice of the specs our
// kubelet passes, on the course's containerd (skipped when it is not up):
// `go test -C hack/conformance ./...`, which `make test` runs too.
// TestSuiteDryRun counts each suite's specs with ginkgo's dry run (no
// cluster) when the e2e binaries are built (CONFORMANCE_DRYRUN=1 builds
// them). TestFullClusterServesDNSAndServices starts the full cluster (as
// root) and checks DNS and Services from a pod.
package conformance

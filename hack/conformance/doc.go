// Package conformance is the home of `make conformance`: upstream's node
// conformance e2e tests (Kubernetes v1.36.3) against lab 18, our kubelet.
// It is a module of its own so that the e2e framework and its test
// dependencies, at the versions upstream's go.mod pins, stay out of the
// course's module; it imports the course's packages through a replace of
// kubelet-labs to the repository.
//
//   - e2e/: the e2e test binary (upstream's suite set-up and only the spec
//     packages of the selection; build tag conformance)
//   - cmd/conformance: the program `make conformance` runs
//   - internal/harness: builds, images, control plane + scheduler + node, ginkgo
//   - internal/images, internal/ociimage: the e2e test images, made offline
//   - internal/report: ginkgo's JSON report → passed/failed/skipped + causes
//
// Its test, TestConformanceSlice, runs a fixed slice of the specs our
// kubelet passes, on the course's containerd (skipped when it is not up):
// `go test -C hack/conformance ./...`, which `make test` runs too.
package conformance

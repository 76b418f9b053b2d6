# The two commands of the README are `go run ./labs/00-cluster` and `make test`.

# If lab 00 has not built the control plane binaries yet, the tests build
# them first (about 8 min on 2 idle cores), so the timeout is far above go
# test's default 10 minutes.
TEST_TIMEOUT ?= 45m

# Every package runs once, all of them under the race detector: the labs,
# the mock runtime and our kubelet pieces are concurrent (informers, pod
# workers, streaming), and a lab a test runs as a program is built with
# -race too (internal/testenv), so a race in a lab's own goroutines fails
# its test. -count=1: these tests talk to real processes (containerd, built
# binaries) that go test's result cache cannot see, so a cached "ok" could
# be stale. hack/envcheck (vm.yaml and the kind config, checked with Lima's
# and kind's own Go packages) is a nested module with no concurrency of
# ours: it runs without -race. hack/conformance (upstream's node
# conformance e2e tests, a nested module at upstream's test dependency
# versions) runs a fixed slice of specs against lab 18 the same way.
# scripts/kind/kindnetd (the kind node image's network agent, its own
# module so the course's does not build it) runs its unit tests too.
# client-go's cache mutation detector is on for every test and every lab a
# test runs, as in upstream's own test runs (hack/make-rules/test.sh:28-29,
# v1.36.3): each
# informer keeps a copy of what it caches and panics when a shared object
# has changed. Our kubelet shares the informer's pods instead of copying
# them (mycore/podconfig annotatedCopy), and this is what proves nothing
# writes to them.
export KUBE_CACHE_MUTATION_DETECTOR ?= true
GO_TEST_FLAGS ?= -race -count=1 -timeout $(TEST_TIMEOUT)
ENVCHECK_FLAGS ?= -count=1 -timeout $(TEST_TIMEOUT)
CONFORMANCE_FLAGS ?= -count=1 -timeout $(TEST_TIMEOUT)

.PHONY: test build clean check tour conformance bench stage grade break

## test: every test against real components, then a summary that names
## every skipped test and why (internal/testsummary; the exit code is go
## test's)
test:
	go run ./internal/testsummary $(GO_TEST_FLAGS) ./... --- -C hack/envcheck $(ENVCHECK_FLAGS) ./... --- -C hack/conformance $(CONFORMANCE_FLAGS) ./... --- -C scripts/kind/kindnetd $(GO_TEST_FLAGS) ./...

## build: build the control plane binaries into the state folder (.labs/bin)
build:
	go run ./labs/00-cluster --build-only

## conformance: upstream's conformance e2e tests (Kubernetes v1.36.3)
## against lab 18 on the course's containerd (sudo scripts/containerd-up.sh
## first), on a control plane, scheduler and ports of its own; prints
## passed/failed/skipped and each failure's cause, keeps the report in
## .labs/conformance/runs/. SUITE=default (the node's 201 specs, one node),
## SUITE=certified (every [Conformance] spec, 446, as Sonobuoy's
## certified-conformance runs them) or SUITE=node (every [NodeConformance]
## spec, 250): these two run as root, in a checkout root owns, on a full
## cluster — two lab 18 nodes on containerd 2.2 and 1.6 (started if they
## are not up), kube-proxy and CoreDNS as their pods — [Serial] specs
## after the rest, and write summary.md for BASELINE.md. FOCUS=regexp (instead of
## the selection), SKIP=regexp (more to skip), NODE=01 (lab 01's real
## kubelet, one containerd per node), SOLVED=1 (lab 18 with its exercise
## solved, from a patched copy), PROCS=12 (parallel ginkgo processes).
## hack/conformance
conformance:
	go run -C hack/conformance ./cmd/conformance

## bench: a benchmark beside the course, three rounds on a quiet machine,
## its table printed and kept in the state folder. BENCH=fleet (the
## default; hack/fleetbench: lab 18's fleet mode beside KWOK v0.7.0, 1,000
## nodes and 10,000 pods per tool, about 30 min) or BENCH=kubelet
## (hack/kubeletbench: lab 18 beside the real kubelet v1.36.3, 100 pods on
## containerd 2.2 — as root, sudo scripts/containerd-up.sh first — and on
## the mock, about 30 min). ARGS="--rounds 1 …" passes flags on.
BENCH ?= fleet
bench:
	@case "$(BENCH)" in fleet|kubelet) ;; *) echo "make bench: BENCH=$(BENCH): want fleet or kubelet" >&2; exit 2;; esac
	go run ./hack/$(BENCH)bench $(ARGS)

## tour: every lab's README in order, typed as a learner types it (lab
## 00's control plane under all of them; lab 11's `sudo
## scripts/containerd-up.sh` through real sudo — skipped, if containerd
## already runs, where sudo asks for a password; the labs on containerd
## when it is up), then a line per lab: result, time, commands run, and what the lab's
## self-check said. LABS=07,12 narrows it (lab 00 always runs). For an
## instructor before a workshop; make test (and CI) run the same test and
## print the same table.
tour:
	LABS_README="$(LABS)" go run ./internal/testsummary -count=1 -timeout 90m -run '^TestLabREADMEs$$' ./internal/readmerun/

## check: the self-check of one lab — what your run left on the cluster,
## in the state folder and the runtime, done or not yet, with a hint:
## make check LAB=07; with EXERCISE=1 it also runs the lab's exercise
## test (internal/selfcheck)
## With SCENARIO=NAME it says instead whether the fault scenario you
## broke (make break) is fixed.
check:
ifneq ($(SCENARIO),)
	go run ./internal/faults check "$(SCENARIO)"
else
	go run ./internal/selfcheck --lab "$(LAB)" $(if $(filter 1 yes true,$(EXERCISE)),--exercise)
endif

## break: fault scenarios (docs/faults/): a broken node or pod for you to
## diagnose with kubectl, crictl, the node's log and the live view.
## `make break` lists them; `make break SCENARIO=crash-loop` breaks one
## (on lab 00's cluster, with a node running); `make check
## SCENARIO=crash-loop` says when your fix is right; NODE=name picks the
## node when more than one runs; UNDO=1 puts it back
## without fixing it (for an instructor). internal/faults
break:
	go run ./internal/faults $(if $(SCENARIO),$(if $(filter 1 yes true,$(UNDO)),undo,break) "$(SCENARIO)" $(if $(NODE),--node "$(NODE)"))

## stage: the build-it track (docs/build-it.md): the kubelet's key
## functions, written by you and judged by the tests that hold ours to
## upstream's. `make stage` lists them; `make stage NAME=pleg-relist` opens
## one (your copy of the file, in the state folder, its functions
## emptied; RESET=1 starts over); `make grade NAME=pleg-relist` judges it,
## with a hint more after each failed try. The reference files are never
## changed. internal/stages
stage:
	go run ./internal/stages $(if $(NAME),--start "$(NAME)") $(if $(filter 1 yes true,$(RESET)),--reset)

grade:
	go run ./internal/stages --grade "$(NAME)"

## clean: remove the state folder (.labs/ or LABS_STATE_DIR) — only one
## the labs made (it has their marker file) and nothing of the labs still
## runs in (no lock held); scripts/clean-state.sh. Root's containerd tree is
## removed by `sudo scripts/containerd-down.sh --purge`.
clean:
	scripts/clean-state.sh

## vm-test: boot vm.yaml with Lima (built from its Go module) on an offline
## Debian 12 image, as the unprivileged user learner, under QEMU (TCG when
## KVM cannot run it), and run the READMEs of labs 00-05, 11 and 12 inside
## it (11-12 on containerd 2.2 started there with sudo); then stop and delete
## the VM. As root, on Linux x86_64; about an hour under TCG. hack/vmtest/run.sh
## fleet-image: build lab 18 as an offline container image for fleet mode
## in shards (scripts/build-fleet-image.sh, into the state folder's images/)
## and test it (TestFleetImage: static binary, containerd's image name; not
## in make test: a build without cgo takes minutes when cold)
.PHONY: fleet-image
fleet-image:
	scripts/build-fleet-image.sh
	LABS_FLEET_IMAGE_TEST=1 go test -count=1 -timeout 30m -run '^TestFleetImage$$' ./labs/18-mykubelet/fleetmode/

.PHONY: vm-test
vm-test:
	hack/vmtest/run.sh

## kind-image: the kind node image yaml/kind-config.yaml names, built
## offline on this machine — Debian 12 by debootstrap, this module's
## Kubernetes v1.36.3 and containerd v2.2.9, and every image kubeadm and
## kind run, built from their Go modules and preloaded (no registry). Root
## (debootstrap, chroot, Docker): run as a user, it asks sudo. Reuses what
## it built; prints the image's name and digest. scripts/kind/build-image.sh
.PHONY: kind-image
kind-image:
	$(if $(filter 0,$(shell id -u)),,sudo) scripts/kind/build-image.sh

## kind-test: the labs against a kind cluster, as CI runs things (root;
## the READMEs typed as the learner of LABS_README_USER): Docker started if
## needed, make kind-image, `kind create cluster --config
## yaml/kind-config.yaml`, the READMEs of labs 01-05, 08-10, 11, 14 and 18
## against it, `kind delete cluster`, and a check that nothing is left.
## KINDTEST_LABS=03,04 narrows it. hack/kindtest/run.sh
.PHONY: kind-test
kind-test:
	hack/kindtest/run.sh

## fleet-test: lab 18's fleet mode beyond one machine (root, Docker):
## its shards as the StatefulSet of labs/18-mykubelet/shards in a kind
## cluster (the management cluster), their nodes Ready in a lab 00 started
## on the kind bridge's address (--apiserver-address); one shard's pod
## deleted, it comes back and its nodes' Leases are renewed. FLEET_NODES=10
## per shard. hack/kindtest/fleet.sh
.PHONY: fleet-test
fleet-test:
	hack/kindtest/fleet.sh

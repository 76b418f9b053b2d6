# The two commands of the README are `go run ./labs/00-cluster` and `make test`.

# A cold first run builds kube-apiserver & co. inside the tests (~3-6 min on
# 2 cores), so the timeout is far above go test's default 10 minutes.
TEST_TIMEOUT ?= 45m

# -count=1: these tests talk to real processes (containerd, built binaries)
# that go test's result cache cannot see, so a cached "ok" could be stale.

.PHONY: test race build clean

## test: every test against real components, the race detector on our own
## concurrent code, and the VM files (vm.yaml, kind config) validated with
## Lima's and kind's own Go packages (a nested module: their dependencies
## would move versions the Kubernetes build relies on)
test:
	go test -count=1 -timeout $(TEST_TIMEOUT) ./...
	go test -count=1 -race -timeout $(TEST_TIMEOUT) ./mylib/fakecri/... ./mylib/fakecadvisor/... ./mycore/... ./labs/06-cri-mock/...
	cd hack/envcheck && go test -count=1 -timeout $(TEST_TIMEOUT) ./...

## build: build the control plane binaries into the state folder (.labs/bin)
build:
	go run ./labs/00-cluster --build-only

## clean: stop our containerd (if running) and remove all run-time state
clean:
	-[ "$$(id -u)" != 0 ] || [ ! -x scripts/containerd-down.sh ] || scripts/containerd-down.sh
	rm -rf "$${LABS_STATE_DIR:-.labs}"

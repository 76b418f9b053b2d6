#!/usr/bin/env bash
# boot.sh — start the fake node of lab 01 (the real kubelet v1.36.3 with our
# mock CRI) against the current kubeconfig.
#
#   ./boot.sh                          # node "fake-node-1"
#   NODE_NAME=fake-node-2 ./boot.sh    # another node, in another terminal
#   ./boot.sh --lease-duration=20s     # extra flags go to labs/01-fake-node
#
# Credentials: $KUBECONFIG (its first file), else the embedded control
# plane's .labs/admin.kubeconfig. They are used once, for the node's TLS
# bootstrap; the node then runs as system:node:NAME with its own certificate.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
state="${LABS_STATE_DIR:-${repo}/.labs}"
node="${NODE_NAME:-fake-node-1}"
kubeconfig="${KUBECONFIG:-${state}/admin.kubeconfig}"
kubeconfig="${kubeconfig%%:*}" # a KUBECONFIG list: use its first file

if [[ ! -r "${kubeconfig}" ]]; then
	echo "error: no kubeconfig at ${kubeconfig}." >&2
	echo "Start the embedded control plane in another terminal (go run ./labs/00-cluster)," >&2
	echo "or export KUBECONFIG for your cluster (e.g. kind)." >&2
	exit 1
fi
if ! command -v go >/dev/null; then
	echo "error: go is not on PATH (Go 1.26 is needed; see README.md)." >&2
	exit 1
fi

# Stamp the kubelet version the way release builds do (upstream
# hack/lib/version.sh); keep in sync with VersionLDFlags in
# internal/controlplane/binaries.go (a test checks it).
ldflags="-X k8s.io/component-base/version.gitVersion=v1.36.3 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36 -X k8s.io/component-base/version.gitTreeState=clean"

mkdir -p "${state}/bin"
bin="${state}/bin/fake-node"
echo "building labs/01-fake-node (the first build compiles the kubelet: a few minutes)..."
(cd "${repo}" && go build -ldflags "${ldflags}" -o "${bin}" ./labs/01-fake-node)

exec "${bin}" --node-name "${node}" --kubeconfig "${kubeconfig}" "$@"

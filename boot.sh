#!/usr/bin/env bash
# boot.sh — start the fake node of lab 01 (the real kubelet v1.36.3 with our
# mock CRI) against the current kubeconfig.
#
#   ./boot.sh                          # node "fake-node-1"
#   NODE_NAME=fake-node-2 ./boot.sh    # another node, in another terminal
#   BOOTSTRAP_KUBECONFIG=<state folder>/bootstrap/bootstrap-kubelet.kubeconfig ./boot.sh
#                                      # join with lab 03's bootstrap token
#   ./boot.sh --lease-duration=20s     # extra flags go to labs/01-fake-node
#   ./boot.sh --address=127.0.0.1      # kubelet server on loopback only (default: the node IP only)
#   ./boot.sh --address=0.0.0.0        # on all addresses, as a real kubelet
#
# The cluster: $KUBECONFIG (a file or a list, as kubectl reads it), else the
# embedded control plane's admin.kubeconfig in the state folder (.labs/, or
# $LABS_STATE_DIR). The node joins with $BOOTSTRAP_KUBECONFIG if set (a
# bootstrap token, as a real node joins), else with those credentials; it
# then runs as system:node:NAME with its own certificate.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The lab finds the state folder through LABS_STATE_DIR, so boot.sh works
# from any working directory.
export LABS_STATE_DIR="${LABS_STATE_DIR:-${repo}/.labs}"
node="${NODE_NAME:-fake-node-1}"

if [[ -z "${KUBECONFIG:-}" && ! -r "${LABS_STATE_DIR}/admin.kubeconfig" ]]; then
	echo "error: no kubeconfig: ${LABS_STATE_DIR}/admin.kubeconfig does not exist and KUBECONFIG is not set." >&2
	echo "Start the embedded control plane in another terminal (go run ./labs/00-cluster)," >&2
	echo "or export KUBECONFIG for your cluster (e.g. kind)." >&2
	exit 1
fi
if ! command -v go >/dev/null; then
	echo "error: go is not on PATH (Go 1.26 is needed; see README.md)." >&2
	exit 1
fi

args=(--node-name "${node}")
if [[ -n "${BOOTSTRAP_KUBECONFIG:-}" ]]; then
	args+=(--bootstrap-kubeconfig "${BOOTSTRAP_KUBECONFIG}")
fi

# Stamp the kubelet version the way release builds do (upstream
# hack/lib/version.sh); keep in sync with VersionLDFlags in
# internal/controlplane/binaries.go (a test checks it).
ldflags="-X k8s.io/component-base/version.gitVersion=v1.36.3 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36 -X k8s.io/component-base/version.gitTreeState=clean"

mkdir -p "${LABS_STATE_DIR}/bin"
bin="${LABS_STATE_DIR}/bin/fake-node"
echo "building labs/01-fake-node (the first build compiles the kubelet: up to ~15 min on 2 cores; later: seconds)..."
(cd "${repo}" && go build -ldflags "${ldflags}" -o "${bin}" ./labs/01-fake-node)

exec "${bin}" "${args[@]}" "$@"

#!/usr/bin/env bash
# Build lab 18 as a container image, offline, for fleet mode in shards (one
# StatefulSet pod per shard in a management cluster, each running its share
# of a fleet against a target cluster: labs/18-mykubelet/shards/).
#
# The image holds one static binary, /mykubelet (CGO_ENABLED=0, so it needs
# no libc), an /etc/passwd with the user it runs as (65532, not root) and a
# /tmp. It is an OCI-layout tar made as the labs' other images are
# (scripts/containerd/oci.sh): no registry, no container tool.
#
# Usage: scripts/build-fleet-image.sh [OUT_TAR]
#   default OUT_TAR: the state folder's images/mykubelet.tar
#   ($LABS_STATE_DIR, else .labs). Prints the image's name; load it with
#   `ctr -n k8s.io images import OUT_TAR` on a containerd node, or
#   `kind load image-archive OUT_TAR` into a kind cluster.
set -euo pipefail
trap 'echo "build-fleet-image: line ${LINENO}: \"${BASH_COMMAND}\" failed" >&2' ERR

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/.." && pwd)"
IMAGE="localhost/kubelet-labs/mykubelet:dev"
state="${LABS_STATE_DIR:-${repo}/.labs}"
out="${1:-${state}/images/mykubelet.tar}"

mkdir -p "$(dirname "${out}")"
work="$(mktemp -d "$(dirname "${out}")/.build.XXXXXX")"
trap 'rm -rf "${work}"' EXIT
# shellcheck source=scripts/containerd/oci.sh
source "${here}/containerd/oci.sh"

root="${work}/rootfs"
mkdir -p "${root}/etc"
mkdir -m 1777 "${root}/tmp"
(cd "${repo}" && CGO_ENABLED=0 go build -o "${root}/mykubelet" ./labs/18-mykubelet)
chmod 0755 "${root}/mykubelet"
printf 'root:x:0:0:root:/:/mykubelet\nfleet:x:65532:65532:fleet:/tmp:/mykubelet\n' >"${root}/etc/passwd"
printf 'root:x:0:\nfleet:x:65532:\n' >"${root}/etc/group"
oci_image "${IMAGE}" "${root}" '["/mykubelet"]' 'null' "${out}" "kubelet-labs scripts/build-fleet-image.sh"
echo "${IMAGE} in ${out}"

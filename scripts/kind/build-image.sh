#!/usr/bin/env bash
# build-image.sh: the kind node image of kubelet-labs, made offline on this
# machine (what `make kind-image` runs; root: debootstrap, chroot and
# Docker). kind's own image comes from Docker Hub; ours from Debian's apt
# mirror and the Go module proxy only:
#
#   rootfs.sh           Debian 12 as kind's base image has it
#   build-containerd.sh containerd v2.2.9, the labs' own
#   build-go.sh         Kubernetes v1.36.3 (kubeadm, kubelet, kubectl and
#                       the control plane), etcd, CoreDNS, kindnetd,
#                       local-path-provisioner, crictl and kind itself
#   component-images.sh the images kubeadm and kind run, under their names
#   node-image.sh       all of it as one image, preloaded, `docker load`ed
#
# Each step reuses what it built before; so does this script: when nothing
# that goes into the image changed and Docker still has it, it only says
# so. Prints the image's name and digest last.
#
#   sudo scripts/kind/build-image.sh [--force]
set -euo pipefail
trap 'echo "build-image: line ${LINENO}: \"${BASH_COMMAND}\" failed" >&2' ERR

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/containerd/lib.sh
source "${here}/../containerd/lib.sh"

# The image's name: yaml/kind-config.yaml names it (hack/envcheck checks the
# two agree). Local, so kind never tries to pull it.
NODE_IMAGE=localhost/kubelet-labs/kind-node:v1.36.3
KIND_MARKER=.kubelet-labs-kind

force=false
case "${1:-}" in
--force) force=true ;;
"") ;;
*) die "usage: $0 [--force]" ;;
esac

need_root
docker_bin="$(root_program docker)" || die "no docker on root's PATH (${ROOT_PATH}): apt-get install docker.io"
"${docker_bin}" info >/dev/null 2>&1 || die "Docker does not answer (docker info failed): start it (systemctl start docker)"

make_root_tree
kind_dir="${LABS_ROOT}/kind"
make_marked_dir "${kind_dir}" "${KIND_MARKER}" build-image.sh
exec 9>"${kind_dir}/.build.lock"
if ! flock -n 9; then
	log "another build of the kind image holds ${kind_dir}/.build.lock; waiting"
	flock 9
fi

start="$(now)"
"${here}/../build-containerd.sh"
"${here}/rootfs.sh" "${kind_dir}/rootfs"
"${here}/build-go.sh" "${kind_dir}"
"${here}/component-images.sh" "${kind_dir}" "${kind_dir}/rootfs"

# What goes into the image, as one hash: when it matches the last build's
# and Docker has that image, there is nothing to do.
ctrd="${LABS_ROOT}/bin/containerd-$(sed -n 's/^CONTAINERD2_VERSION=//p' "${here}/../containerd/lib.sh")"
inputs="$(
	cat "${kind_dir}/rootfs/.kubelet-labs-rootfs"
	sha256sum "${here}/node-image.sh" "${ctrd}"/containerd "${ctrd}"/ctr "${ctrd}"/containerd-shim-runc-v2 \
		"${kind_dir}"/bin/* "${kind_dir}"/images/*.tar | sed "s|${kind_dir}/||"
	echo "${NODE_IMAGE}"
)"
inputs_sha="$(sha256sum <<<"${inputs}" | cut -d' ' -f1)"
done_file="${kind_dir}/node-image.done"
if [ "${force}" = false ] && [ -f "${done_file}" ] && [ "$(sed -n 1p "${done_file}")" = "${inputs_sha}" ] &&
	[ "$("${docker_bin}" image inspect --format '{{.Id}}' "${NODE_IMAGE}" 2>/dev/null)" = "$(sed -n 2p "${done_file}")" ]; then
	log "node image: reused (nothing that goes into it changed)"
else
	"${here}/node-image.sh" "${kind_dir}/rootfs" "${kind_dir}" "${ctrd}" "${NODE_IMAGE}"
	printf '%s\n%s\n' "${inputs_sha}" "$("${docker_bin}" image inspect --format '{{.Id}}' "${NODE_IMAGE}")" >"${done_file}"
fi

id="$("${docker_bin}" image inspect --format '{{.Id}}' "${NODE_IMAGE}")"
size="$("${docker_bin}" image inspect --format '{{.Size}}' "${NODE_IMAGE}")"
log "kind image ready in $(elapsed "${start}") s"
echo "${NODE_IMAGE} ${id} ($((size / 1024 / 1024)) MiB; archive for docker load: ${kind_dir}/node-image.tar)"

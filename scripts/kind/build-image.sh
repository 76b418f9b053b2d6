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
#   sudo scripts/kind/build-image.sh [--force] [--no-load]
#
# --no-load: the image as an archive only (for `docker load -i` on another
# machine, e.g. make vm-test's VM), with no Docker on this one.
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
load=true
for a in "$@"; do
	case "${a}" in
	--force) force=true ;;
	--no-load) load=false ;;
	*) die "usage: $0 [--force] [--no-load]" ;;
	esac
done

need_root "debootstrap, chroot and Docker need it"
docker_bin=""
if [ "${load}" = true ]; then
	docker_bin="$(root_program docker)" || die "no docker on root's PATH (${ROOT_PATH}): apt-get install docker.io"
	"${docker_bin}" info >/dev/null 2>&1 || die "Docker does not answer (docker info failed): start it (systemctl start docker)"
fi

# What the steps need from Debian: debootstrap (rootfs.sh), a static
# busybox and gcc with libc.a (component-images.sh: the helper image, the
# pause program)
missing=()
command -v debootstrap >/dev/null || missing+=(debootstrap)
[ "$(dpkg-query -W -f='${Status}' busybox-static 2>/dev/null || true)" = "install ok installed" ] || missing+=(busybox-static)
command -v gcc >/dev/null || missing+=(gcc)
[ -n "$(find /usr/lib /usr/lib64 -name libc.a -print -quit 2>/dev/null)" ] || missing+=(libc6-dev)
install_missing "${missing[@]}"

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
# and Docker has that image, there is nothing to do. The steps above
# rewrite a file only when they rebuild it, so each file's size, time and
# inode say whether it changed, without reading a gigabyte of it; the
# scripts by their content.
ctrd="${LABS_ROOT}/bin/containerd-$(sed -n 's/^CONTAINERD2_VERSION=//p' "${here}/../containerd/lib.sh")"
inputs="$(
	cat "${kind_dir}/rootfs/.kubelet-labs-rootfs"
	sha256sum "${here}/node-image.sh" "${here}/versions.sh"
	stat -c '%n %s %Y %i' "${ctrd}"/containerd "${ctrd}"/ctr "${ctrd}"/containerd-shim-runc-v2 \
		"${kind_dir}"/bin/* "${kind_dir}"/images/*.tar | sed "s|${kind_dir}/||"
	echo "${NODE_IMAGE}"
)"
inputs_sha="$(sha256sum <<<"${inputs}" | cut -d' ' -f1)"
done_file="${kind_dir}/node-image.done"
if [ "${force}" = false ] && [ -f "${done_file}" ] && [ -f "${kind_dir}/node-image.tar" ] &&
	[ "$(sed -n 1p "${done_file}")" = "${inputs_sha}" ]; then
	log "node image: reused (nothing that goes into it changed)"
	if [ "${load}" = true ] &&
		[ "$("${docker_bin}" image inspect --format '{{.Id}}' "${NODE_IMAGE}" 2>/dev/null)" != "$(sed -n 2p "${done_file}")" ]; then
		log "node image: docker load (Docker had not this one)"
		"${docker_bin}" load -i "${kind_dir}/node-image.tar" >/dev/null
	fi
else
	NODE_IMAGE_LOAD="${load}" "${here}/node-image.sh" "${kind_dir}/rootfs" "${kind_dir}" "${ctrd}" "${NODE_IMAGE}"
	printf '%s\n%s\n' "${inputs_sha}" "$(cat "${kind_dir}/node-image.id")" >"${done_file}"
fi

log "kind image ready in $(elapsed "${start}") s"
if [ "${load}" = true ]; then
	id="$("${docker_bin}" image inspect --format '{{.Id}}' "${NODE_IMAGE}")"
	size="$("${docker_bin}" image inspect --format '{{.Size}}' "${NODE_IMAGE}")"
	echo "${NODE_IMAGE} ${id} ($((size / 1024 / 1024)) MiB; archive for docker load: ${kind_dir}/node-image.tar)"
else
	echo "${NODE_IMAGE} $(cat "${kind_dir}/node-image.id") (not loaded: docker load -i ${kind_dir}/node-image.tar)"
fi

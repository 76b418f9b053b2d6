#!/usr/bin/env bash
# rootfs.sh DIR: the Debian tree of the kind node image, made the way kind
# v0.32.0's base image is (sigs.k8s.io/kind@v0.32.0 images/base/Dockerfile),
# but from Debian 12 (bookworm) with debootstrap instead of pulling
# debian:trixie-slim from Docker Hub, which these machines cannot reach.
#
# What it mirrors, step by step (Dockerfile line numbers at kind v0.32.0):
#   29-42   kind's own files (entrypoint, units, containerd config, scripts)
#           from the kind module in root's Go module cache, 0755 for programs,
#           0644 for the rest: read at build time, not copied into this repo
#   76-81   the same apt packages (nfs-common, open-iscsi and fuse-overlayfs
#           left out: storage e2e and rootless only)
#   82-90   the same clean-up: no tmpfiles-setup, no *.wants, no kmsg in
#           journald, /sbin/init -> systemd
#   93-97   kubelet, containerd and undo-mount-hacks enabled, binfmt masked
#   99-100  /etc/kubernetes/manifests
# runc (1.1.5) and the CNI plugins (1.1.1, ptp host-local loopback portmap)
# come from Debian here, where kind builds its own (Dockerfile 145-189): the
# labs' own containerd already runs pods with exactly these.
#
# Root only (debootstrap, chroot). Reuses DIR when it was made from the same
# package list by the same script (a stamp file says so).
set -euo pipefail
trap 'echo "rootfs: line ${LINENO}: \"${BASH_COMMAND}\" failed" >&2' ERR

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/containerd/lib.sh
source "${here}/../containerd/lib.sh"

dir="${1:?usage: rootfs.sh DIR}"
MIRROR="${KIND_IMAGE_MIRROR:-http://deb.debian.org/debian}"
SUITE=bookworm
# kind's list (Dockerfile 76-81) as bookworm names it, plus Debian's runc
# and CNI plugins (kind builds those itself).
PACKAGES=(
	systemd
	conntrack iptables nftables iproute2 ethtool util-linux mount kmod
	libseccomp2 pigz
	e2fsprogs
	bash ca-certificates curl jq procps
	runc containernetworking-plugins
)
# shellcheck source=scripts/kind/versions.sh
source "${here}/versions.sh" # KIND_VERSION

need_root "debootstrap and chroot need it"
stamp="${SUITE} ${MIRROR} ${PACKAGES[*]} kind ${KIND_VERSION} $(sha256sum "${BASH_SOURCE[0]}" | cut -d' ' -f1)"
if [ -f "${dir}/.kubelet-labs-rootfs" ] && [ "$(cat "${dir}/.kubelet-labs-rootfs")" = "${stamp}" ]; then
	log "rootfs: reused ${dir}"
	exit 0
fi

# kind's files come from root's own module cache (root_go: root's Go, a
# root-owned cache, the checksum database on); nothing a learner wrote is read.
root_go
kind_dir="$(cd / && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kind@${KIND_VERSION}" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[ -d "${kind_dir}/images/base/files" ] || die "sigs.k8s.io/kind@${KIND_VERSION}: no images/base/files in the module"
files="${kind_dir}/images/base/files"

start="$(now)"
new="${dir}.new"
rm -rf -- "${new}"
mkdir -p -- "$(dirname -- "${dir}")"
log "rootfs: debootstrap ${SUITE} from ${MIRROR} (${#PACKAGES[@]} packages)"
include="$(
	IFS=,
	echo "${PACKAGES[*]}"
)"
debootstrap --variant=minbase --include="${include}" "${SUITE}" "${new}" "${MIRROR}" >"${new}.log" 2>&1 ||
	{
		tail -n 30 "${new}.log" >&2
		die "debootstrap failed (log: ${new}.log)"
	}

# kind's files, with the modes of Dockerfile 29-42
install -d -m 0755 "${new}/kind" "${new}/kind/bin" "${new}/LICENSES"
install -m 0755 "${files}"/usr/local/bin/* "${new}/usr/local/bin/"
install -m 0644 "${files}"/kind/README.txt "${new}/kind/"
install -m 0755 "${files}"/kind/bin/* "${new}/kind/bin/"
install -m 0644 "${files}"/LICENSES/* "${new}/LICENSES/"
install -m 0644 "${files}"/etc/crictl.yaml "${new}/etc/"
install -d -m 0755 "${new}/etc/containerd" "${new}/etc/default" "${new}/etc/sysctl.d" \
	"${new}/etc/systemd/system/kubelet.service.d"
install -m 0644 "${files}"/etc/containerd/* "${new}/etc/containerd/"
install -m 0644 "${files}"/etc/default/* "${new}/etc/default/"
install -m 0644 "${files}"/etc/sysctl.d/* "${new}/etc/sysctl.d/"
find "${files}/etc/systemd/system" -maxdepth 1 -type f -exec install -m 0644 {} "${new}/etc/systemd/system/" \;
install -m 0644 "${files}"/etc/systemd/system/kubelet.service.d/* "${new}/etc/systemd/system/kubelet.service.d/"
# The fuse-overlayfs snapshotter is for rootless nodes only (Dockerfile
# 194-203); without its program the unit would only fail.
rm -f "${new}/etc/systemd/system/containerd-fuse-overlayfs.service"

# Dockerfile 82-90: clean-up as kind does it, and clean-install's
# (files/usr/local/bin/clean-install) removal of apt lists and docs
find "${new}/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
rm -f "${new}"/lib/systemd/system/multi-user.target.wants/* \
	"${new}"/etc/systemd/system/*.wants/* \
	"${new}"/lib/systemd/system/local-fs.target.wants/* \
	"${new}"/lib/systemd/system/sockets.target.wants/*udev* \
	"${new}"/lib/systemd/system/sockets.target.wants/*initctl* \
	"${new}"/lib/systemd/system/basic.target.wants/*
echo "ReadKMsg=no" >>"${new}/etc/systemd/journald.conf"
ln -sf /usr/lib/systemd/systemd "${new}/sbin/init"
chroot "${new}" apt-get clean
rm -rf "${new}"/var/lib/apt/lists/* "${new}"/var/log/* "${new}"/tmp/* "${new}"/var/tmp/* \
	"${new}"/usr/share/doc/* "${new}"/usr/share/man/* "${new}"/var/cache/debconf/*-old

# Dockerfile 93-97 (systemctl only makes links; nothing runs)
chroot "${new}" systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
chroot "${new}" systemctl mask systemd-binfmt.service >/dev/null 2>&1
# Dockerfile 99-100
mkdir -p "${new}/etc/kubernetes/manifests"

# Dockerfile 222-230: runc and the four CNI plugins where kind puts them
# (its containerd config names no bin_dir, so /opt/cni/bin)
ln -sf /usr/sbin/runc "${new}/usr/local/sbin/runc"
install -d -m 0755 "${new}/opt/cni/bin"
for p in host-local loopback ptp portmap; do
	cp -a "${new}/usr/lib/cni/${p}" "${new}/opt/cni/bin/${p}"
done
: >"${new}/etc/machine-id"
# debootstrap copies this machine's resolv.conf and hostname in; the image
# must carry neither (Docker mounts the container's own over both)
: >"${new}/etc/resolv.conf"
: >"${new}/etc/hostname"

echo "${stamp}" >"${new}/.kubelet-labs-rootfs"
rm -rf -- "${dir}"
mv -- "${new}" "${dir}"
mv -- "${new}.log" "${dir}.debootstrap.log"
log "rootfs: ${dir} in $(elapsed "${start}") s ($(du -sh "${dir}" | cut -f1))"

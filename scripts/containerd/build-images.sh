#!/usr/bin/env bash
# Build the two offline images the labs run, as OCI-layout tar files that
# `ctr images import` understands. No registry, no network:
#
#   pause   - hack/images/pause/pause.c compiled with `gcc -static`; the
#             sandbox ("infra") container of every pod (containerd's
#             sandbox_image).
#   busybox - /bin/busybox from Debian's busybox-static plus one symlink per
#             applet, so `sh`, `echo`, `sleep`, `cat`... exist in the image.
#
# Usage: build-images.sh OUTDIR
# Writes OUTDIR/pause.tar and OUTDIR/busybox.tar, and OUTDIR/images.env with
# PAUSE_IMAGE=... and BUSYBOX_IMAGE=... . Tars are reproducible (sorted
# entries, fixed owner and mtime), so a rebuild gives the same digests and
# a second import is a no-op for containerd.
set -euo pipefail
trap 'echo "build-images: line ${LINENO}: \"${BASH_COMMAND}\" failed" >&2' ERR

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/../.." && pwd)"
out="${1:?usage: build-images.sh OUTDIR}"

PAUSE_IMAGE="localhost/kubelet-labs/pause:1.0"
BUSYBOX_SRC="/bin/busybox"

mkdir -p "${out}"
work="$(mktemp -d "${out}/.build.XXXXXX")"
trap 'rm -rf "${work}"' EXIT

# Which Go/OCI architecture name this machine has (amd64, arm64, ...).
oci_arch() {
	case "$(uname -m)" in
	x86_64) echo amd64 ;;
	aarch64 | arm64) echo arm64 ;;
	armv7l) echo arm ;;
	ppc64le) echo ppc64le ;;
	s390x) echo s390x ;;
	riscv64) echo riscv64 ;;
	*) uname -m ;;
	esac
}
ARCH="$(oci_arch)"

sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { stat -c %s "$1"; }

# deterministic tar of a directory's contents
det_tar() { # SRC_DIR DEST_TAR
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
		--format=posix --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
		-C "$1" -cf "$2" .
}

# oci_image NAME ROOTFS_DIR ENTRYPOINT_JSON CMD_JSON OUT_TAR
# Writes an OCI image layout (oci-layout, index.json, blobs/sha256/*) with one
# uncompressed layer and tars it. index.json carries the image name in the
# annotation containerd's importer reads (io.containerd.image.name).
oci_image() {
	local name="$1" rootfs="$2" entrypoint="$3" cmd="$4" dest="$5"
	local lay
	lay="${work}/layout-$(basename "${dest}" .tar)"
	mkdir -p "${lay}/blobs/sha256"

	det_tar "${rootfs}" "${lay}/layer.tar"
	local layer_sha layer_size
	layer_sha="$(sha "${lay}/layer.tar")"
	layer_size="$(size "${lay}/layer.tar")"
	mv "${lay}/layer.tar" "${lay}/blobs/sha256/${layer_sha}"

	printf '{"architecture":"%s","os":"linux","config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Entrypoint":%s,"Cmd":%s,"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"1970-01-01T00:00:00Z","created_by":"kubelet-labs scripts/containerd/build-images.sh"}]}' \
		"${ARCH}" "${entrypoint}" "${cmd}" "${layer_sha}" >"${lay}/config.json"
	local cfg_sha cfg_size
	cfg_sha="$(sha "${lay}/config.json")"
	cfg_size="$(size "${lay}/config.json")"
	mv "${lay}/config.json" "${lay}/blobs/sha256/${cfg_sha}"

	printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
		"${cfg_sha}" "${cfg_size}" "${layer_sha}" "${layer_size}" >"${lay}/manifest.tmp"
	local man_sha man_size
	man_sha="$(sha "${lay}/manifest.tmp")"
	man_size="$(size "${lay}/manifest.tmp")"
	mv "${lay}/manifest.tmp" "${lay}/blobs/sha256/${man_sha}"

	printf '{"imageLayoutVersion":"1.0.0"}' >"${lay}/oci-layout"
	printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"%s","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
		"${man_sha}" "${man_size}" "${ARCH}" "${name}" "${name##*:}" >"${lay}/index.json"

	det_tar "${lay}" "${dest}.tmp"
	mv "${dest}.tmp" "${dest}"
}

# --- pause ------------------------------------------------------------------
mkdir -p "${work}/pause-root"
gcc -static -Os -Wall -Werror -o "${work}/pause-root/pause" "${repo}/hack/images/pause/pause.c"
strip "${work}/pause-root/pause"
chmod 0755 "${work}/pause-root/pause"
oci_image "${PAUSE_IMAGE}" "${work}/pause-root" '["/pause"]' 'null' "${out}/pause.tar"

# --- busybox ----------------------------------------------------------------
# The image is only as static as the binary: refuse a dynamically linked one
# (Debian's plain "busybox" package), it would not start in an empty rootfs.
if ldd "${BUSYBOX_SRC}" >/dev/null 2>&1; then
	echo "build-images: ${BUSYBOX_SRC} is dynamically linked; install busybox-static" >&2
	exit 1
fi
# whole output first: `| head -1` would SIGPIPE busybox, fatal under pipefail
bb_banner="$("${BUSYBOX_SRC}" 2>&1 || true)"
bb_version="$(sed -n '1s/^BusyBox v\([0-9.]*\).*/\1/p' <<<"${bb_banner}")"
BUSYBOX_IMAGE="localhost/kubelet-labs/busybox:${bb_version:-latest}"
bb="${work}/busybox-root"
mkdir -p "${bb}/bin" "${bb}/etc" "${bb}/root" "${bb}/proc" "${bb}/sys" "${bb}/dev"
install -m 0755 "${BUSYBOX_SRC}" "${bb}/bin/busybox"
mkdir -m 1777 "${bb}/tmp"
while read -r applet; do
	if [ -z "${applet}" ] || [ "${applet}" = "bin/busybox" ]; then
		continue
	fi
	mkdir -p "${bb}/$(dirname "${applet}")"
	ln -sf /bin/busybox "${bb}/${applet}"
done < <("${BUSYBOX_SRC}" --list-full)
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"${bb}/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"${bb}/etc/group"
oci_image "${BUSYBOX_IMAGE}" "${bb}" 'null' '["sh"]' "${out}/busybox.tar"

printf 'PAUSE_IMAGE=%s\nBUSYBOX_IMAGE=%s\n' "${PAUSE_IMAGE}" "${BUSYBOX_IMAGE}" >"${out}/images.env"

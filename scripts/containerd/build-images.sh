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

# shellcheck source=scripts/containerd/oci.sh
source "${here}/oci.sh"

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

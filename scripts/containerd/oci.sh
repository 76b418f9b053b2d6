#!/usr/bin/env bash
# OCI image layouts without a registry or a container tool: a folder becomes
# a one-layer image in an OCI-layout tar that `ctr images import` reads.
# Sourced by scripts/containerd/build-images.sh (pause, busybox) and
# scripts/build-fleet-image.sh (lab 18's fleet). The caller sets `work` (a
# scratch folder it removes) before calling oci_image. Tars are
# reproducible (sorted entries, fixed owner and mtime): a rebuild gives the
# same digests, and a second import is a no-op for containerd.

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

# oci_image NAME ROOTFS_DIR ENTRYPOINT_JSON CMD_JSON OUT_TAR [CREATED_BY]
# Writes an OCI image layout (oci-layout, index.json, blobs/sha256/*) with one
# uncompressed layer and tars it. index.json carries the image name in the
# annotation containerd's importer reads (io.containerd.image.name).
oci_image() {
	local name="$1" rootfs="$2" entrypoint="$3" cmd="$4" dest="$5"
	local by="${6:-kubelet-labs scripts/containerd/build-images.sh}"
	: "${work:?oci_image: set work to a scratch folder first}"
	local lay
	lay="${work}/layout-$(basename "${dest}" .tar)"
	mkdir -p "${lay}/blobs/sha256"

	det_tar "${rootfs}" "${lay}/layer.tar"
	local layer_sha layer_size
	layer_sha="$(sha "${lay}/layer.tar")"
	layer_size="$(size "${lay}/layer.tar")"
	mv "${lay}/layer.tar" "${lay}/blobs/sha256/${layer_sha}"

	printf '{"architecture":"%s","os":"linux","config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Entrypoint":%s,"Cmd":%s,"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"1970-01-01T00:00:00Z","created_by":"%s"}]}' \
		"${ARCH}" "${entrypoint}" "${cmd}" "${layer_sha}" "${by}" >"${lay}/config.json"
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


#!/usr/bin/env bash
# component-images.sh OUT ROOTFS: the container images a kind cluster of
# kubelet-labs runs, made without a registry, under the exact names kubeadm
# and kind ask containerd for (they all pull IfNotPresent: a name that is
# present is never pulled). Root; run after scripts/kind/build-go.sh OUT.
#
#   component-images.sh OUT ROOTFS   build what changed, then verify all
#   component-images.sh --verify OUT verify only
#
# OUT is build-go.sh's folder: its bin/ holds the programs. The images go to
# OUT/images/<name>.tar (OCI layout tars with one uncompressed layer, made
# by scripts/containerd/oci.sh's oci_image, which `ctr images import`
# reads), and OUT/images/images.txt lists "REF TAR" for each, for the
# node image's assembler (scripts/kind/node-image.sh) to import them all.
# ROOTFS is a Debian 12 (bookworm, merged /usr) tree, rootfs.sh's (pass /
# on a Debian 12 host): iptables, conntrack and nft are copied from it with
# the libraries ldd finds there, as upstream's images copy Debian's.
#
# The images, and what each mirrors:
#   registry.k8s.io/kube-apiserver, kube-controller-manager, kube-scheduler,
#   kube-proxy :v1.36.3
#       k8s.io/kubernetes v1.36.3 build/server-image/Dockerfile:21-25: the
#       binary at /usr/local/bin/<name>, kube-log-runner as /go-runner,
#       ENTRYPOINT ["/go-runner"]; kubeadm's manifests run them by name
#       (`command: kube-apiserver`, found on the image's PATH), kube-proxy
#       as /usr/local/bin/kube-proxy. kube-proxy's base is distroless-iptables
#       (build/common.sh:85-88; kubernetes/release images/build/
#       distroless-iptables/distroless-bookworm/Dockerfile): iptables (legacy
#       and nft), conntrack, nft, a shell with cat chmod grep ln rm sleep wc,
#       and the iptables wrapper (scripts/kind/iptables-wrapper).
#   registry.k8s.io/etcd:3.6.8-0
#       /usr/local/bin/etcd; kubeadm runs `etcd` from PATH
#       (cmd/kubeadm/app/phases/etcd/local.go:282).
#   registry.k8s.io/coredns/coredns:v1.14.2
#       github.com/coredns/coredns@v1.14.2 Dockerfile: /coredns,
#       ENTRYPOINT ["/coredns"]. Upstream runs it as nonroot with a file
#       capability (setcap) to bind :53; a layer of ours carries no xattrs,
#       so it runs as root, with only NET_BIND_SERVICE, which kubeadm's
#       manifest (addons/dns/manifests.go:144-151) leaves it.
#   registry.k8s.io/pause:3.10
#       containerd's sandbox_image in kind's config: the project's
#       hack/images/pause/pause.c, gcc -static (as
#       scripts/containerd/build-images.sh), ENTRYPOINT ["/pause"].
#   docker.io/kindest/kindnetd:v20260528-9350166c
#       kind images/kindnetd/Dockerfile (at the commit scripts/kind/kindnetd
#       is from): /bin/kindnetd on distroless-iptables, CMD ["/bin/kindnetd"].
#   docker.io/kindest/local-path-provisioner:v20260521-9fb22683
#       sigs.k8s.io/kind@v0.32.0 images/local-path-provisioner/Dockerfile:
#       /usr/local/bin/local-path-provisioner, ENTRYPOINT it (upstream's
#       shell form needs a shell distroless lacks; kind's manifest runs
#       `command: local-path-provisioner` anyway, const_storage.go:141).
#   docker.io/kindest/local-path-helper:v20260131-7181c60a
#       images/local-path-helper/Dockerfile: sh, rm and mkdir, for the
#       helper pod's `/bin/sh /script/setup`; here busybox-static's.
# Every image also gets what distroless gives a program: /etc/passwd and
# /etc/group (root, nobody, nonroot), /etc/nsswitch.conf, /tmp, and
# ROOTFS's CA bundle.
#
# Reuse: what goes into each image (every file's path, mode and sha256,
# and the config) is hashed into OUT/images/.stamps/<name>; an image whose
# hash and tar are unchanged is not rewritten. The tars are reproducible,
# so a rebuild gives the same digests. The check at the end unpacks each
# tar and runs its programs inside its own root (chroot, no mounts).
set -euo pipefail
trap 'echo "component-images: line ${LINENO}: \"${BASH_COMMAND}\" failed" >&2' ERR

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/containerd/lib.sh
source "${here}/../containerd/lib.sh"
# shellcheck source=scripts/kind/versions.sh
source "${here}/versions.sh"
# shellcheck source=scripts/containerd/oci.sh
source "${here}/../containerd/oci.sh"

usage="usage: $0 OUT ROOTFS | $0 --verify OUT"
verify_only=false
if [ "${1:-}" = --verify ]; then
	verify_only=true
	shift
	[ "$#" -eq 1 ] || die "${usage}"
else
	[ "$#" -eq 2 ] || die "${usage}"
fi
out="$(realpath -m "$1")"
rootfs="${2:-}"
[ "$(id -u)" -eq 0 ] || die "run as root (sudo $0 $*): the images are root's, and the check runs their programs in chroot"
KIND_MARKER=.kubelet-labs-kind
[ -f "${out}/${KIND_MARKER}" ] || die "${out} was not made by scripts/kind/build-go.sh (no ${KIND_MARKER}): run it first"
check_root_owned "${out}"
images="${out}/images"
# the same modes on every machine: they go into the layers
umask 022
cd /

# ref, tar, entrypoint, cmd, builder function
IMAGES=(
	"${KUBE_IMAGE_REPO}/kube-apiserver:${KUBERNETES_VERSION}|kube-apiserver.tar|[\"/go-runner\"]|null|stage_kube kube-apiserver"
	"${KUBE_IMAGE_REPO}/kube-controller-manager:${KUBERNETES_VERSION}|kube-controller-manager.tar|[\"/go-runner\"]|null|stage_kube kube-controller-manager"
	"${KUBE_IMAGE_REPO}/kube-scheduler:${KUBERNETES_VERSION}|kube-scheduler.tar|[\"/go-runner\"]|null|stage_kube kube-scheduler"
	"${KUBE_IMAGE_REPO}/kube-proxy:${KUBERNETES_VERSION}|kube-proxy.tar|[\"/go-runner\"]|null|stage_kube_proxy"
	"${ETCD_IMAGE}|etcd.tar|null|[\"/usr/local/bin/etcd\"]|stage_etcd"
	"${COREDNS_IMAGE}|coredns.tar|[\"/coredns\"]|null|stage_coredns"
	"${PAUSE_IMAGE}|pause.tar|[\"/pause\"]|null|stage_pause"
	"${KINDNETD_IMAGE}|kindnetd.tar|null|[\"/bin/kindnetd\"]|stage_kindnetd"
	"${LOCAL_PATH_PROVISIONER_IMAGE}|local-path-provisioner.tar|[\"/usr/local/bin/local-path-provisioner\"]|null|stage_local_path_provisioner"
	"${LOCAL_PATH_HELPER_IMAGE}|local-path-helper.tar|null|null|stage_local_path_helper"
)

work="$(mktemp -d "${out}/.component-images.XXXXXX")"
trap 'rm -rf "${work}"' EXIT

# --- staging ------------------------------------------------------------------
# base STAGE: what a distroless image has that our programs may use.
base() { # STAGE
	local s="$1"
	mkdir -p "${s}/etc" "${s}/root" "${s}/home/nonroot" "${s}/etc/ssl/certs"
	chmod 0700 "${s}/root"
	mkdir -m 1777 "${s}/tmp"
	printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"${s}/etc/passwd"
	printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"${s}/etc/group"
	# Go's resolver reads it: files, then DNS (as distroless has it)
	printf 'hosts: files dns\n' >"${s}/etc/nsswitch.conf"
	# (a regular file: ROOTFS's links may point anywhere on this host)
	if [ -f "${rootfs}/etc/ssl/certs/ca-certificates.crt" ] && [ ! -L "${rootfs}/etc/ssl/certs/ca-certificates.crt" ]; then
		install -m 0644 "${rootfs}/etc/ssl/certs/ca-certificates.crt" "${s}/etc/ssl/certs/ca-certificates.crt"
	fi
}
bin_of() { # NAME: OUT/bin/NAME (build_images checked it is there)
	echo "${out}/bin/$1"
}

# Debian's merged /usr: /bin, /sbin, /lib and /lib64 are links into /usr
# (as in ROOTFS), so binaries find their loader and libraries at the paths
# Debian built them with.
merged_usr() { # STAGE
	local d
	mkdir -p "$1/usr/bin" "$1/usr/sbin" "$1/usr/lib"
	for d in bin sbin lib lib64; do
		if [ -L "${rootfs}/${d}" ]; then
			mkdir -p "$1/usr/${d}"
			ln -sfn "usr/${d}" "$1/${d}"
		fi
	done
}

# stage_file STAGE PATH: PATH of ROOTFS into STAGE at the same place,
# following symbolic links; after kind's images/local-path-helper/
# stage-binary-and-deps.sh (stage_file: /lib* is /usr/lib* on merged /usr,
# so the links and the files stay together).
stage_file() { # STAGE PATH
	local s="$1" from="$2" target
	case "${from}" in /lib*/* | /bin/* | /sbin/*) from="/usr${from}" ;; esac
	if [ -e "${s}${from}" ] || [ -L "${s}${from}" ]; then return 0; fi
	[ -e "${rootfs}${from}" ] || [ -L "${rootfs}${from}" ] || die "${rootfs}${from}: no such file in ROOTFS"
	(cd "${rootfs}" && cp -a --parents ".${from}" "${s}/")
	if [ -L "${rootfs}${from}" ]; then
		target="$(readlink "${rootfs}${from}")"
		case "${target}" in /*) ;; *) target="$(dirname "${from}")/${target}" ;; esac
		# lexically, inside ROOTFS: never the host's links
		stage_file "${s}" "$(realpath -m -s "${target}")"
	fi
}

# stage_copyrights STAGE: the copyright file of each Debian package a file
# of STAGE came from (as stage-binary-and-deps.sh stages them), asked of
# ROOTFS's dpkg once for all; dpkg knows many files by their name before
# merged /usr (/lib/...), so both names are asked.
stage_copyrights() { # STAGE
	local s="$1" pkg
	local -a files
	mapfile -t files < <(cd "${s}" && find usr -type f ! -path 'usr/local/*' ! -path 'usr/share/doc/*' |
		sed 's|^|/|' | sed 'p; s#^/usr/\(lib\|lib64\|bin\|sbin\)/#/\1/#')
	[ "${#files[@]}" -gt 0 ] || return 0
	while read -r pkg; do
		if [ -f "${rootfs}/usr/share/doc/${pkg}/copyright" ]; then
			(cd "${rootfs}" && cp -a --parents "./usr/share/doc/${pkg}/copyright" "${s}/")
		fi
	done < <(chroot "${rootfs}" dpkg-query -S "${files[@]}" 2>/dev/null | sed 's/: .*//; s/, /\n/g' | sed 's/:.*//' | LC_ALL=C sort -u)
}

# libraries FILE: what ldd in ROOTFS says FILE (a path in ROOTFS) loads,
# one path a line (as stage-binary-and-deps.sh's binary_to_libraries).
libraries() { # FILE
	chroot "${rootfs}" /usr/bin/ldd "$1" 2>/dev/null | sed -E 's#.* => /#/#' | awk '$1 ~ /^\// { print $1 }' || true
}

# stage_binary STAGE PATH: a program of ROOTFS and the libraries it loads.
stage_binary() { # STAGE PATH
	local lib
	stage_file "$1" "$2"
	while read -r lib; do stage_file "$1" "${lib}"; done < <(libraries "$2")
}

# busybox: Debian's busybox-static, from ROOTFS if it has one, else this
# host's (kind's package list has none); static, so it needs nothing else.
busybox_src() {
	local b
	for b in "${rootfs}/usr/bin/busybox" /usr/bin/busybox; do
		[ -f "${b}" ] || continue
		check_root_chain "${b}"
		if LC_ALL=C readelf -l "${b}" 2>/dev/null | grep -q 'program interpreter'; then
			log "${b} is dynamically linked; skipped (want busybox-static)"
			continue
		fi
		echo "${b}"
		return 0
	done
	die "no static busybox in ${rootfs}/usr/bin or /usr/bin: apt-get install busybox-static"
}
# stage_busybox STAGE APPLET...: /usr/bin/busybox and one link per applet.
stage_busybox() { # STAGE APPLET...
	local s="$1" a
	shift
	merged_usr "${s}"
	install -m 0755 "${busybox}" "${s}/usr/bin/busybox"
	for a in "$@"; do ln -sfn busybox "${s}/usr/bin/${a}"; done
	# its copyright, from the tree it came from
	mkdir -p "${s}/usr/share/doc/busybox-static"
	install -m 0644 "${busybox%/usr/bin/busybox}/usr/share/doc/busybox-static/copyright" "${s}/usr/share/doc/busybox-static/copyright"
}

# stage_iptables STAGE: iptables as distroless-iptables has it, for
# kube-proxy (k8s.io/kubernetes pkg/util/iptables/iptables.go runs
# iptables, iptables-save, iptables-restore) and kindnetd (go-iptables).
stage_iptables() { # STAGE
	local s="$1" multi ext lib cmd
	merged_usr "${s}"
	for multi in xtables-legacy-multi xtables-nft-multi; do
		[ -f "${rootfs}/usr/sbin/${multi}" ] || die "ROOTFS has no /usr/sbin/${multi}: install iptables in it"
		stage_binary "${s}" "/usr/sbin/${multi}"
	done
	# the extensions (-m comment, -j MASQUERADE, ...) are loaded with
	# dlopen from here, so ldd of the programs does not list them
	ext="$(cd "${rootfs}" && find usr/lib -mindepth 2 -maxdepth 2 -type d -name xtables | head -n1)"
	[ -n "${ext}" ] || die "ROOTFS has no usr/lib/*/xtables (iptables' extensions)"
	for lib in "${rootfs}/${ext}"/*.so; do
		stage_binary "${s}" "/${ext}/${lib##*/}"
	done
	# the names Debian's iptables package gives the two programs
	for cmd in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
		ln -sfn xtables-legacy-multi "${s}/usr/sbin/${cmd%%-*}-legacy${cmd#"${cmd%%-*}"}"
		ln -sfn xtables-nft-multi "${s}/usr/sbin/${cmd%%-*}-nft${cmd#"${cmd%%-*}"}"
		# and the wrapper, until its first run picks one
		ln -sfn /usr/sbin/iptables-wrapper "${s}/usr/sbin/${cmd}"
	done
	install -m 0755 "${here}/iptables-wrapper" "${s}/usr/sbin/iptables-wrapper"
	# what distroless-iptables stages for the wrapper (and sleep)
	stage_busybox "${s}" sh cat chmod grep ln rm sleep wc
	# kube-proxy runs conntrack to clear UDP flows, and nft to clean up
	# the other mode's rules; without them it logs and carries on
	for cmd in conntrack nft; do
		if [ -f "${rootfs}/usr/sbin/${cmd}" ]; then
			stage_binary "${s}" "/usr/sbin/${cmd}"
		else
			log "ROOTFS has no /usr/sbin/${cmd}: this image goes without it"
		fi
	done
	stage_copyrights "${s}"
}

stage_kube() { # NAME STAGE
	base "$2"
	mkdir -p "$2/usr/local/bin"
	install -m 0755 "$(bin_of "$1")" "$2/usr/local/bin/$1"
	install -m 0755 "$(bin_of kube-log-runner)" "$2/go-runner"
}
stage_kube_proxy() { # STAGE
	stage_kube kube-proxy "$1"
	stage_iptables "$1"
}
stage_etcd() { # STAGE
	base "$1"
	mkdir -p "$1/usr/local/bin" "$1/var/lib/etcd"
	install -m 0755 "$(bin_of etcd)" "$1/usr/local/bin/etcd"
}
stage_coredns() { # STAGE
	base "$1"
	install -m 0755 "$(bin_of coredns)" "$1/coredns"
}
stage_pause() { # STAGE
	local gcc strip
	gcc="$(root_program gcc)" || die "no gcc on root's PATH: apt-get install gcc (for the pause image)"
	strip="$(root_program strip)" || die "no strip on root's PATH: apt-get install binutils"
	mkdir -p "$1"
	# root's copy of the source: what is compiled is what was read
	install -m 0644 "${LABS_REPO}/hack/images/pause/pause.c" "${work}/pause.c"
	"${gcc}" -static -Os -Wall -Werror -o "$1/pause" "${work}/pause.c"
	"${strip}" "$1/pause"
	chmod 0755 "$1/pause"
}
stage_kindnetd() { # STAGE
	base "$1"
	stage_iptables "$1"
	install -m 0755 "$(bin_of kindnetd)" "$1/usr/bin/kindnetd"
}
stage_local_path_provisioner() { # STAGE
	base "$1"
	mkdir -p "$1/usr/local/bin"
	install -m 0755 "$(bin_of local-path-provisioner)" "$1/usr/local/bin/local-path-provisioner"
}
stage_local_path_helper() { # STAGE
	base "$1"
	stage_busybox "$1" sh mkdir rm
}

# contents STAGE: every entry's path, type, mode, owner, link target and
# sha256: what the layer is made of.
contents() { # STAGE
	(cd "$1" && find . -printf '%p %y %m %U:%G %l\n' | LC_ALL=C sort)
	(cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum)
}

build_images() {
	local line ref tar ep cmd fn stage recipe stamp t0 what n=0
	make_root_dir "${images}"
	make_root_dir "${images}/.stamps"
	check_root_owned "$(realpath -m "${rootfs}")"
	rootfs="$(realpath -m "${rootfs}")"
	[ -d "${rootfs}/usr/sbin" ] || die "${rootfs} is no Debian tree (no usr/sbin)"
	[ "$(readlink "${rootfs}/lib" 2>/dev/null)" = usr/lib ] ||
		die "${rootfs}/lib is not a link to usr/lib: want a merged-/usr Debian 12 (bookworm) tree, as debootstrap makes it"
	[ -x "${rootfs}/usr/bin/ldd" ] || die "${rootfs} has no /usr/bin/ldd (libc-bin)"
	busybox="$(busybox_src)"
	local b
	for b in kube-apiserver kube-controller-manager kube-scheduler kube-proxy kube-log-runner etcd coredns kindnetd local-path-provisioner; do
		{ [ -f "${out}/bin/${b}" ] && [ -x "${out}/bin/${b}" ]; } || die "no ${out}/bin/${b}: run scripts/kind/build-go.sh ${out} first"
	done
	local -a listing=()
	for line in "${IMAGES[@]}"; do
		IFS='|' read -r ref tar ep cmd fn <<<"${line}"
		t0="$(now)"
		n=$((n + 1))
		stage="${work}/stage-${n}"
		mkdir "${stage}"
		# shellcheck disable=SC2086 # fn is "function [argument]"
		${fn} "${stage}"
		recipe="$({
			echo "${ref} ${ep} ${cmd}"
			sha256sum "${here}/../containerd/oci.sh" | cut -d' ' -f1
			contents "${stage}"
		} | sha256sum | cut -d' ' -f1)"
		stamp="${images}/.stamps/${tar%.tar}"
		if [ -f "${images}/${tar}" ] && [ -f "${stamp}" ] &&
			[ "$(cat "${stamp}")" = "${recipe} $(sha "${images}/${tar}")" ]; then
			what=reused
		else
			oci_image "${ref}" "${stage}" "${ep}" "${cmd}" "${images}/${tar}" \
				"kubelet-labs scripts/kind/component-images.sh"
			echo "${recipe} $(sha "${images}/${tar}")" >"${stamp}"
			what=built
		fi
		rm -rf "${stage}" "${work}/layout-${tar%.tar}"
		printf '%-62s %-7s %6.1f MiB  sha256:%.12s  %5.1fs\n' "${ref}" "${what}" \
			"$(awk -v b="$(size "${images}/${tar}")" 'BEGIN { print b / 1048576 }')" "$(manifest_digest "${images}/${tar}")" "$(elapsed "${t0}")"
		listing+=("${ref} ${tar}")
	done
	printf '%s\n' "${listing[@]}" >"${images}/images.txt.tmp"
	mv -f "${images}/images.txt.tmp" "${images}/images.txt"
}

# manifest_digest TAR: the image's manifest digest, from the layout's
# index.json (what containerd records as the image's digest).
manifest_digest() { # TAR
	tar -xOf "$1" ./index.json | "${jq}" -r '.manifests[0].digest' | sed 's/^sha256://'
}

# --- the check ------------------------------------------------------------------
# expect_out WHAT WANT CMD...: run CMD, print one line; fail unless its
# output contains WANT.
expect_out() { # LABEL WANT CMD...
	local label="$1" wanted="$2" got
	shift 2
	got="$("$@" 2>&1)" || true
	if [[ "${got}" == *"${wanted}"* ]]; then
		printf '  ok    %-48s %s\n' "${label}" "$(grep -F -m1 -- "${wanted}" <<<"${got}")"
	else
		printf '  FAIL  %-48s want %s, got: %s\n' "${label}" "${wanted}" "$(head -n3 <<<"${got}" | tr '\n' ' ')"
		failed=$((failed + 1))
	fi
}

# unpack TAR DIR: the image's one layer into DIR/rootfs, its config to
# DIR/config.json; checks every blob against its digest, and the name.
unpack() { # TAR DIR REF
	local d="$2" m c l b
	mkdir -p "${d}/layout" "${d}/rootfs"
	tar -xf "$1" -C "${d}/layout"
	for b in "${d}"/layout/blobs/sha256/*; do
		[ "$(sha "${b}")" = "${b##*/}" ] || die "$1: blob ${b##*/} does not match its digest"
	done
	[ "$("${jq}" -r '.manifests[0].annotations["io.containerd.image.name"]' "${d}/layout/index.json")" = "$3" ] ||
		die "$1: not named $3 in its index.json"
	m="$("${jq}" -r '.manifests[0].digest' "${d}/layout/index.json")"
	c="$("${jq}" -r '.config.digest' "${d}/layout/blobs/sha256/${m#sha256:}")"
	l="$("${jq}" -r '.layers[0].digest' "${d}/layout/blobs/sha256/${m#sha256:}")"
	cp "${d}/layout/blobs/sha256/${c#sha256:}" "${d}/config.json"
	tar -xf "${d}/layout/blobs/sha256/${l#sha256:}" -C "${d}/rootfs"
	# the one device programs here open (2>/dev/null): a runtime mounts
	# /dev; a node in this scratch copy needs no mount and goes with it
	mkdir -p "${d}/rootfs/dev"
	mknod -m 0666 "${d}/rootfs/dev/null" c 1 3
	rm -rf "${d}/layout"
}

# in_image DIR CMD...: CMD inside the unpacked image, with its PATH (chroot
# looks CMD up in it), as the runtime would start it; nothing mounted.
in_image() { # DIR CMD...
	local d="$1" path
	shift
	path="$("${jq}" -r '.config.Env[] | select(startswith("PATH=")) | sub("^PATH="; "")' "${d}/config.json")"
	env -i PATH="${path}" HOME=/root chroot "${d}/rootfs" "$@" </dev/null
}

check_iptables() { # DIR
	local d="$1"
	expect_out "iptables --version (the wrapper picks)" "iptables v" in_image "${d}" iptables --version
	expect_out "  and points iptables at" "xtables-" readlink "${d}/rootfs/usr/sbin/iptables"
	expect_out "ip6tables-save --version" "ip6tables-save v" in_image "${d}" ip6tables-save --version
	expect_out "iptables-legacy --version" "(legacy)" in_image "${d}" iptables-legacy --version
	expect_out "iptables-nft-restore --version" "(nf_tables)" in_image "${d}" iptables-nft-restore --version
	expect_out "iptables-nft -m comment -h (an extension)" "comment match options" in_image "${d}" iptables-nft -m comment -h
	if [ -e "${d}/rootfs/usr/sbin/conntrack" ]; then
		expect_out "conntrack --version" "conntrack v" in_image "${d}" conntrack --version
	fi
	if [ -e "${d}/rootfs/usr/sbin/nft" ]; then
		expect_out "nft --version" "nftables v" in_image "${d}" nft --version
	fi
}

verify() {
	local ref tar d plugins linked
	failed=0
	[ -f "${images}/images.txt" ] || die "no ${images}/images.txt: run $0 ${out} ROOTFS first"
	# the plugins scripts/kind/coredns/main.go links, in its order
	linked="$(sed -n '/^var directives = \[\]string{/,/^}/s/^[[:space:]]*"\(.*\)",$/\1/p' "${here}/coredns/main.go" | LC_ALL=C sort | paste -sd' ')"
	while read -r ref tar; do
		echo "${ref} (${tar}, sha256:$(manifest_digest "${images}/${tar}" | cut -c1-12))"
		d="$(mktemp -d "${work}/verify.XXXXXX")"
		unpack "${images}/${tar}" "${d}" "${ref}"
		case "${tar}" in
		kube-apiserver.tar | kube-controller-manager.tar | kube-scheduler.tar | kube-proxy.tar)
			expect_out "${tar%.tar} --version (on PATH)" "Kubernetes ${KUBERNETES_VERSION}" in_image "${d}" "${tar%.tar}" --version
			expect_out "/go-runner /usr/local/bin/${tar%.tar} --version" "Kubernetes ${KUBERNETES_VERSION}" \
				in_image "${d}" /go-runner "/usr/local/bin/${tar%.tar}" --version
			[ "${tar}" != kube-proxy.tar ] || check_iptables "${d}"
			;;
		etcd.tar) expect_out "etcd --version (on PATH)" "etcd Version: ${ETCD_VERSION#v}" in_image "${d}" etcd --version ;;
		coredns.tar)
			expect_out "/coredns -version" "CoreDNS-${COREDNS_VERSION#v}" in_image "${d}" /coredns -version
			# every directive of main.go, and the four its imports register
			# (see main.go); nothing else
			plugins="$(in_image "${d}" /coredns -plugins | tr -d ' \t' | sed '/^$/d; s/^dns\.//' | LC_ALL=C sort | paste -sd' ')"
			linked="$(printf '%s\n' "${linked// /$'\n'}" debug dnstap metadata transfer | LC_ALL=C sort | paste -sd' ')"
			expect_out "/coredns -plugins" "=${linked}=" echo "=${plugins}="
			# a plugin linked but not a directive is refused: Directives is ours
			printf '.:0 {\n  dnstap /tmp/tap\n}\n' >"${d}/rootfs/tmp/Corefile"
			expect_out "/coredns -conf with dnstap (no directive)" "Unknown directive 'dnstap'" in_image "${d}" /coredns -conf /tmp/Corefile
			;;
		pause.tar) expect_out "/pause -v" "pause" in_image "${d}" /pause -v ;;
		kindnetd.tar)
			expect_out "/bin/kindnetd -help" "Usage of /bin/kindnetd" in_image "${d}" /bin/kindnetd -help
			check_iptables "${d}"
			;;
		local-path-provisioner.tar)
			expect_out "local-path-provisioner --version (on PATH)" "${LOCAL_PATH_PROVISIONER_VERSION}" \
				in_image "${d}" local-path-provisioner --version
			;;
		local-path-helper.tar)
			# what the provisioner's setup and teardown scripts run
			expect_out "/bin/sh -c 'mkdir -m 0777 -p DIR; rm -rf DIR'" "sh mkdir rm: ok" in_image "${d}" /bin/sh -c \
				'mkdir -m 0777 -p /tmp/pv/a && rm -rf /tmp/pv && [ ! -e /tmp/pv ] && echo "sh mkdir rm: ok"'
			;;
		*) die "${tar}: no check for it" ;;
		esac
		rm -rf "${d}"
	done <"${images}/images.txt"
	[ "${failed}" -eq 0 ] || die "${failed} check(s) failed"
	echo "all ${#IMAGES[@]} images checked"
}

jq="$(root_program jq)" || die "no jq on root's PATH: apt-get install jq"
if [ "${verify_only}" = false ]; then
	[ -n "${rootfs}" ] || die "${usage}"
	exec 7>"${out}/.component-images.lock"
	if ! flock -n 7; then
		log "another component-images.sh holds ${out}/.component-images.lock; waiting"
		flock 7
	fi
	start="$(now)"
	build_images
	log "images ready in $(elapsed "${start}")s: ${images}/images.txt"
fi
verify

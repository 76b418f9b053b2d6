#!/usr/bin/env bash
# node-image.sh ROOTFS KIND_DIR CONTAINERD_DIR NAME: the kind node image,
# assembled the way `kind build node-image` makes it
# (sigs.k8s.io/kind@v0.32.0 pkg/build/nodeimage/buildcontext.go), with no
# registry: every image kubeadm and kind need is already built here
# (component-images.sh) and preloaded into the node's containerd store.
#
#   ROOTFS         the Debian tree of rootfs.sh (kind's base image)
#   KIND_DIR       what build-go.sh and component-images.sh made: bin/ and
#                  images/ (images.txt lists every image tar and its ref)
#   CONTAINERD_DIR containerd, ctr and containerd-shim-runc-v2 v2.2.9, as
#                  scripts/build-containerd.sh builds them for the labs
#   NAME           the image's name in Docker
#
# Steps, and where kind does the same:
#   1. a copy of ROOTFS gets containerd (/usr/local/bin, where kind's unit
#      runs it) and /etc/containerd/cri-base.json made by its own ctr
#      (images/base/Dockerfile 206-215), crictl (223), and kubeadm,
#      kubelet, kubectl in /usr/bin (buildcontext.go 101-114)
#   2. /kind/version (buildcontext.go 116-126) and kind's two manifests,
#      default-cni.yaml (kindnetd) and default-storage.yaml (local-path),
#      read from kind's own source (const_cni.go, const_storage.go), with
#      {{ .PodSubnet }} left for `kind create` to fill in (buildcontext.go
#      238-253)
#   3. every image of `kubeadm config images list` (pause swapped for
#      containerd's sandbox_image), kindnetd and local-path imported into
#      the node's /var/lib/containerd, namespace k8s.io, with kind's own
#      ctr flags (imageimporter.go 77-82); one missing fails the build —
#      kind would try to pull it at create time, and there is no registry
#   4. one layer, and the image metadata of kind's base image
#      (images/base/Dockerfile 237-247: container=docker, STOPSIGNAL
#      SIGRTMIN+3, the entrypoint) and of its commit (buildcontext.go
#      136-143), written as a `docker save` archive and `docker load`ed
#      (Docker 20.10 loads no bare OCI layout). The archive stays in
#      KIND_DIR: `docker load -i` it on another machine (the VM).
#      NODE_IMAGE_LOAD=false: the archive only, no Docker needed.
set -euo pipefail
trap 'echo "node-image: line ${LINENO}: \"${BASH_COMMAND}\" failed" >&2' ERR

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/containerd/lib.sh
source "${here}/../containerd/lib.sh"
# shellcheck source=scripts/containerd/oci.sh
source "${here}/../containerd/oci.sh" # ARCH

rootfs="${1:?usage: node-image.sh ROOTFS KIND_DIR CONTAINERD_DIR NAME}"
kind_out="${2:?usage: node-image.sh ROOTFS KIND_DIR CONTAINERD_DIR NAME}"
ctrd="${3:?usage: node-image.sh ROOTFS KIND_DIR CONTAINERD_DIR NAME}"
name="${4:?usage: node-image.sh ROOTFS KIND_DIR CONTAINERD_DIR NAME}"
# shellcheck source=scripts/kind/versions.sh
source "${here}/versions.sh" # KUBERNETES_VERSION, KIND_VERSION

need_root "chroot, a containerd of its own and Docker need it"
for p in "${rootfs}" "${kind_out}" "${ctrd}"; do check_root_owned "${p}"; done
for b in containerd ctr containerd-shim-runc-v2; do [ -x "${ctrd}/${b}" ] || die "no ${ctrd}/${b}: run scripts/build-containerd.sh"; done
for b in kubeadm kubelet kubectl crictl; do [ -x "${kind_out}/bin/${b}" ] || die "no ${kind_out}/bin/${b}: run scripts/kind/build-go.sh"; done
[ -f "${kind_out}/images/images.txt" ] || die "no ${kind_out}/images/images.txt: run scripts/kind/component-images.sh"
docker_bin=""
if [ "${NODE_IMAGE_LOAD:-true}" = true ]; then
	docker_bin="$(root_program docker)" || die "no docker on root's PATH (${ROOT_PATH}): apt-get install docker.io"
fi

start="$(now)"
work="$(mktemp -d "${kind_out}/.node-image.XXXXXX")"
ctrd_pid=""
cleanup() {
	if [ -n "${ctrd_pid}" ]; then
		kill "${ctrd_pid}" 2>/dev/null || true
		wait "${ctrd_pid}" 2>/dev/null || true
	fi
	rm -rf -- "${work}"
}
trap cleanup EXIT
stage="${work}/rootfs"
log "node image: copying ${rootfs}"
cp -a -- "${rootfs}" "${stage}"
rm -f -- "${stage}/.kubelet-labs-rootfs"

# --- 1. containerd, crictl, the Kubernetes binaries -------------------------
install -m 0755 "${ctrd}/containerd" "${ctrd}/ctr" "${ctrd}/containerd-shim-runc-v2" "${stage}/usr/local/bin/"
install -m 0755 "${kind_out}/bin/crictl" "${stage}/usr/local/bin/"
install -m 0755 -o 0 -g 0 "${kind_out}/bin/kubeadm" "${kind_out}/bin/kubelet" "${kind_out}/bin/kubectl" "${stage}/usr/bin/"
chroot "${stage}" sh -c 'ctr oci spec |
	jq ".hooks.createContainer[.hooks.createContainer | length] |= . + {\"path\": \"/kind/bin/mount-product-files.sh\"}" |
	jq "del(.process.rlimits)" >/etc/containerd/cri-base.json'
chroot "${stage}" containerd --version >/dev/null

# --- 2. /kind/version and kind's manifests ----------------------------------
printf '%s' "${KUBERNETES_VERSION}" >"${stage}/kind/version"
root_go
kind_src="$(cd / && go mod download -json "sigs.k8s.io/kind@${KIND_VERSION}" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')/pkg/build/nodeimage"
[ -f "${kind_src}/const_cni.go" ] || die "sigs.k8s.io/kind@${KIND_VERSION}: no pkg/build/nodeimage/const_cni.go"
# go_raw_const FILE CONST: the text of a Go raw-string constant of kind's,
# with its ` + name + ` pieces replaced by the string constants they name.
go_raw_const() {
	awk -v want="$2" '
		/^const [A-Za-z]+ = ".*"$/ { v = $4; gsub(/"/, "", v); consts[$2] = v }
		$0 == "const " want " = `" { on = 1; next }
		on && $0 == "`" { exit }
		on {
			while (match($0, /` \+ [A-Za-z]+ \+ `/)) {
				ref = substr($0, RSTART + 4, RLENGTH - 8)
				if (!(ref in consts)) { print "unknown constant " ref > "/dev/stderr"; exit 1 }
				$0 = substr($0, 1, RSTART - 1) consts[ref] substr($0, RSTART + RLENGTH)
			}
			print
		}' "$1"
}
mkdir -p "${stage}/kind/manifests"
go_raw_const "${kind_src}/const_cni.go" defaultCNIManifest >"${stage}/kind/manifests/default-cni.yaml"
go_raw_const "${kind_src}/const_storage.go" defaultStorageManifest >"${stage}/kind/manifests/default-storage.yaml"
for m in default-cni default-storage; do
	[ -s "${stage}/kind/manifests/${m}.yaml" ] || die "kind's ${m} manifest came out empty"
done

# --- 3. the images, preloaded -----------------------------------------------
# What kind would pull: kubeadm's list with containerd's sandbox image
# instead of kubeadm's pause, and the images the two manifests name.
sandbox="$(sed -n 's/^[[:space:]]*sandbox_image = "\(.*\)"/\1/p' "${stage}/etc/containerd/config.toml")"
mapfile -t required < <(
	chroot "${stage}" kubeadm config images list --kubernetes-version "${KUBERNETES_VERSION}" | grep -v /pause:
	echo "${sandbox}"
	sed -n 's/^[[:space:]]*-\{0,1\}[[:space:]]*image: //p; s/^[[:space:]]*- \(docker\.io\/.*\)$/\1/p' \
		"${stage}/kind/manifests/default-cni.yaml" "${stage}/kind/manifests/default-storage.yaml" | sort -u
)
declare -A tar_of=()
while read -r ref tar; do
	[ -n "${ref}" ] || continue
	tar_of["${ref}"]="${tar}"
done <"${kind_out}/images/images.txt"
for ref in "${required[@]}"; do
	[ -n "${tar_of[${ref}]:-}" ] || die "${ref}: kind needs it on the node and component-images.sh built no image of that name"
	[ -f "${kind_out}/images/${tar_of[${ref}]##*/}" ] || die "${ref}: ${tar_of[${ref}]} is missing"
done

# containerd of our own on this host, on the node's store only: no CRI, its
# own state and socket in the scratch folder, stopped before the image is made.
mkdir -p "${work}/state" "${stage}/var/lib/containerd"
cat >"${work}/config.toml" <<EOF
version = 3
root = "${stage}/var/lib/containerd"
state = "${work}/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime", "io.containerd.cri.v1.images", "io.containerd.nri.v1.nri"]
[grpc]
  address = "${work}/containerd.sock"
[ttrpc]
  address = "${work}/containerd.sock.ttrpc"
EOF
"${ctrd}/containerd" --config "${work}/config.toml" >"${work}/containerd.log" 2>&1 &
ctrd_pid=$!
for _ in $(seq 1 50); do
	[ -S "${work}/containerd.sock" ] && "${ctrd}/ctr" -a "${work}/containerd.sock" version >/dev/null 2>&1 && break
	sleep 0.2
done
"${ctrd}/ctr" -a "${work}/containerd.sock" version >/dev/null 2>&1 ||
	{
		tail -n 20 "${work}/containerd.log" >&2
		die "the importing containerd did not start"
	}
for ref in "${required[@]}"; do
	"${ctrd}/ctr" -a "${work}/containerd.sock" --namespace=k8s.io images import \
		--label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack \
		"${kind_out}/images/${tar_of[${ref}]##*/}" >"${work}/ctr.log" 2>&1 ||
		{
			cat "${work}/ctr.log" >&2
			die "${ref}: ctr images import ${tar_of[${ref}]} failed"
		}
	# the whole list first: grep -q would end the pipe early (SIGPIPE to
	# ctr, a failure under pipefail)
	image_names="$("${ctrd}/ctr" -a "${work}/containerd.sock" --namespace=k8s.io images ls -q 2>/dev/null)"
	grep -qxF "${ref}" <<<"${image_names}" ||
		die "${ref}: imported ${tar_of[${ref}]}, but containerd has no image of that name"
	log "node image: preloaded ${ref}"
done
kill "${ctrd_pid}"
wait "${ctrd_pid}" 2>/dev/null || true
ctrd_pid=""

# --- 4. one layer, kind's metadata, docker load -------------------------------
log "node image: packing the layer"
img="${work}/image"
mkdir -p "${img}"
# owners as they are (Debian has files of other users and groups), file
# capabilities kept, sorted and with fixed times: the same inputs give the
# same layer
tar --sort=name --numeric-owner --mtime=@0 --xattrs --xattrs-include='security.capability' \
	--format=posix --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
	-C "${stage}" -cf "${img}/layer.tar" .
layer_sha="$(sha256sum "${img}/layer.tar" | cut -d' ' -f1)"
mkdir -p "${img}/${layer_sha}"
mv "${img}/layer.tar" "${img}/${layer_sha}/layer.tar"
printf '{"architecture":"%s","os":"linux","config":{"Env":["container=docker","PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","HTTP_PROXY=","HTTPS_PROXY=","NO_PROXY="],"Entrypoint":["/usr/local/bin/entrypoint","/sbin/init"],"StopSignal":"SIGRTMIN+3"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"1970-01-01T00:00:00Z","created_by":"kubelet-labs scripts/kind/node-image.sh (kind %s node image, Kubernetes %s)"}]}' \
	"${ARCH}" "${layer_sha}" "${KIND_VERSION}" "${KUBERNETES_VERSION}" >"${img}/config.json"
cfg_sha="$(sha256sum "${img}/config.json" | cut -d' ' -f1)"
mv "${img}/config.json" "${img}/${cfg_sha}.json"
printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "${cfg_sha}" "${name}" "${layer_sha}" >"${img}/manifest.json"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "${img}" -cf "${kind_out}/node-image.tar.new" .
mv -- "${kind_out}/node-image.tar.new" "${kind_out}/node-image.tar"
rm -rf -- "${img}"

echo "sha256:${cfg_sha}" >"${kind_out}/node-image.id"
if [ "${NODE_IMAGE_LOAD:-true}" = true ]; then
	log "node image: docker load"
	"${docker_bin}" load -i "${kind_out}/node-image.tar" >/dev/null
	id="$("${docker_bin}" image inspect --format '{{.Id}}' "${name}")"
	[ "${id}" = "sha256:${cfg_sha}" ] || die "docker has ${name} as ${id}, the archive's config is sha256:${cfg_sha}"
fi
log "node image: ${name} in $(elapsed "${start}") s"

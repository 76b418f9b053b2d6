#!/usr/bin/env bash
# Build containerd v2 from its Go module into root's tree:
#
#   sudo scripts/build-containerd.sh             # builds bin/containerd-v2.2.9/ if missing
#   sudo scripts/build-containerd.sh --force     # rebuilds it
#   sudo scripts/build-containerd.sh --which-go  # says which Go it would build with
#
# Three programs land in root's tree, /var/lib/kubelet-labs/bin/containerd-<version>/
# (LABS_ROOT_DIR; see scripts/containerd/lib.sh): root runs them, so they
# live where only root can replace them. Run as root (containerd-up.sh does):
#   containerd               the daemon (with its CRI plugin)
#   containerd-shim-runc-v2  the shim it starts per pod; runs Debian's runc
#   ctr                      the client the up script imports images with
# A folder per version: a new pin builds next to the old one, nothing is
# overwritten in place, and scripts/containerd-up.sh picks the pinned one.
#
# Idempotent and safe to run in parallel: one build at a time under a file
# lock, skipped when the folder holds programs that report the pinned version.
# Needs Go (a root-owned one, found where a normal install puts it even
# under sudo's secure_path: find_go in scripts/containerd/lib.sh) and the Go
# module proxy; no C compiler (CGO_ENABLED=0: static programs, as
# containerd's own release builds the shim).
set -euo pipefail
trap 'echo "build-containerd: line ${LINENO}: \"${BASH_COMMAND}\" failed" >&2' ERR

# shellcheck source=scripts/containerd/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/containerd/lib.sh"

force=false which_go=false
case "${1:-}" in
"") ;;
--force) force=true ;;
--which-go) which_go=true ;;
*) die "usage: $0 [--force | --which-go]" ;;
esac

MODULE=github.com/containerd/containerd/v2
out="${CONTAINERD2_BIN_DIR}"
bin_dir="$(dirname "${out}")"
[ "$(id -u)" -eq 0 ] || die "run as root (sudo $0): containerd goes to root's ${bin_dir}, where only root can replace what root runs"
# Nothing of the folder sudo was typed in: its go.mod or go.work would pick
# the toolchain and the module graph of a go command run there.
cd /
if [ "${which_go}" = true ]; then
	find_go
	exit 0
fi
make_root_tree
make_root_dir "${bin_dir}"

built() {
	local p
	for p in containerd containerd-shim-runc-v2 ctr; do
		[ -x "${out}/${p}" ] || return 1
	done
	"${out}/containerd" --version 2>/dev/null | grep -qF " ${CONTAINERD2_VERSION} "
}

# One build at a time: CI, the up script and a learner may all ask for it.
# The kernel drops an flock when its holder dies, so a killed build never
# blocks the next one.
exec 9>"${bin_dir}/.containerd-build.lock"
if ! flock -n 9; then
	log "another build of containerd holds ${bin_dir}/.containerd-build.lock; waiting"
	flock 9
fi

if [ "${force}" = false ] && built; then
	log "containerd ${CONTAINERD2_VERSION} already built: ${out}"
	exit 0
fi

# Root runs this go and what it compiles: root_go (scripts/containerd/lib.sh).
root_go
log "building with $(go env GOVERSION) (${go_bin})"

t0="$(now)"
# The module's own folder in the module cache (downloaded if needed). We
# build inside it, so its go.mod and go.sum pin every dependency exactly as
# upstream's release does; -mod=readonly (the default) refuses to change them.
mod_dir="$(GOFLAGS=-mod=mod go mod download -json "${MODULE}@${CONTAINERD2_VERSION}" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
if [ -z "${mod_dir}" ] || [ ! -d "${mod_dir}" ]; then
	die "could not download ${MODULE}@${CONTAINERD2_VERSION} from the Go module proxy"
fi
go_line="$(awk '$1 == "go" { print $2; exit }' "${mod_dir}/go.mod")"
[ "${go_line}" = "${CONTAINERD2_GO_MIN}" ] ||
	die "containerd ${CONTAINERD2_VERSION}'s go.mod says go ${go_line}, scripts/containerd/lib.sh CONTAINERD2_GO_MIN says ${CONTAINERD2_GO_MIN}: make them agree"
log "building containerd ${CONTAINERD2_VERSION} from ${mod_dir} (a few minutes on a cold Go cache)"

tmp="$(mktemp -d "${bin_dir}/.containerd-${CONTAINERD2_VERSION}.XXXXXX")"
trap 'rm -rf "${tmp}"' EXIT
# Leave out the snapshotters and the tracing exporter the config disables
# anyway (btrfs needs cgo; devmapper and zfs need host tools): less to build.
tags="urfave_cli_no_docs no_btrfs no_devmapper no_zfs no_tracing"
ldflags="-s -w -X ${MODULE}/version.Version=${CONTAINERD2_VERSION} -X ${MODULE}/version.Package=${MODULE}"
(
	cd "${mod_dir}"
	# GOWORK=off (go_env): a go.work above the cache must not pull this
	# build into another module graph.
	go build -trimpath -tags "${tags}" -ldflags "${ldflags}" -o "${tmp}/" ./cmd/containerd ./cmd/ctr
	# the shim speaks ttrpc only: no_grpc, as upstream's Makefile builds it
	go build -trimpath -tags "${tags} no_grpc" -ldflags "${ldflags}" -o "${tmp}/" ./cmd/containerd-shim-runc-v2
)
chmod 0755 "${tmp}" "${tmp}"/*
# Swap the whole folder: a reader sees the old set or the new one, never a mix.
if [ -e "${out}" ]; then
	mv -T "${out}" "${tmp}.old"
	mv -T "${tmp}" "${out}"
	rm -rf "${tmp}.old"
else
	mv -T "${tmp}" "${out}"
fi
trap - EXIT
log "built containerd ${CONTAINERD2_VERSION} in $(elapsed "${t0}")s: ${out}"
"${out}/containerd" --version

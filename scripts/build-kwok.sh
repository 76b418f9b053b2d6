#!/usr/bin/env bash
# Build KWOK's controller (sigs.k8s.io/kwok v0.7.0, cmd/kwok) into the labs
# state folder, for lab 18's benchmark (fleet mode beside KWOK).
#
#   scripts/build-kwok.sh            # builds ${LABS_STATE_DIR:-<repo>/.labs}/bin/kwok if missing
#   scripts/build-kwok.sh --force    # rebuilds it
#
# Idempotent: an existing binary that reports the pinned version is kept.
# Only the Go module proxy is needed, and the version is always pinned (the
# proxy may refuse version lists). The module cache is read-only, so we build
# from it directly with -mod=mod: KWOK's own go.sum pins every dependency and
# nothing is written back. Should the checksum database lack the module,
# set GONOSUMDB=sigs.k8s.io/kwok as scripts/build-crictl.sh does for cri-tools.
set -euo pipefail

KWOK_VERSION=v0.7.0
MODULE=sigs.k8s.io/kwok

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
state_dir="${LABS_STATE_DIR:-${repo_root}/.labs}"
bin_dir="${state_dir}/bin"
# A state folder this script makes gets the labs' marker (internal/state):
# the labs use, and `make clean` removes, only a marked folder.
if [ ! -e "${state_dir}" ]; then
	mkdir -p "${state_dir}"
	chmod 0700 "${state_dir}"
	: >"${state_dir}/.kubelet-labs-state"
fi
out="${bin_dir}/kwok"

force=false
if [[ "${1:-}" == "--force" ]]; then
	force=true
fi

mkdir -p "${bin_dir}"

# One build at a time: a test and a benchmark may call this together.
# (util-linux flock; without it, the atomic rename below still keeps the
# binary whole, two builds just waste time.)
if command -v flock >/dev/null; then
	exec 9>"${bin_dir}/.kwok-build.lock"
	flock 9
fi

if [[ "${force}" == false && -x "${out}" ]] &&
	"${out}" --version 2>/dev/null | grep -q "${KWOK_VERSION#v}"; then
	echo "kwok ${KWOK_VERSION} already built: ${out}"
	exit 0
fi

# Resolve the module directory in the module cache (downloads it if needed).
# From / : never inside someone's go.mod, whose requirements must not mix in.
mod_dir="$(
	cd / &&
		GOFLAGS=-mod=mod go mod download -json "${MODULE}@${KWOK_VERSION}" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
)"
if [[ -z "${mod_dir}" || ! -d "${mod_dir}" ]]; then
	echo "error: could not download ${MODULE}@${KWOK_VERSION} from the Go module proxy" >&2
	exit 1
fi

echo "building kwok ${KWOK_VERSION} from ${mod_dir} (a few minutes the first time) ..."
tmp="$(mktemp "${bin_dir}/.kwok.XXXXXX")"
trap 'rm -f "${tmp}"' EXIT
(
	cd "${mod_dir}"
	# GOWORK=off: a go.work above the cache must not pull this build into
	# another module graph. KWOK needs no cgo.
	GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod \
		go build -trimpath -ldflags "-s -w" -o "${tmp}" ./cmd/kwok
)
chmod 0755 "${tmp}"
# Atomic rename: a parallel reader never sees a half-written binary.
mv -f "${tmp}" "${out}"
trap - EXIT
echo "built ${out}"
"${out}" --version

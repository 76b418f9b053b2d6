#!/usr/bin/env bash
# Build crictl (sigs.k8s.io/cri-tools v1.34.0) into the labs state folder.
#
#   scripts/build-crictl.sh            # builds ${LABS_STATE_DIR:-<repo>/.labs}/bin/crictl if missing
#   scripts/build-crictl.sh --force    # rebuilds it
#
# Idempotent: an existing binary that reports the pinned version is kept.
# Only the Go module proxy is needed. cri-tools has no checksum-database
# entry on the proxy, hence GONOSUMDB for that one module; its own go.sum
# still pins every dependency. The module cache is read-only, so we build
# from it directly with -mod=mod (go.sum is complete; nothing is written
# back) and never need a writable copy.
set -euo pipefail

CRI_TOOLS_VERSION=v1.34.0
MODULE=sigs.k8s.io/cri-tools

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
out="${bin_dir}/crictl"

force=false
if [[ "${1:-}" == "--force" ]]; then
	force=true
fi

mkdir -p "${bin_dir}"

# One build at a time: tests of several packages may call this in parallel.
# (util-linux flock; without it, the atomic rename below still keeps the
# binary whole, two builds just waste time.)
if command -v flock >/dev/null; then
	exec 9>"${bin_dir}/.crictl-build.lock"
	flock 9
fi

if [[ "${force}" == false && -x "${out}" ]] &&
	"${out}" --version 2>/dev/null | grep -q "${CRI_TOOLS_VERSION#v}"; then
	echo "crictl ${CRI_TOOLS_VERSION} already built: ${out}"
	exit 0
fi

# Resolve the module directory in the module cache (downloads it if needed).
mod_dir="$(
	cd "${repo_root}" &&
		GONOSUMDB="${MODULE}" GOFLAGS=-mod=mod \
			go mod download -json "${MODULE}@${CRI_TOOLS_VERSION}" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
)"
if [[ -z "${mod_dir}" || ! -d "${mod_dir}" ]]; then
	echo "error: could not download ${MODULE}@${CRI_TOOLS_VERSION} from the Go module proxy" >&2
	exit 1
fi

echo "building crictl ${CRI_TOOLS_VERSION} from ${mod_dir} ..."
tmp="$(mktemp "${bin_dir}/.crictl.XXXXXX")"
trap 'rm -f "${tmp}"' EXIT
(
	cd "${mod_dir}"
	# GOWORK=off: a go.work above the cache must not pull this build into
	# another module graph. CGO is not needed by crictl.
	GOWORK=off CGO_ENABLED=0 GONOSUMDB="${MODULE}" GOFLAGS=-mod=mod \
		go build -trimpath \
		-ldflags "-s -w -X ${MODULE}/pkg/version.Version=${CRI_TOOLS_VERSION#v}" \
		-o "${tmp}" ./cmd/crictl
)
chmod 0755 "${tmp}"
# Atomic rename: a parallel reader never sees a half-written binary.
mv -f "${tmp}" "${out}"
trap - EXIT
echo "built ${out}"
"${out}" --version

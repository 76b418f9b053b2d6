# shellcheck shell=bash
# Shared by scripts/build-crictl.sh and scripts/build-kwok.sh: build a tool
# the labs run from its Go module, at a pinned version, into the labs state
# folder's bin/. Sourced, never run; the learner runs it, never root (what
# root runs is built by scripts/build-containerd.sh into root's tree).
#
# Only the Go module proxy is needed, and the version is always pinned (the
# proxy may refuse version lists). The module cache is read-only, so the
# build runs inside the module's folder there with -mod=mod: the module's
# own go.sum pins every dependency and nothing is written back, so no
# writable copy is ever needed.

# build_go_tool NAME MODULE VERSION PACKAGE [--nosumdb] [--version-var VAR] [-- ARGS]
#
# Builds PACKAGE (e.g. ./cmd/crictl) of MODULE@VERSION into
# ${LABS_STATE_DIR:-<repo>/.labs}/bin/NAME. ARGS are the calling script's:
# none, or --force to rebuild. Idempotent: a binary whose --version names
# VERSION is kept.
#   --nosumdb          the module has no checksum-database entry on the
#                      proxy: GONOSUMDB for that one module (its go.sum still
#                      pins every dependency)
#   --version-var VAR  stamp the version into VAR, a package variable below
#                      MODULE (e.g. pkg/version.Version), as upstream's
#                      Makefile does: -X MODULE/VAR=VERSION without the v
build_go_tool() {
	local name="$1" module="$2" version="$3" package="$4"
	shift 4
	local version_var="" force=false
	# GOWORK=off: a go.work above the cache must not pull a build into
	# another module graph. CGO_ENABLED=0: neither tool needs cgo, and a
	# static binary runs wherever the state folder goes.
	local goenv=(GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod)
	while [ $# -gt 0 ]; do
		case "$1" in
		--nosumdb) goenv+=("GONOSUMDB=${module}") ;;
		--version-var)
			version_var="$2"
			shift
			;;
		--) shift && break ;;
		*)
			echo "build_go_tool: unknown option $1" >&2
			return 2
			;;
		esac
		shift
	done
	case "${1:-}" in
	"") ;;
	--force) force=true ;;
	*)
		echo "usage: $0 [--force]" >&2
		return 2
		;;
	esac

	local repo_root state_dir bin_dir out
	repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
	state_dir="${LABS_STATE_DIR:-${repo_root}/.labs}"
	bin_dir="${state_dir}/bin"
	out="${bin_dir}/${name}"
	# A state folder this makes gets the labs' marker (internal/state): the
	# labs use, and `make clean` removes, only a marked folder.
	if [ ! -e "${state_dir}" ]; then
		mkdir -p "${state_dir}"
		chmod 0700 "${state_dir}"
		: >"${state_dir}/.kubelet-labs-state"
	fi
	mkdir -p "${bin_dir}"

	# One build at a time: tests of several packages, or a test and a
	# benchmark, may ask at once. (util-linux flock; without it, the atomic
	# rename below still keeps the binary whole, two builds just waste time.)
	if command -v flock >/dev/null; then
		exec 9>"${bin_dir}/.${name}-build.lock"
		flock 9
	fi

	if [[ "${force}" == false && -x "${out}" ]] &&
		"${out}" --version 2>/dev/null | grep -qF "${version#v}"; then
		echo "${name} ${version} already built: ${out}"
		return 0
	fi

	# The module's folder in the module cache (downloaded if needed). From /:
	# never inside someone's go.mod, whose requirements must not mix in.
	local mod_dir
	mod_dir="$(
		cd / &&
			env "${goenv[@]}" go mod download -json "${module}@${version}" |
			sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
	)"
	if [[ -z "${mod_dir}" || ! -d "${mod_dir}" ]]; then
		echo "error: could not download ${module}@${version} from the Go module proxy" >&2
		return 1
	fi

	local ldflags="-s -w"
	if [ -n "${version_var}" ]; then
		ldflags+=" -X ${module}/${version_var}=${version#v}"
	fi
	echo "building ${name} ${version} from ${mod_dir} (minutes the first time) ..."
	# global, for the trap: a build cut short leaves no half-written file
	go_tool_tmp="$(mktemp "${bin_dir}/.${name}.XXXXXX")"
	trap 'rm -f "${go_tool_tmp}"' EXIT
	if ! (cd "${mod_dir}" && env "${goenv[@]}" go build -trimpath -ldflags "${ldflags}" -o "${go_tool_tmp}" "${package}"); then
		echo "error: building ${name} ${version} failed" >&2
		return 1
	fi
	chmod 0755 "${go_tool_tmp}"
	# Atomic rename: a parallel reader never sees a half-written binary.
	mv -f "${go_tool_tmp}" "${out}"
	trap - EXIT
	echo "built ${out}"
	"${out}" --version
}

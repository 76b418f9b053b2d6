#!/usr/bin/env bash
# make clean: remove the labs' state folder (.labs/ or $LABS_STATE_DIR) —
# only a folder the labs made, and only while nothing of the labs runs in it.
#
#   make clean                       # .labs/ at the repository root
#   LABS_STATE_DIR=~/labs make clean # another state folder
#
# Refused, with the folder left as it was:
#   - a folder without the marker file the labs put in the folders they make
#     (internal/state: .kubelet-labs-state): LABS_STATE_DIR=$HOME, or any
#     other folder that is not a state folder, is never deleted. The default
#     .labs/ at the repository root is ours by its name, marked or not.
#   - a folder in which something holds one of the labs' locks: lab 00's
#     cluster (cluster/run.lock), a node (nodes/*/node.lock), a build
#     (bin/.build.lock), a README run... Stop it first.
# Root's tree (/var/lib/kubelet-labs: our containerd, its images and build)
# is not the learner's: `sudo scripts/containerd-down.sh --purge` removes it.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
marker=.kubelet-labs-state
die() {
	printf 'make clean: %s\n' "$*" >&2
	exit 1
}

state="${LABS_STATE_DIR:-${repo}/.labs}"
if [ ! -e "${state}" ] && [ ! -L "${state}" ]; then
	echo "make clean: nothing to remove (${state} does not exist)"
	exit 0
fi
if [ ! -d "${state}" ] || [ -L "${state}" ]; then die "${state} is not a folder; not removing it"; fi
state="$(cd "${state}" 2>/dev/null && pwd -P)" || die "cannot enter ${LABS_STATE_DIR:-${repo}/.labs} (not yours?); not removing it"

if [ ! -f "${state}/${marker}" ] || [ -L "${state}/${marker}" ]; then
	[ "${state}" = "$(cd "${repo}" && pwd -P)/.labs" ] ||
		die "${state} has no ${marker} file, so the labs did not make it: not removing it (LABS_STATE_DIR=${LABS_STATE_DIR:-})"
fi

# flock -n fails (here with 75) while another process holds the lock
while IFS= read -r -d '' lock; do
	rc=0
	flock -n -E 75 "${lock}" true 2>/dev/null || rc=$?
	case "${rc}" in
	0) ;;
	75) die "${lock#"${state}"/} is locked: something of the labs still runs in ${state} (lab 00, a node, a build, a test); stop it first" ;;
	*) die "cannot check ${lock} (flock exit ${rc}); not removing ${state}" ;;
	esac
done < <(find "${state}" -xdev -type f -name '*.lock' -print0)

rm -rf --one-file-system -- "${state}"
echo "removed ${state}"

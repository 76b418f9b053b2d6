#!/usr/bin/env bash
# Stop the containerd started by scripts/containerd-up.sh and remove every
# trace of it: its containers and shims (re-parented to PID 1, found by their
# `-address <our socket>`), mounts under our root/state, pod network
# namespaces, the CNI bridge, shim sockets and CNI cache files in fixed host
# paths, and the host paths/sysctl that up created or changed.
#
# Then it checks: if anything of ours is still there it says what and exits 1.
# Idempotent: running it when nothing runs is fine (and also checks).
# Built images and config stay in the state folder (a rebuild is skipped).
set -euo pipefail
# say where it stopped: set -e alone exits silently
trap 'echo "containerd-down: line ${LINENO}: \"${BASH_COMMAND}\" failed" >&2' ERR

# shellcheck source=scripts/containerd/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/containerd/lib.sh"

need_root
t0="$(now)"
cleanup_all
left="$(leftovers)"
if [ -n "${left}" ]; then
	printf 'containerd-down: these are still there:\n%s\n' "${left}" >&2
	exit 1
fi
log "containerd stopped; nothing of ours left (${D}) in $(elapsed "${t0}")s"

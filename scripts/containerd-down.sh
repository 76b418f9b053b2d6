#!/usr/bin/env bash
# Stop the containerd(s) started by scripts/containerd-up.sh and remove every
# trace of them: their containers and shims (re-parented to PID 1, found by
# their `-address <our socket>`), mounts under our folders, pod network
# namespaces, the CNI bridges, our FORWARD rules and our pods' host port
# (portmap) NAT chains — portmap's shared CNI-HOSTPORT-* chains too, once no
# rule of anyone's is in them —, shim sockets and CNI cache files in fixed
# host paths, and the host paths/sysctl that up created or changed.
#
#   sudo scripts/containerd-down.sh                 # every flavour there is
#   sudo scripts/containerd-down.sh --version 1.6   # only that one
#   sudo scripts/containerd-down.sh --purge         # all, then root's whole tree
#
# Then it checks: if anything of ours is still there it says what and exits 1.
# Idempotent: running it when nothing runs is fine (and also checks).
# Built binaries and images stay in root's tree, /var/lib/kubelet-labs (a
# restart skips rebuilding them); --purge removes that tree too, once
# nothing of ours runs. It never touches the learner's state folder.
set -euo pipefail
# say where it stopped: set -e alone exits silently
trap 'echo "containerd-down: line ${LINENO}: \"${BASH_COMMAND}\" failed" >&2' ERR

# shellcheck source=scripts/containerd/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/containerd/lib.sh"

usage() { die "usage: $0 [--version FLAVOURS] [--purge]   (FLAVOURS: ${KNOWN_FLAVOURS[*]}, a comma list, or all; default: every flavour there is)"; }
requested=all
purge=false
while [ $# -gt 0 ]; do
	case "$1" in
	--purge)
		purge=true
		shift
		;;
	--version)
		[ $# -ge 2 ] || usage
		requested="$2"
		shift 2
		;;
	--version=*)
		requested="${1#--version=}"
		shift
		;;
	*) usage ;;
	esac
done
parse_flavours "${requested}" >/dev/null
mapfile -t named < <(parse_flavours "${requested}")

need_root "stopping root's containerd and unmounting its state need it"
t0="$(now)"
check_root_owned "${LABS_ROOT}"
check_bridge_prefix
# --purge deletes root's tree only if this course made it (its marker):
# LABS_ROOT_DIR=/etc must never become rm -rf /etc. The default tree of a
# version before the marker is ours by its name.
purge_check() {
	is_root_tree || [ "${LABS_ROOT}" = "${DEFAULT_LABS_ROOT}" ] ||
		die "${LABS_ROOT} has no ${ROOT_MARKER}: it is not a tree containerd-up.sh made, and --purge will not delete it"
}
if [ "${purge}" = true ] && [ -d "${LABS_ROOT}" ]; then purge_check; fi
if [ ! -d "${TOP}" ]; then
	log "no ${TOP}: no containerd of ours was started here"
	if [ "${purge}" = true ] && [ -d "${LABS_ROOT}" ]; then
		purge_check
		rm -rf --one-file-system "${LABS_ROOT}"
		log "removed ${LABS_ROOT}"
	fi
	exit 0
fi
check_root_owned "${TOP}"
# one up or down at a time
exec 8>"${TOP}/.up-down.lock"
flock 8

# what to stop: the named flavours that have a folder
targets=()
for f in "${named[@]}"; do
	[ -d "${TOP}/${f}" ] && targets+=("${f}")
done

failed=0
report() { # FLAVOUR LEFTOVERS
	[ -n "$2" ] || return 0
	printf 'containerd-down: containerd %s: these are still there:\n%s\n' "$1" "$2" >&2
	failed=1
}

# 1. stop each one and check what is its own (processes, mounts, bridge...)
for f in "${targets[@]}"; do
	use_flavour "${f}"
	cleanup_all
	report "${f}" "$(leftovers)"
done

# 2. the fixed host paths and ip_forward, once all of them are stopped
for f in "${targets[@]}"; do
	use_flavour "${f}"
	undo_host_paths
	report "${f}" "$(leftover_host_paths)"
done

# 3. the labs' default env: it named a flavour that is gone now. Point it at
# one still running (a flavour this run did not stop), else remove it.
default_sock="$(env_value "${DEFAULT_ENVFILE}" CONTAINERD_SOCK)"
if [ -n "${default_sock}" ] && [ ! -S "${default_sock}" ]; then
	rm -f "${DEFAULT_ENVFILE}" "${DEFAULT_CRICTL}"
	for f in "${KNOWN_FLAVOURS[@]}"; do
		use_flavour "${f}"
		if [ -f "${ENVFILE}" ] && [ -S "${SOCK}" ]; then
			sed "s#^CRI_CONFIG_FILE=.*#CRI_CONFIG_FILE=${DEFAULT_CRICTL}#" "${ENVFILE}" >"${DEFAULT_ENVFILE}.tmp"
			cp "${CRICTL_YAML}" "${DEFAULT_CRICTL}"
			mv "${DEFAULT_ENVFILE}.tmp" "${DEFAULT_ENVFILE}"
			log "the labs now use containerd ${f} (${DEFAULT_ENVFILE})"
			break
		fi
	done
fi

[ "${failed}" -eq 0 ] || exit 1

# 4. --purge: nothing of ours runs any more, so root's whole tree goes —
# the built containerd and the images too (the next up rebuilds them).
if [ "${purge}" = true ]; then
	for f in "${KNOWN_FLAVOURS[@]}"; do
		use_flavour "${f}"
		[ -z "$(containerd_pids)" ] || die "containerd ${f} still runs; not purging ${LABS_ROOT}"
	done
	exec 8>&-
	purge_check
	rm -rf --one-file-system "${LABS_ROOT}"
	log "removed ${LABS_ROOT}"
fi
if [ "${#targets[@]}" -eq 0 ]; then
	log "no containerd of ours in ${TOP}; nothing to stop"
else
	log "containerd ${targets[*]}: stopped, nothing of ours left (${TOP}) in $(elapsed "${t0}")s"
fi

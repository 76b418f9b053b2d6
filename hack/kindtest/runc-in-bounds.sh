#!/usr/bin/env bash
# runc-in-bounds: runc, with every container's capabilities cut to those
# this machine's root holds — for Docker on a machine whose root lacks some
# capability in its bounding set (the machines this course is developed
# on have no CAP_SYS_RESOURCE; /proc/self/status CapBnd).
#
# Why: kind starts its nodes with `docker run --privileged` and enters them
# with `docker exec --privileged`, and Docker 20.10 gives a privileged
# container every capability the kernel knows (moby oci/caps
# TweakCapabilities: privileged → GetAllCapabilities), not the ones root
# has; runc then fails with "unable to apply caps: operation not
# permitted". containerd's CRI does it right already (privileged →
# oci.WithAllCurrentCapabilities, the caller's own), so pods inside the
# node need nothing. A learner's machine (the VM, a normal Linux) has the
# full set and never uses this: hack/kindtest/run.sh points a dockerd it
# starts at this wrapper only when CapBnd lacks something.
#
# It edits the spec runc is given — config.json of `create`/`run`
# (--bundle), the process file of `exec` (--process) — and then is runc.
set -euo pipefail

RUNC="${RUNC_IN_BOUNDS_RUNC:-/usr/sbin/runc}"

# The names of the capabilities the kernel knows but root's bounding set
# lacks (capability numbers from linux/capability.h).
names=(CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP
	LINUX_IMMUTABLE NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER
	SYS_MODULE SYS_RAWIO SYS_CHROOT SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE
	SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE AUDIT_WRITE AUDIT_CONTROL SETFCAP
	MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ PERFMON BPF
	CHECKPOINT_RESTORE)
bnd="$(awk '$1 == "CapBnd:" { print $2 }' /proc/self/status)"
last="$(cat /proc/sys/kernel/cap_last_cap)"
missing=()
for ((i = 0; i <= last && i < ${#names[@]}; i++)); do
	if (((0x${bnd} >> i & 1) == 0)); then missing+=("\"CAP_${names[i]}\""); fi
done

# cut FILE JQPATH: drop the missing capabilities from every list at JQPATH
cut_caps() {
	local tmp="$1.in-bounds"
	jq --argjson drop "[$(
		IFS=,
		echo "${missing[*]}"
	)]" "if $2 then $2 |= with_entries(.value |= map(select(. as \$c | \$drop | index(\$c) | not))) else . end" \
		"$1" >"${tmp}"
	mv -f -- "${tmp}" "$1"
}

if [ "${#missing[@]}" -gt 0 ]; then
	prev=""
	for a in "$@"; do
		case "${prev}" in
		--bundle | -b) [ -f "${a}/config.json" ] && cut_caps "${a}/config.json" .process.capabilities ;;
		--process | -p) [ -f "${a}" ] && cut_caps "${a}" .capabilities ;;
		esac
		case "${a}" in
		--bundle=*) [ -f "${a#--bundle=}/config.json" ] && cut_caps "${a#--bundle=}/config.json" .process.capabilities ;;
		--process=*) [ -f "${a#--process=}" ] && cut_caps "${a#--process=}" .capabilities ;;
		esac
		prev="${a}"
	done
fi
exec "${RUNC}" "$@"

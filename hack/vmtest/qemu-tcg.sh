#!/bin/bash
# qemu-system-x86_64 under TCG, for Lima: named by QEMU_SYSTEM_X86_64 when
# /dev/kvm is missing or cannot run a Debian kernel (on this machine it
# belongs to a nested hypervisor: "KVM internal error. Suberror: 1 ...
# emulation failure"). Lima on a Linux x86_64 host always asks for
# accel=kvm and -cpu host; this swaps in QEMU's emulator (TCG, one host
# thread per vCPU) and -cpu max, and changes nothing else.
args=()
for a in "$@"; do
	case "${a}" in
	*accel=kvm*) a="${a//accel=kvm/accel=tcg}" ;;
	host) [ "${prev}" = "-cpu" ] && a=max ;;
	host,*) [ "${prev}" = "-cpu" ] && a="max,${a#host,}" ;;
	esac
	args+=("${a}")
	prev="${a}"
done
exec "${VMTEST_QEMU:-/usr/bin/qemu-system-x86_64}" "${args[@]}"

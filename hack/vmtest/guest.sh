#!/bin/bash
# hack/vmtest/guest.sh: run by hack/vmtest/run.sh inside the VM, as the
# learner, in the mounted repository, from a login shell (bash -l), as
# `limactl shell` gives one. Checks what vm.yaml promises in docs/vm.md.
set -uo pipefail
fail=0
ok() { printf 'ok    %s\n' "$*"; }
bad() {
	printf 'FAIL  %s\n' "$*"
	fail=1
}

[ "$(id -u)" != 0 ] && ok "a learner, not root: $(id -un) (uid $(id -u))" || bad "running as root"

# The repository: the host's path, Lima's mount (not 9p), read-only.
here="$(pwd)"
if [ -f go.mod ] && grep -q '^module kubelet-labs$' go.mod && [ -f vm.yaml ]; then
	ok "repository at the host's path: ${here}"
else
	bad "no repository at ${here}"
fi
fstype="$(findmnt -n -o FSTYPE -T "${here}")"
options="$(findmnt -n -o OPTIONS -T "${here}")"
case "${fstype}" in
fuse.sshfs) ok "mounted by Lima with reverse-sshfs (${fstype})" ;;
*) bad "the repository is on ${fstype:-nothing}, want Lima's reverse-sshfs mount" ;;
esac
if touch .vmtest-write 2>/dev/null; then
	rm -f .vmtest-write
	bad "the repository is writable from the VM (vm.yaml says writable: false)"
else
	ok "read-only (${options%%,*})"
fi
if sudo journalctl -b --no-pager 2>/dev/null | grep -q 'FAIL:mount'; then
	bad "the guest logged a failed mount: $(sudo journalctl -b --no-pager | grep -m1 'FAIL:mount')"
fi

# The state folder: on the VM's own disk, where unix sockets work.
if [ "${LABS_STATE_DIR:-}" = "${HOME}/.labs" ]; then
	ok "LABS_STATE_DIR=${LABS_STATE_DIR} (from /etc/profile.d/kubelet-labs.sh)"
else
	bad "LABS_STATE_DIR=${LABS_STATE_DIR:-unset}, want ${HOME}/.labs"
fi
mkdir -p "${LABS_STATE_DIR:-${HOME}/.labs}"
sfs="$(findmnt -n -o FSTYPE -T "${LABS_STATE_DIR:-${HOME}/.labs}")"
[ "${sfs}" = ext4 ] && ok "state folder on the VM's disk (${sfs})" || bad "state folder on ${sfs}, want the VM's ext4 disk"
if python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.close()' "${LABS_STATE_DIR:-${HOME}/.labs}/.vmtest.sock" 2>/dev/null; then
	rm -f "${LABS_STATE_DIR:-${HOME}/.labs}/.vmtest.sock"
	ok "a unix socket binds in the state folder"
else
	bad "no unix socket in the state folder"
fi
[ "${GOFLAGS:-}" = -buildvcs=false ] && ok "GOFLAGS=${GOFLAGS}" || bad "GOFLAGS=${GOFLAGS:-unset}"

# The tools: vm.yaml's own self-check, as the learner.
if kubelet-labs-check; then
	ok "kubelet-labs-check"
else
	bad "kubelet-labs-check"
fi
docker run --help >/dev/null 2>&1 && docker info >/dev/null 2>&1 && ok "docker usable without sudo" || bad "docker info fails for $(id -un)"

# How provisioning got the tools (go.dev, github.com, dl.k8s.io are
# unreachable here: the fallback must have said so).
echo "--- provisioning (vm.yaml steps 3-4), from /var/log/cloud-init-output.log:"
sudo grep -E '^\[kubelet-labs\]' /var/log/cloud-init-output.log | sed 's/^/      /'
sudo grep -qE '\[kubelet-labs\] (go.dev is unreachable|downloading https://go.dev)' /var/log/cloud-init-output.log &&
	ok "provisioning says where Go came from" || bad "provisioning log does not say where Go came from"

# Ports the VM forwards are not our business; the labs' ports must be free.
for port in 6443 2379; do
	if (exec 3<>"/dev/tcp/127.0.0.1/${port}") 2>/dev/null; then bad "port ${port} is taken in the VM"; else ok "port ${port} free"; fi
done

exit "${fail}"

#!/bin/bash
# hack/vmtest/run.sh (make vm-test): boot vm.yaml, as committed, with Lima and
# run the first labs inside it as a learner. Run as root from the repository
# root on a Linux x86_64 machine with Debian's apt; needs no internet but
# Debian's apt mirror and the Go module proxy. Every step is timed.
#
#  1. host packages (QEMU, OVMF, debootstrap, mtools, GRUB's EFI files)
#  2. Lima at the version hack/envcheck/go.mod pins, built from its Go module
#     (bin/limactl + share/lima/lima-guestagent.Linux-x86_64.gz)
#  3. the seed the VM cannot download here: kind (go install) and kubectl
#     (built from this module's k8s.io/kubernetes), and the Go build cache of
#     labs 00-05, so the VM need not compile Kubernetes' client under TCG
#  4. an offline Debian 12 image (hack/vmtest/image.sh)
#  5. limactl start vm.yaml as the unprivileged learner, only `images`
#     overridden (--set); QEMU under TCG when KVM cannot run it
#  6. inside the VM, as the learner: hack/vmtest/guest.sh (repository
#     read-only, LABS_STATE_DIR on the VM's disk, tools at their pins, how
#     provisioning got them); `sudo scripts/containerd-up.sh` as README 11
#     says (containerd 2.2's binaries built here are placed in the VM's
#     /var/lib/kubelet-labs/bin first: a TCG compile would take an hour);
#     then lab 00 and the READMEs of labs 00-05, 11 and 12 with
#     internal/readmerun (test binary built here); then
#     `sudo scripts/containerd-down.sh`, which checks it left nothing;
#     with VMTEST_KIND_LABS (03 by default; "" for none) the kind node image
#     (built here by scripts/kind/build-image.sh --no-load, the archive
#     copied in) is `docker load`ed, `kind create cluster` runs as
#     docs/vm.md §3 says and those labs' READMEs run against it
#  7. limactl stop, limactl delete, and nothing of the VM left
#
# Knobs (environment): VMTEST_DIR (work folder, /var/lib/kubelet-labs-vmtest;
# root runs what it builds there, so it must be root's all the way up: see
# make_work_dir), VMTEST_USER (learner), VMTEST_CPUS (2), VMTEST_MEMORY (GiB, 4),
# VMTEST_LABS (01,02,03,04,05,11,12), VMTEST_LABS_BIN (control plane binaries
# built on the host to copy into the VM's state folder; default: built here
# with `go run ./labs/00-cluster --build-only`), VMTEST_KVM=1 (use KVM as
# Lima asks, no TCG wrapper), VMTEST_KEEP=1 (leave the VM running),
# VMTEST_START_TIMEOUT (limactl start --timeout, 90m: the first run here, under
# TCG on 2 busy cores, hit 40m while vm.yaml was still provisioning).
set -euo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
work="${VMTEST_DIR:-/var/lib/kubelet-labs-vmtest}"
user="${VMTEST_USER:-learner}"
labs="${VMTEST_LABS:-01,02,03,04,05,11,12}"
kind_labs="${VMTEST_KIND_LABS-03}"
name=vmtest
cd "${repo}"

# check_root_owned and die, the containerd scripts' own. Sourcing also sets
# PATH to the system's folders only; this script builds with the go of the
# PATH it was started with, as before.
path="${PATH}"
# shellcheck source=scripts/containerd/lib.sh
source scripts/containerd/lib.sh
PATH="${path}"

[ "$(id -u)" = 0 ] || { echo "vm-test: run as root (it installs packages and builds the image); the VM itself runs as ${user}" >&2; exit 1; }

# make_work_dir DIR: the work folder, checked before anything runs. Root
# runs limactl and kind from it and writes the image and the seed there: a
# folder another user owns or can write, one under such a folder, a
# symbolic link, or a folder someone made first (the old default,
# /var/tmp/vmtest, anyone could) would let them swap those for their own and
# have root run them; VMTEST_DIR=/home would have root run
# /home/lima/bin/limactl. make_marked_dir (scripts/containerd/lib.sh)
# refuses all of them, as for root's tree of containerd-up.sh. 0755, and
# umask 022 for all root makes in it: the VM's user reads and runs
# limactl, the guest agent and the seed, and writes nothing here (its
# LIMA_HOME is in its home).
work_marker=.kubelet-labs-vmtest
umask 022
make_work_dir() { # DIR
	local why
	why="$( (make_marked_dir "$1" "${work_marker}" hack/vmtest/run.sh) 2>&1)" || die "VMTEST_DIR=${why#error: }"
	chmod 0755 -- "$1"
}
make_work_dir "${work}"

# root_made FILE: if FILE is there, it is root's all the way up (root is
# about to run it). The work folder is root's, so it always is; a check
# that costs nothing where a mistake would cost root.
root_made() { # FILE
	if [ -e "$1" ] || [ -L "$1" ]; then
		check_root_owned "$1"
	fi
}

# user_readable DIR: everything in DIR readable (and folders and programs
# runnable) by the VM's user. find -P meets symbolic links without
# following them and skips them, where chmod -R would follow one named on
# its command line.
user_readable() { # DIR
	find -P "$1" ! -type l -exec chmod a+rX -- {} +
}

[ "$(uname -m)" = x86_64 ] || { echo "vm-test: x86_64 hosts only" >&2; exit 1; }
id "${user}" >/dev/null 2>&1 || useradd -m -s /bin/bash "${user}"
home="$(getent passwd "${user}" | cut -d: -f6)"
lima_home="${home}/.lima-vmtest"

times="${work}/times.txt"
: >"${times}"
t_all=${SECONDS}
step() { # step NAME: time what follows until the next step
	step_end
	step_name="$1"
	step_t=${SECONDS}
	printf '\n=== vm-test: %s\n' "$1"
}
step_end() {
	if [ -n "${step_name:-}" ]; then
		printf '%-58s %5d s\n' "${step_name}" $((SECONDS - step_t)) | tee -a "${times}"
		step_name=
	fi
}
as_user() { runuser -u "${user}" -- env HOME="${home}" LIMA_HOME="${lima_home}" PATH="${work}/lima/bin:${PATH}" ${qemu_env:+"${qemu_env}"} "$@"; }
lima() { as_user limactl "$@"; }

cleanup() {
	rc=$?
	step_end
	if [ "${VMTEST_KEEP:-}" != 1 ] && [ -d "${lima_home}/${name}" ]; then
		echo "vm-test: deleting the VM" >&2
		lima delete -f "${name}" >/dev/null 2>&1 || true
	fi
	if [ -f "${lima_home}/${name}/qemu.pid" ]; then
		# as the user: the file is theirs, and root would kill any PID in it
		# shellcheck disable=SC2016 # $1 is the inner shell's
		as_user sh -c 'kill "$(cat "$1")"' _ "${lima_home}/${name}/qemu.pid" 2>/dev/null || true
	fi
	echo
	echo "=== vm-test times (also in ${times})"
	cat "${times}"
	printf '%-58s %5d s\n' "total" $((SECONDS - t_all))
	[ "${rc}" = 0 ] && echo "vm-test: PASS" || echo "vm-test: FAIL (exit ${rc})"
	exit "${rc}"
}
trap cleanup EXIT

# --- 1 ----------------------------------------------------------------------
step "1. host packages"
pkgs=(qemu-system-x86 qemu-utils ovmf debootstrap mtools dosfstools grub-efi-amd64-bin openssh-sftp-server e2fsprogs fdisk)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "${p}" 2>/dev/null | grep -q 'ok installed' || missing+=("${p}")
done
if [ "${#missing[@]}" -gt 0 ]; then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- 2 ----------------------------------------------------------------------
# Modules this machine already has come from its module cache first (a go
# build here once sat for minutes on the proxy while another go held the
# cache), then from the Go module proxy; go.sum checks them either way.
GOPROXY="file://$(go env GOMODCACHE)/cache/download,$(go env GOPROXY)"
export GOPROXY
lima_version="$(awk '$1 == "github.com/lima-vm/lima" { print $2 }' hack/envcheck/go.mod)"
step "2. Lima ${lima_version} from its Go module"
root_made "${work}/lima/bin/limactl"
if [ "$("${work}/lima/bin/limactl" --version 2>/dev/null)" != "limactl version ${lima_version#v}" ] ||
	[ ! -f "${work}/lima/share/lima/lima-guestagent.Linux-x86_64.gz" ]; then
	src="$(go mod download -json "github.com/lima-vm/lima@${lima_version}" | awk -F'"' '$2 == "Dir" { print $4 }')"
	rm -rf "${work}/lima-src" "${work}/lima"
	cp -r "${src}" "${work}/lima-src"
	find -P "${work}/lima-src" ! -type l -exec chmod u+w -- {} +
	mkdir -p "${work}/lima/bin" "${work}/lima/share/lima"
	ldflags="-s -w -X github.com/lima-vm/lima/pkg/version.Version=${lima_version#v}"
	(cd "${work}/lima-src" && go build -ldflags "${ldflags}" -o "${work}/lima/bin/limactl" ./cmd/limactl)
	(cd "${work}/lima-src" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -ldflags "${ldflags}" -o "${work}/lima/share/lima/lima-guestagent.Linux-x86_64" ./cmd/lima-guestagent)
	gzip -f "${work}/lima/share/lima/lima-guestagent.Linux-x86_64"
	rm -rf "${work}/lima-src"
fi
check_root_owned "${work}/lima/bin/limactl"
"${work}/lima/bin/limactl" --version

# --- 3 ----------------------------------------------------------------------
step "3. seed: kind, kubectl, control plane, containerd, Go build cache"
seed="${work}/seed"
mkdir -p "${seed}"
kind_version="$(awk '$1 == "sigs.k8s.io/kind" { print $2 }' hack/envcheck/go.mod)"
root_made "${seed}/kind"
if [ "$("${seed}/kind" version 2>/dev/null | awk '{ print $2 }')" != "${kind_version}" ]; then
	GOBIN="${seed}" GOFLAGS=-mod=mod go install "sigs.k8s.io/kind@${kind_version}"
fi
labs_bin="${VMTEST_LABS_BIN:-}"
if [ -z "${labs_bin}" ]; then
	labs_bin="${work}/labs/bin"
	LABS_STATE_DIR="${work}/labs" go run ./labs/00-cluster --build-only
fi
mkdir -p "${work}/labs-bin"
for b in etcd kube-apiserver kube-controller-manager kubectl kwok crictl .kubernetes-version; do
	# a link in VMTEST_LABS_BIN would have root copy, and make readable to
	# all, whatever it points at
	[ ! -L "${labs_bin}/${b}" ] || die "${labs_bin}/${b} is a symbolic link: VMTEST_LABS_BIN must hold the files themselves"
	[ -e "${labs_bin}/${b}" ] && cp -p "${labs_bin}/${b}" "${work}/labs-bin/${b}"
done
user_readable "${work}/labs-bin"
cp -p "${work}/labs-bin/kubectl" "${seed}/kubectl"
# containerd 2.2 as scripts/build-containerd.sh builds it (here, as root,
# into root's tree), for the VM's root tree
scripts/build-containerd.sh
containerd_bin="$(bash -c 'source scripts/containerd/lib.sh && echo "${CONTAINERD2_BIN_DIR}"')"
rm -rf "${work}/containerd-bin"
cp -a "${containerd_bin}" "${work}/containerd-bin"
user_readable "${work}/containerd-bin"
# The READMEs `go run` the labs. Their dependencies (Kubernetes' client,
# apimachinery...) take many minutes to compile under TCG: compile them here,
# with the Go module and build caches at the paths the VM uses
# (${work}/gomod, ${work}/gocache, the same inside), so that the VM's go
# finds them cached. Only the build cache's use changes; the commands are the
# READMEs'.
# It runs while the image is built and the VM boots; step 8 waits for it.
# (a fresh build cache: entries of older runs would only make the copy longer)
rm -rf "${work}/gocaches.tar" "${work}/gocache"
(
	GOCACHE="${work}/gocache" GOMODCACHE="${work}/gomod" GOFLAGS=-buildvcs=false \
		go build ./labs/00-cluster ./labs/01-* ./labs/02-* ./labs/03-* ./labs/04-* ./labs/05-* ./labs/11-* ./labs/12-*
	tar -C / -cf "${work}/gocaches.tar" "${work#/}/gocache" "${work#/}/gomod"
	chmod a+r "${work}/gocaches.tar"
) >"${work}/gocache.log" 2>&1 &
gocache_pid=$!
ls -la "${seed}"
if [ -n "${kind_labs}" ]; then
	# the kind node image, as make kind-image builds it, as an archive
	scripts/kind/build-image.sh --no-load
	kind_archive="$(bash -c 'source scripts/containerd/lib.sh && echo "${LABS_ROOT}/kind/node-image.tar"')"
	cp "${kind_archive}" "${work}/node-image.tar"
	chmod a+r "${work}/node-image.tar"
fi

# --- 4 ----------------------------------------------------------------------
step "4. offline Debian 12 image"
image="${work}/debian-12.qcow2"
if [ "${VMTEST_REUSE_IMAGE:-}" != 1 ] || [ ! -f "${image}" ]; then
	hack/vmtest/image.sh "${image}" "${seed}"
fi
chmod a+r "${image}"

# --- 5 ----------------------------------------------------------------------
step "5. the repository in ${user}'s home, the README runner"
# vm.yaml mounts the learner's home: the repository goes there, as a
# learner's clone with this working tree's changes. Root makes it in the
# work folder and the learner unpacks it: root writes nothing in a home
# whose owner could have put a symbolic link on its way.
dest="${home}/src/kubelet-labs"
rm -rf "${work}/src" "${work}/src.tar"
mkdir -p "${work}/src"
git clone -q --no-hardlinks "${repo}" "${work}/src/kubelet-labs"
git ls-files -z --cached --others --exclude-standard | tar --null --ignore-failed-read -T - -cf - | tar -C "${work}/src/kubelet-labs" -xf -
tar -C "${work}/src" -cf "${work}/src.tar" kubelet-labs
rm -rf "${work}/src"
chmod a+r "${work}/src.tar"
# shellcheck disable=SC2016 # $1 and $2 are the inner shell's
as_user bash -c 'set -e; rm -rf "$1/kubelet-labs"; mkdir -p "$1"; tar -C "$1" -xf "$2"' _ "${home}/src" "${work}/src.tar"
go test -c -o "${work}/readmerun.test" ./internal/readmerun
chmod a+rx "${work}/readmerun.test"

step "6. limactl start vm.yaml (as ${user})"
qemu_env=
if [ "${VMTEST_KVM:-}" != 1 ]; then
	# No usable KVM here: see hack/vmtest/qemu-tcg.sh.
	install -m 0755 hack/vmtest/qemu-tcg.sh "${work}/qemu-tcg"
	qemu_env="QEMU_SYSTEM_X86_64=${work}/qemu-tcg"
fi
lima delete -f "${name}" >/dev/null 2>&1 || true
images="$(printf '.images=[{"location":"%s","arch":"x86_64"}]' "${image}")"
(cd "${dest}" && lima start --tty=false --name="${name}" --timeout="${VMTEST_START_TIMEOUT:-90m}" \
	--cpus="${VMTEST_CPUS:-2}" --memory="${VMTEST_MEMORY:-4}" --set "${images}" vm.yaml)

in_vm() { (cd "${dest}" && lima shell --workdir "${dest}" "${name}" "$@"); }

step "7. inside: repository, state folder, tools, provisioning"
in_vm bash -l hack/vmtest/guest.sh

step "8. inside: control plane binaries and Go caches copied in"
# (into a state folder marked as lab 00 marks the one it makes: the labs
# fill only a state folder that has the marker or is empty)
wait "${gocache_pid}" || { tail -n 20 "${work}/gocache.log" >&2; exit 1; }
lima copy "${work}/gocaches.tar" "${name}:/tmp/gocaches.tar"
lima copy "${work}/readmerun.test" "${name}:/tmp/readmerun.test"
lima copy -r "${work}/labs-bin" "${name}:/tmp/labs-bin"
# shellcheck disable=SC2016 # for the VM's shell to expand
in_vm bash -lc 'set -e; sudo tar -C / -xf /tmp/gocaches.tar && sudo chown -R "$(id -u):$(id -g)" '"${work}"' && rm /tmp/gocaches.tar
mkdir -p "$LABS_STATE_DIR/bin" && touch "$LABS_STATE_DIR/.kubelet-labs-state" && cp -a /tmp/labs-bin/. "$LABS_STATE_DIR/bin/" && rm -rf /tmp/labs-bin
ls -la "$LABS_STATE_DIR/bin"'
lima copy -r "${work}/containerd-bin" "${name}:/tmp/containerd-bin"
# shellcheck disable=SC2016 # for the VM's shell to expand
in_vm bash -lc 'set -e; v="$(bash -c "source scripts/containerd/lib.sh && echo \${CONTAINERD2_BIN_DIR}")"
sudo install -d -m 0711 -o root -g root /var/lib/kubelet-labs /var/lib/kubelet-labs/bin
sudo cp -r /tmp/containerd-bin "$v" && sudo chown -R root:root "$v" && rm -rf /tmp/containerd-bin
sudo ls -la "$v"'

step "9. inside: sudo scripts/containerd-up.sh (README 11: the one root command)"
in_vm bash -lc 'sudo scripts/containerd-up.sh'

step "10. inside: READMEs of labs 00 and ${labs} (internal/readmerun)"
in_vm bash -lc "LABS_README='${labs}' GOCACHE='${work}/gocache' GOMODCACHE='${work}/gomod' /tmp/readmerun.test -test.run '^TestLabREADMEs\$' -test.v -test.timeout 90m 2>&1 | tee /tmp/readmerun.log; exit \${PIPESTATUS[0]}"

if [ -n "${kind_labs}" ]; then
	step "10k. inside: the kind node image into the VM's Docker (docker load)"
	lima copy "${work}/node-image.tar" "${name}:/tmp/node-image.tar"
	in_vm bash -lc 'set -e; docker load -i /tmp/node-image.tar; rm /tmp/node-image.tar'
	step "10k. inside: kind create cluster --config yaml/kind-config.yaml (docs/vm.md §3)"
	# shellcheck disable=SC2016 # for the VM's shell to expand
	in_vm bash -lc 'set -e; unset KUBECONFIG; kind create cluster --config yaml/kind-config.yaml --wait 5m
for ds in kindnet kube-proxy; do kubectl -n kube-system patch daemonset "$ds" --type merge -p "{\"spec\":{\"template\":{\"spec\":{\"nodeSelector\":{\"kubelet-labs/kind-node\":\"true\"}}}}}"; done
kubectl get nodes -o wide'
	step "10k. inside: READMEs of labs ${kind_labs} against kind (internal/readmerun, LABS_README_KUBECONFIG)"
	# shellcheck disable=SC2016 # for the VM's shell to expand
	in_vm bash -lc "LABS_README='${kind_labs}' LABS_README_KUBECONFIG=\$HOME/.kube/config GOCACHE='${work}/gocache' GOMODCACHE='${work}/gomod' /tmp/readmerun.test -test.run '^TestLabREADMEs\$' -test.v -test.timeout 60m 2>&1 | tee /tmp/readmerun-kind.log; exit \${PIPESTATUS[0]}"
	step "10k. inside: kind delete cluster"
	in_vm bash -lc 'kind delete cluster && docker network rm kind && docker image rm localhost/kubelet-labs/kind-node:v1.36.3'
fi

if [ "${VMTEST_KEEP:-}" = 1 ]; then
	step_end
	echo "vm-test: VMTEST_KEEP=1: the VM is left running: sudo -u ${user} LIMA_HOME=${lima_home} ${work}/lima/bin/limactl shell ${name}"
	exit 0
fi

step "11. inside: sudo scripts/containerd-down.sh (it checks that nothing is left)"
in_vm bash -lc 'sudo scripts/containerd-down.sh'

step "12. limactl stop and delete; nothing left"
lima stop "${name}"
lima delete "${name}"
if [ -e "${lima_home}/${name}" ]; then
	echo "vm-test: ${lima_home}/${name} is still there after limactl delete" >&2
	exit 1
fi
if pgrep -u "${user}" -f "qemu-system-x86_64.*${lima_home}/${name}" >/dev/null; then
	echo "vm-test: a QEMU process of the VM is still running after limactl delete" >&2
	exit 1
fi
step_end

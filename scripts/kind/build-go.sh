#!/usr/bin/env bash
# build-go.sh OUT [--force]: every Go program the kind node image of
# kubelet-labs needs, built as root from the Go module proxy alone (no
# registry, no release tarball), static, into OUT/bin:
#
#   kubeadm kubelet kubectl               k8s.io/kubernetes  (the node's /usr/bin)
#   kube-apiserver kube-controller-manager
#   kube-scheduler kube-proxy             k8s.io/kubernetes  (component images)
#   kube-log-runner                       k8s.io/component-base (their /go-runner)
#   etcd                                  go.etcd.io/etcd/server/v3
#   coredns                               scripts/kind/coredns/main.go: CoreDNS
#                                         with only the plugins kubeadm's Corefile uses
#   kindnetd                              scripts/kind/kindnetd: ours, mirroring kind's
#   local-path-provisioner                github.com/rancher/local-path-provisioner
#   crictl                                sigs.k8s.io/cri-tools (the node's /usr/local/bin)
#   kind                                  sigs.k8s.io/kind (the CLI, for the host)
#
# The versions are in scripts/kind/versions.sh. scripts/kind/build-image.sh
# runs this as `build-go.sh /var/lib/kubelet-labs/kind`; OUT must be root's
# all the way up, and new, empty, or made by this course (it gets the
# marker file .kubelet-labs-kind).
#
# Why each program is built the way it is:
#   - Root trusts no file a learner could have written: nothing is built in
#     the course's module or the folder sudo was typed in. Each program gets
#     a module of its own in root's OUT/gomod/<name>/, with a go.mod this
#     script writes from the pins, and go resolves go.sum against the
#     checksum database (go.sum stays there: a second run reuses it). A
#     program whose module's go.mod has no replace directives is
#     `go install`ed at its version instead, which uses exactly that go.mod.
#   - Every go command runs under `env -i` with an environment made here,
#     GOTOOLCHAIN=local and root's own module and build caches, as
#     scripts/build-containerd.sh does (and for the same reasons).
#   - Kubernetes is built the way its release is (k8s.io/kubernetes v1.36.3
#     hack/lib/golang.sh:323-336 static binaries, CGO_ENABLED=0;
#     golang.sh:944-953 -trimpath, -s -w, tags selinux,notest,grpcnotrace;
#     hack/lib/version.sh:151-182 stamps k8s.io/client-go/pkg/version and
#     k8s.io/component-base/version). Without the stamp kubeadm refuses
#     kubernetesVersion v1.36.3 ("v0.0.0-master" is older). Upstream links
#     the kubelet dynamically (it is not in KUBE_STATIC_BINARIES); ours is
#     static like the rest: it runs in any rootfs. k8s.io/kubernetes's own
#     go.mod points its staging modules at ./staging/src (replace
#     directives apply only to the main module), so our go.mod replaces
#     each of them, read from that go.mod, with its published v0.36.3.
#     The seven programs share one `go build`, so one compile of the
#     packages they share.
#   - etcd's go.mod replaces its sibling modules with ../ paths, so
#     `go install` refuses it: it gets a generated go.mod too.
#   - kindnetd: the proxy serves no version of kind's module, so
#     scripts/kind/kindnetd is a compact one of ours (its main.go says what
#     of kind's it mirrors), a module of its own. Root builds copies of
#     exactly the files named below, from a go.mod with plain requirements
#     only, and the recipe holds each file's sha256.
#
#   - The builds are reproducible: -trimpath, fixed stamps (the tag's date
#     as the proxy records it), and go.mod files that do not depend on what
#     was built before (measured: a --force rebuild gives the same sha256
#     for every binary).
#
# Reuse: each program has a recipe (its version, or the go.mod written for
# it, the Go that builds it, its flags, the sha256 of its sources of ours)
# in OUT/.stamps/<name>, with the sha256 of the binary built from it. A
# binary is reused when the recipe is the same, its sha256 is the one
# recorded, and it reports the pinned version. --force rebuilds all.
# Prints one line per program: built or reused, and how long it took.
set -euo pipefail
trap 'echo "build-go: line ${LINENO}: \"${BASH_COMMAND}\" failed" >&2' ERR

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/containerd/lib.sh
source "${here}/../containerd/lib.sh"
# shellcheck source=scripts/kind/versions.sh
source "${here}/versions.sh"

usage="usage: $0 OUT [--force]   (OUT: root's folder for the programs, e.g. /var/lib/kubelet-labs/kind)"
force=false out=""
for a in "$@"; do
	case "${a}" in
	--force) force=true ;;
	-*) die "unknown option ${a}; ${usage}" ;;
	*)
		[ -z "${out}" ] || die "more than one OUT; ${usage}"
		out="${a}"
		;;
	esac
done
[ -n "${out}" ] || die "no OUT given; ${usage}"
[ "$(id -u)" -eq 0 ] || die "run as root (sudo $0 ${out}): root runs these programs, so they are built in root's folder, from root's caches"
KIND_MARKER=.kubelet-labs-kind

# kindnetd's sources (scripts/kind/kindnetd): root builds copies of these
# and nothing else of that folder (kind_test.go keeps the list and the
# folder in step). go.sum is not used: go resolves it against the checksum
# database itself.
KINDNETD_SOURCES=(go.mod main.go cni.go routes.go masq.go)
K8S_PROGRAMS=(kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy)

# Nothing of the folder sudo was typed in: its go.mod or go.work would pick
# the toolchain and the module graph of a go command run there.
cd /
out="$(realpath -m "${out}")"
make_marked_dir "${out}" "${KIND_MARKER}" build-go.sh
make_root_dir "${out}/bin"
make_root_dir "${out}/gomod"
make_root_dir "${out}/.stamps"
# Our own lock file: build-image.sh holds ${out}/.build.lock while it runs us.
exec 8>"${out}/.build-go.lock"
if ! flock -n 8; then
	log "another build-go.sh holds ${out}/.build-go.lock; waiting"
	flock 8
fi

# --- Go, root's, with an environment of our own (root_go, lib.sh) ----------
root_go
go_version="$(go env GOVERSION)"
log "building with ${go_version} (${go_bin}) into ${out}/bin"

# mod_dir MODULE@VERSION: the module's folder in root's module cache
# (downloaded and checked against the checksum database if new).
mod_dir() {
	local d
	d="$(go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
	{ [ -n "${d}" ] && [ -d "${d}" ]; } || die "could not download $1 from the Go module proxy (${GOPROXY:-$(go env GOPROXY)})"
	echo "${d}"
}

# need_go_for GOMOD: the Go we have is at least the go line of GOMOD: with
# GOTOOLCHAIN=local nothing fetches a newer one.
need_go_for() { # GOMOD
	local want
	want="$(awk '$1 == "go" { print $2; exit }' "$1")"
	version_at_least "${go_version}" "${want}" ||
		die "$1 needs go ${want}; root's Go (${go_bin}) is ${go_version}: install a newer Go for the whole machine, or name one with LABS_GO"
}

# --- reuse ------------------------------------------------------------------
# reports NAME: the line NAME prints about its version (empty if none).
reports() { # NAME
	local b="${out}/bin/$1"
	case "$1" in
	kubeadm) "${b}" version -o short ;;
	kubectl) "${b}" version --client 2>/dev/null | sed -n 's/^Client Version: //p' ;;
	kube-log-runner) echo "kube-log-runner ${KUBERNETES_VERSION}" ;; # no version flag: the stamp says it
	kubelet | kube-*) "${b}" --version ;;
	etcd) "${b}" --version | sed -n 1p ;;
	coredns) "${b}" -version | sed -n 1p ;;
	local-path-provisioner | crictl) "${b}" --version ;;
	kind) "${b}" version ;;
	kindnetd) "${b}" -version ;;
	esac 2>/dev/null || true
}
# expect NAME: what reports NAME must contain.
expect() { # NAME
	case "$1" in
	kubeadm | kubectl | kube-log-runner) echo "${KUBERNETES_VERSION}" ;;
	kubelet | kube-*) echo "Kubernetes ${KUBERNETES_VERSION}" ;;
	etcd) echo "etcd Version: ${ETCD_VERSION#v}" ;;
	coredns) echo "CoreDNS-${COREDNS_VERSION#v}" ;;
	kindnetd) echo "kind kindnetd ${KINDNETD_COMMIT:0:8}" ;;
	local-path-provisioner) echo "${LOCAL_PATH_PROVISIONER_VERSION}" ;;
	crictl) echo "crictl version ${CRI_TOOLS_VERSION#v}" ;;
	kind) echo "kind ${KIND_VERSION} " ;;
	esac
}
# reusable NAME RECIPE: the binary was built from RECIPE, is unchanged since,
# and reports the pinned version.
reusable() { # NAME RECIPE
	local stamp="${out}/.stamps/$1" b="${out}/bin/$1"
	[ "${force}" = false ] && [ -x "${b}" ] && [ -f "${stamp}" ] || return 1
	[ "$(sed '$d' "${stamp}")" = "$2" ] || return 1
	[ "$(tail -n1 "${stamp}")" = "$(sha "${b}")" ] || return 1
	[[ "$(reports "$1")" == *"$(expect "$1")"* ]]
}
sha() { sha256sum "$1" | cut -d' ' -f1; }
# install_built NAME RECIPE TMPFILE: TMPFILE becomes OUT/bin/NAME (a rename:
# a reader never sees half a binary), stamped; it must report its version.
install_built() { # NAME RECIPE TMPFILE
	chmod 0755 "$3"
	mv -f "$3" "${out}/bin/$1"
	printf '%s\n%s\n' "$2" "$(sha "${out}/bin/$1")" >"${out}/.stamps/$1"
	[[ "$(reports "$1")" == *"$(expect "$1")"* ]] ||
		die "$1 was built but reports '$(reports "$1")', not $(expect "$1")"
}
report() { # NAME WHAT SECONDS
	printf '%-24s %-28s %-7s %6.1fs\n' "$1" "$(expect "$1" | sed 's/^Kubernetes //; s/ $//')" "$2" "$3"
}

work="$(mktemp -d "${out}/.build-go.XXXXXX")"
trap 'rm -rf "${work}"' EXIT
# write_gomod NAME: OUT/gomod/NAME, emptied of everything but go.sum (what
# the checksum database said last time), with go.mod from stdin.
write_gomod() { # NAME < go.mod
	local d="${out}/gomod/$1"
	make_root_dir "${d}"
	find "${d}" -mindepth 1 -maxdepth 1 ! -name go.sum -exec rm -rf {} +
	cat >"${d}/go.mod"
	echo "${d}"
}

# recipe_of GOMOD FLAGS: what a program built in a go.mod of ours is made
# of: that go.mod (as written, before go adds its indirect requirements),
# the Go, and the flags.
recipe_of() { # GOMOD FLAGS
	echo "go.mod sha256:$(sha256sum <<<"$1" | cut -d' ' -f1) ${go_version} CGO_ENABLED=0 -trimpath $2"
}

# --- Kubernetes -------------------------------------------------------------
k8s_ldflags() {
	local major="${KUBERNETES_VERSION#v}" minor kv key val
	major="${major%%.*}"
	minor="${KUBERNETES_VERSION#v*.}"
	minor="${minor%%.*}"
	printf '%s' "-s -w"
	# the date of the tag, as the module proxy records it: fixed, so the
	# binaries are the same on every machine (upstream: SOURCE_DATE_EPOCH)
	for kv in "gitVersion=${KUBERNETES_VERSION}" "gitMajor=${major}" "gitMinor=${minor}" \
		"gitTreeState=clean" "buildDate=${k8s_date}"; do
		key="${kv%%=*}" val="${kv#*=}"
		printf ' -X k8s.io/client-go/pkg/version.%s=%s -X k8s.io/component-base/version.%s=%s' \
			"${key}" "${val}" "${key}" "${val}"
	done
}
build_kubernetes() {
	local t0 dir m p recipe missing=()
	t0="$(now)"
	m="$(mod_dir "k8s.io/kubernetes@${KUBERNETES_VERSION}")"
	need_go_for "${m}/go.mod"
	k8s_date="$(go list -m -json "k8s.io/kubernetes@${KUBERNETES_VERSION}" | sed -n 's/^[[:space:]]*"Time": "\(.*\)",\{0,1\}$/\1/p')"
	[ -n "${k8s_date}" ] || die "the module proxy gives no date for k8s.io/kubernetes@${KUBERNETES_VERSION}"
	local tags=selinux,notest,grpcnotrace ldflags gomod
	ldflags="$(k8s_ldflags)"
	# Its staging modules, from its own go.mod: `k8s.io/X => ./staging/src/k8s.io/X`
	# (one a line in a replace block, or after `replace`).
	local -a staging
	mapfile -t staging < <(awk '
		$1 == "replace" { $1 = ""; $0 = substr($0, 2) }
		$2 == "=>" && $3 == "./staging/src/" $1 && NF == 3 { print $1 }' "${m}/go.mod")
	[ "${#staging[@]}" -gt 20 ] || die "found only ${#staging[@]} staging modules in ${m}/go.mod (k8s.io/X => ./staging/src/k8s.io/X)"
	gomod="$({
		echo "// Written by scripts/kind/build-go.sh: k8s.io/kubernetes ${KUBERNETES_VERSION} with its staging"
		echo "// modules at their published ${KUBERNETES_STAGING_VERSION} (its own go.mod replaces them with ./staging)."
		echo "module kubelet-labs.local/kind/kubernetes"
		echo
		awk '$1 == "go" { print; exit }' "${m}/go.mod"
		# the GODEBUG defaults upstream's binaries get as the main module
		awk '$1 == "godebug" && NF == 2' "${m}/go.mod"
		echo
		echo "require k8s.io/kubernetes ${KUBERNETES_VERSION}"
		echo
		echo "replace ("
		for p in "${staging[@]}"; do printf '\t%s => %s %s\n' "${p}" "${p}" "${KUBERNETES_STAGING_VERSION}"; done
		echo ")"
	})"
	recipe="$(recipe_of "${gomod}" "-tags ${tags} -ldflags ${ldflags}")"
	for p in "${K8S_PROGRAMS[@]}"; do
		reusable "${p}" "${recipe}" || missing+=("${p}")
	done
	if [ "${#missing[@]}" -eq 0 ]; then
		for p in "${K8S_PROGRAMS[@]}"; do report "${p}" reused "$(elapsed "${t0}")"; done
		return
	fi
	dir="$(write_gomod kubernetes <<<"${gomod}")"
	# (measured: all seven, cold Go caches, 2 cores: 7.7 minutes)
	log "building ${missing[*]} ${KUBERNETES_VERSION} (${#staging[@]} staging modules at ${KUBERNETES_STAGING_VERSION}); all of them take about 8 minutes on 2 cores with a cold Go cache"
	mkdir "${work}/k8s"
	# one go build for all of them: the packages they share compile once
	local -a pkgs=()
	for p in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/${p}"); done
	(cd "${dir}" && go build -mod=mod -trimpath -tags "${tags}" -ldflags "${ldflags}" -o "${work}/k8s/" "${pkgs[@]}")
	for p in "${missing[@]}"; do install_built "${p}" "${recipe}" "${work}/k8s/${p}"; done
	for p in "${K8S_PROGRAMS[@]}"; do
		if [[ " ${missing[*]} " == *" ${p} "* ]]; then report "${p}" built "$(elapsed "${t0}")"; else report "${p}" reused "$(elapsed "${t0}")"; fi
	done
}

# --- a program from a go.mod of ours ------------------------------------------
# build_in NAME RECIPE DIR PACKAGE LDFLAGS: go build PACKAGE in DIR (made by
# write_gomod; PACKAGE may be a file the caller put there) to OUT/bin/NAME.
build_in() { # NAME RECIPE DIR PACKAGE LDFLAGS
	local t0
	t0="$(now)"
	(cd "$3" && go build -mod=mod -trimpath -ldflags "$5" -o "${work}/$1" "$4")
	install_built "$1" "$2" "${work}/$1"
	report "$1" built "$(elapsed "${t0}")"
}

# kube-log-runner is the /go-runner of upstream's component images
# (k8s.io/kubernetes v1.36.3 build/server-image/Dockerfile:24-25;
# build/lib/release.sh:325-352), from the staging module component-base.
# Not in the Kubernetes build: the go command would add component-base to
# that go.mod, whose own requirements select k8s.io/api (and others) at
# v0.36.3 instead of k8s.io/kubernetes's v0.0.0 => v0.36.3, which changes
# the other seven binaries (measured: their sha256 differed).
build_kube_log_runner() {
	local t0 m recipe dir ldflags="-s -w" gomod
	t0="$(now)"
	m="$(mod_dir "k8s.io/component-base@${KUBERNETES_STAGING_VERSION}")"
	need_go_for "${m}/go.mod"
	gomod="$({
		echo "// Written by scripts/kind/build-go.sh: kube-log-runner of Kubernetes ${KUBERNETES_VERSION}."
		echo "module kubelet-labs.local/kind/kube-log-runner"
		echo
		awk '$1 == "go" { print; exit }' "${m}/go.mod"
		echo
		echo "require k8s.io/component-base ${KUBERNETES_STAGING_VERSION}"
	})"
	recipe="$(recipe_of "${gomod}" "-ldflags ${ldflags}")"
	if reusable kube-log-runner "${recipe}"; then report kube-log-runner reused "$(elapsed "${t0}")"; return; fi
	dir="$(write_gomod kube-log-runner <<<"${gomod}")"
	build_in kube-log-runner "${recipe}" "${dir}" k8s.io/component-base/logs/kube-log-runner "${ldflags}"
}

build_etcd() {
	local t0 m recipe dir ldflags="-s -w" gomod
	t0="$(now)"
	m="$(mod_dir "go.etcd.io/etcd/server/v3@${ETCD_VERSION}")"
	need_go_for "${m}/go.mod"
	# Its go.mod requires api, client and pkg at the same version, and
	# replaces them with ../ folders, which only its own repository has.
	gomod="$({
		echo "// Written by scripts/kind/build-go.sh: etcd's server, whose go.mod go install refuses (replace)."
		echo "module kubelet-labs.local/kind/etcd"
		echo
		awk '$1 == "go" { print; exit }' "${m}/go.mod"
		echo
		echo "require go.etcd.io/etcd/server/v3 ${ETCD_VERSION}"
	})"
	recipe="$(recipe_of "${gomod}" "-ldflags ${ldflags}")"
	if reusable etcd "${recipe}"; then report etcd reused "$(elapsed "${t0}")"; return; fi
	dir="$(write_gomod etcd <<<"${gomod}")"
	build_in etcd "${recipe}" "${dir}" go.etcd.io/etcd/server/v3 "${ldflags}"
}

build_coredns() {
	local t0 m recipe dir src="${here}/coredns/main.go" ldflags gomod
	t0="$(now)"
	{ [ -f "${src}" ] && [ ! -L "${src}" ]; } || die "${src}: missing, or not a regular file"
	m="$(mod_dir "github.com/coredns/coredns@${COREDNS_VERSION}")"
	need_go_for "${m}/go.mod"
	# `coredns -version` says it is not upstream's binary
	ldflags="-s -w -X github.com/coredns/coredns/coremain.GitCommit=kubelet-labs-trimmed"
	gomod="$({
		echo "// Written by scripts/kind/build-go.sh: scripts/kind/coredns/main.go against CoreDNS ${COREDNS_VERSION}."
		echo "module kubelet-labs.local/kind/coredns"
		echo
		awk '$1 == "go" { print; exit }' "${m}/go.mod"
		echo
		echo "require github.com/coredns/coredns ${COREDNS_VERSION}"
	})"
	recipe="$(recipe_of "${gomod}" "main.go $(sha "${src}") -ldflags ${ldflags}")"
	if reusable coredns "${recipe}"; then report coredns reused "$(elapsed "${t0}")"; return; fi
	dir="$(write_gomod coredns <<<"${gomod}")"
	# root's copy: what is built is what was checked, whatever happens to
	# the repository's file meanwhile
	install -m 0644 "${src}" "${dir}/main.go"
	recipe="$(recipe_of "${gomod}" "main.go $(sha "${dir}/main.go") -ldflags ${ldflags}")"
	# named as a file: main.go is `//go:build ignore`, out of the course's module
	build_in coredns "${recipe}" "${dir}" ./main.go "${ldflags}"
}

build_kindnetd() {
	local t0 recipe dir src="${here}/kindnetd" f sums="" ldflags="-s -w" json
	t0="$(now)"
	for f in "${KINDNETD_SOURCES[@]}"; do
		{ [ -f "${src}/${f}" ] && [ ! -L "${src}/${f}" ]; } || die "${src}/${f}: missing, or not a regular file"
		sums+=" ${f} $(sha "${src}/${f}")"
	done
	recipe="kubelet-labs.local/kind/kindnetd${sums} ${go_version} CGO_ENABLED=0 -trimpath -ldflags ${ldflags}"
	if reusable kindnetd "${recipe}"; then report kindnetd reused "$(elapsed "${t0}")"; return; fi
	dir="$(write_gomod kindnetd </dev/null)"
	# root's copies: what is built is what was hashed, whatever happens to
	# the repository's files meanwhile
	sums=""
	for f in "${KINDNETD_SOURCES[@]}"; do
		install -m 0644 "${src}/${f}" "${dir}/${f}"
		sums+=" ${f} $(sha "${dir}/${f}")"
	done
	recipe="kubelet-labs.local/kind/kindnetd${sums} ${go_version} CGO_ENABLED=0 -trimpath -ldflags ${ldflags}"
	# its go.mod must stay a plain list of requirements, resolved from the
	# proxy and checked against the checksum database
	json="$(cd "${dir}" && go mod edit -json)"
	for f in Replace Exclude Retract Tool Ignore Godebug Toolchain; do
		! grep -qE "\"${f}\": (\\[|\"|\\{)" <<<"${json}" || die "${src}/go.mod has a ${f} directive: root builds kindnetd only from plain requirements"
	done
	need_go_for "${dir}/go.mod"
	# as kind's Dockerfile (images/kindnetd/Dockerfile at KINDNETD_COMMIT):
	# CGO_ENABLED=0 go build
	build_in kindnetd "${recipe}" "${dir}" . "${ldflags}"
}

# install_at NAME MODULE VERSION PACKAGE LDFLAGS: `go install PACKAGE@VERSION`,
# which builds with exactly that module's go.mod (and refuses one with
# replace directives).
install_at() { # NAME MODULE VERSION PACKAGE LDFLAGS
	local t0 m recipe
	t0="$(now)"
	m="$(mod_dir "$2@$3")"
	need_go_for "${m}/go.mod"
	recipe="$2 $3 ${go_version} CGO_ENABLED=0 -trimpath -ldflags $5"
	if reusable "$1" "${recipe}"; then report "$1" reused "$(elapsed "${t0}")"; return; fi
	mkdir -p "${work}/gobin-$1"
	env -i "${go_env[@]}" GOBIN="${work}/gobin-$1" "${go_bin}" install -trimpath -ldflags "$5" "$4@$3"
	install_built "$1" "${recipe}" "${work}/gobin-$1/${4##*/}"
	report "$1" built "$(elapsed "${t0}")"
}

start="$(now)"
build_kubernetes
build_kube_log_runner
build_etcd
build_coredns
build_kindnetd
# its scripts/build: CGO_ENABLED=0, -X main.VERSION
install_at local-path-provisioner github.com/rancher/local-path-provisioner "${LOCAL_PATH_PROVISIONER_VERSION}" \
	github.com/rancher/local-path-provisioner "-s -w -X main.VERSION=${LOCAL_PATH_PROVISIONER_VERSION}"
# its Makefile: -X .../pkg/version.Version=<tag without v> (as scripts/build-crictl.sh)
install_at crictl sigs.k8s.io/cri-tools "${CRI_TOOLS_VERSION}" sigs.k8s.io/cri-tools/cmd/crictl \
	"-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=${CRI_TOOLS_VERSION#v}"
# its Makefile:57-62: -trimpath -buildid= -s -w and the commit
install_at kind sigs.k8s.io/kind "${KIND_VERSION}" sigs.k8s.io/kind \
	"-buildid= -s -w -X sigs.k8s.io/kind/pkg/cmd/kind/version.gitCommit=${KIND_COMMIT}"
log "Go programs ready in $(elapsed "${start}")s: ${out}/bin"

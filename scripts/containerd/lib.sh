# shellcheck shell=bash
# shellcheck disable=SC2034 # the variables are used by the scripts that source this
# Shared by scripts/containerd-up.sh, scripts/containerd-down.sh and
# scripts/build-containerd.sh: where our containerd lives, how to stop
# everything it started, and how to prove that nothing of it is left.
# Sourced, never run.
#
# Root's tree. Everything root runs, sources or keeps state in lives in a
# folder only root can change, never in the learner's state folder (.labs/
# or $LABS_STATE_DIR): a learner-owned folder lets any process of the
# learner plant a symlink or a binary there and become root at the next
# `sudo`. The tree, /var/lib/kubelet-labs unless LABS_ROOT_DIR names another
# (which must pass the same check: root's all the way down), holds:
#   bin/containerd-<version>/  containerd 2.2 built from its Go module
#   images/                    the offline images (pause, busybox), images.env
#   containerd/                env, crictl.yaml: the flavour the labs use by
#                              default (the first one the last containerd-up.sh
#                              started); the labs read env
#   containerd/2.2/ .../1.6/   one flavour each: socket, config, root, state,
#                              logs, env, pod-logs/ (the learner's)
# Folders are 0711: the learner may pass through to the socket (handed to
# them), the env files and their pod logs, but lists and changes nothing.
#
# Two flavours, each in its own folder, with its own socket, bridge and
# subnet, so both can run at once:
#   2.2  containerd v2.2.x built from its Go module (scripts/build-containerd.sh)
#   1.6  the distribution's containerd (Debian 12: 1.6.20, apt), config `version = 2`
#
# containerd still writes a few fixed host paths; we keep what we can out of
# them through its config (root, state, runc root, netns, temp, opt) and
# track the rest:
#   /run/containerd/s/<hash>  shim sockets (hard-coded in the shim library,
#                             1.6 and 2.x alike)
#   /var/lib/cni/results/     libcni's result cache (not configurable)
#   /sys/fs/cgroup/*/k8s.io/  cgroups of pods that set no cgroup parent
#                             (containers' own cgroups are found by id anywhere)
# plus the bridges (labs22, labs16: deleted only if we created them) and the
# ip_forward sysctl the CNI bridge turns on.

LABS_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DEFAULT_LABS_ROOT=/var/lib/kubelet-labs
LABS_ROOT="$(realpath -m "${LABS_ROOT_DIR:-${DEFAULT_LABS_ROOT}}")"
# The file that says a folder is root's tree of this course: made when the
# tree is made, and required before anything under it is deleted (--purge),
# so LABS_ROOT_DIR=/etc cannot turn into rm -rf /etc.
ROOT_MARKER=.kubelet-labs-root

# Root finds its programs only in the system's folders (sudo's secure_path
# on Debian, and what most distributions use), never in a PATH a root shell
# inherited: a folder of the learner's early in PATH would give root the
# learner's runc or containerd. Each program found is also checked to be
# root's all the way up (root_program).
ROOT_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
PATH="${ROOT_PATH}"
export PATH
# containerd 2.x, built from its Go module by scripts/build-containerd.sh:
# the newest patch release of the 2.2 line, pinned exactly.
CONTAINERD2_VERSION=v2.2.9
# The oldest Go that builds it: the `go` line of its go.mod (v2.2.9:
# go 1.25.0). build-containerd.sh checks this against the module it
# downloads, so a new pin with a newer go line fails loudly here.
CONTAINERD2_GO_MIN=1.25.0
CONTAINERD2_BIN_DIR="${LABS_ROOT}/bin/containerd-${CONTAINERD2_VERSION}"

# Every flavour, in the order tests list them; the first is the default.
KNOWN_FLAVOURS=(2.2 1.6)
DEFAULT_FLAVOUR=2.2
TOP="${LABS_ROOT}/containerd"
IMAGES_DIR="${LABS_ROOT}/images"
DEFAULT_ENVFILE="${TOP}/env"
DEFAULT_CRICTL="${TOP}/crictl.yaml"
CNI_RESULTS="/var/lib/cni/results"

# The flavours named in $1 ("2.2", "1.6", "2.2,1.6", "2.2 1.6" or "all"),
# one a line, in the order given, without repeats.
parse_flavours() { # LIST
	local list="${1//,/ }" f k seen=" " ok
	[ "${list}" = all ] && list="${KNOWN_FLAVOURS[*]}"
	for f in ${list}; do
		ok=0
		for k in "${KNOWN_FLAVOURS[@]}"; do [ "${f}" = "${k}" ] && ok=1; done
		[ "${ok}" = 1 ] || die "unknown containerd flavour '${f}': choose from ${KNOWN_FLAVOURS[*]} (or all)"
		case "${seen}" in *" ${f} "*) continue ;; esac
		seen+="${f} "
		echo "${f}"
	done
	[ "${seen}" != " " ] || die "no containerd flavour named (choose from ${KNOWN_FLAVOURS[*]})"
}

# The /24 of a flavour: the third octet is the flavour's digits (2.2 -> 22),
# the first two come from LABS_CNI_SUBNET (default 10.231.0.0/16).
flavour_subnet() { # FLAVOUR
	local base="${LABS_CNI_SUBNET:-10.231.0.0/16}"
	[[ "${base}" =~ ^([0-9]{1,3})\.([0-9]{1,3})\.[0-9]{1,3}\.[0-9]{1,3}(/[0-9]{1,2})?$ ]] ||
		die "LABS_CNI_SUBNET='${base}' is not an IPv4 network like 10.231.0.0/16"
	echo "${BASH_REMATCH[1]}.${BASH_REMATCH[2]}.${1//./}.0/24"
}

# use_flavour FLAVOUR sets every path and name of one instance; the
# functions below act on the flavour chosen last.
use_flavour() { # FLAVOUR
	FLAVOUR="$1"
	D="${TOP}/${FLAVOUR}"
	ENVFILE="${D}/env"
	BRIDGE="${LABS_CNI_BRIDGE:-labs}${FLAVOUR//./}"
	SUBNET="$(flavour_subnet "${FLAVOUR}")"
	if [ "${FLAVOUR}" = 1.6 ]; then
		# the distribution's, from PATH
		CONTAINERD_BIN="containerd"
		CTR="ctr"
	else
		CONTAINERD_BIN="${CONTAINERD2_BIN_DIR}/containerd"
		CTR="${CONTAINERD2_BIN_DIR}/ctr"
	fi
	SOCK="${D}/containerd.sock"
	CONF="${D}/config.toml"
	ROOT_DIR="${D}/root"
	STATE_DIR="${D}/state"
	RUNC_ROOT="${STATE_DIR}/runc"
	TMP_DIR="${D}/tmp"
	CNI_CONF_DIR="${D}/cni/net.d"
	CNI_IPAM_DIR="${D}/cni/ipam"
	POD_LOG_DIR="${D}/pod-logs"
	PIDFILE="${D}/containerd.pid"
	LOGFILE="${D}/containerd.log"
	CRICTL_YAML="${D}/crictl.yaml"
	# fixed host paths that did not exist before our first start (one a line)
	MARKS="${D}/created-host-paths"
	# the bridge's name, written when our start found no link of that name:
	# only then is the bridge ours to delete
	BRIDGE_MARK="${D}/created-bridge"
	CNI_NET="kubelet-labs-${BRIDGE}"
	SHIM_SOCKETS="${D}/shim-sockets"
	CLEANED_IDS=()
	CLEANED_SHIM_SOCKETS=()
}

# true if the bridge of this flavour is one our start created
bridge_is_ours() {
	[ -n "${BRIDGE}" ] && [ -f "${BRIDGE_MARK}" ] && [ "$(cat "${BRIDGE_MARK}")" = "${BRIDGE}" ]
}

# A containerd an older containerd-up.sh started from the learner's state
# folder (<state>/containerd/...), before root's things moved to root's
# tree: "PID CONFIG" lines. This version never touches that folder; the
# learner stops it with the scripts that started it.
old_layout_containerd() {
	local f pid conf
	while read -r f; do
		pid="${f#/proc/}"
		pid="${pid%/comm}"
		conf="$(tr '\0' '\n' 2>/dev/null <"/proc/${pid}/cmdline" | grep -A1 -x -- --config | tail -n +2)"
		case "${conf}" in
		"${TOP}"/*) ;;
		# another root tree (LABS_ROOT_DIR=…: a CI run's, a second checkout's),
		# made by make_root_dir: root's, 0711; the learner's old state folder is not
		# (not a bare */containerd/config.toml: that is also /etc/containerd's)
		*/containerd/2.2/config.toml | */containerd/1.6/config.toml)
			[ "$(stat -c %u:%a "${conf%/*/*/config.toml}" 2>/dev/null)" = 0:711 ] || echo "${pid} ${conf}" ;;
		esac
	done < <(grep -lsx containerd /proc/[0-9]*/comm)
	true
}

# The flavours with a folder (something of theirs may run or be left), one a line.
present_flavours() {
	local f
	for f in "${KNOWN_FLAVOURS[@]}"; do
		[ -d "${TOP}/${f}" ] && echo "${f}"
	done
	true
}

# the value of KEY in an env file written by containerd-up.sh
env_value() { # FILE KEY
	[ -f "$1" ] || return 0
	sed -n "s/^$2=//p" "$1" | head -n1
}

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
	printf 'error: %s\n' "$*" >&2
	exit 1
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

need_root() { # WHY
	[ "$(id -u)" -eq 0 ] || die "run as root (sudo $0): $1"
}

check_paths() {
	# sun_path is 108 bytes; leave room for ".ttrpc"
	if [ "${#SOCK}" -gt 100 ]; then
		die "socket path ${SOCK} is ${#SOCK} bytes, too long for a unix socket (max ~100); set LABS_ROOT_DIR to a shorter folder"
	fi
}

# check_root_owned PATH: PATH (which must be absolute and need not exist
# yet) and every folder above it are root's, not symlinks, and writable by
# nobody else — or, for a folder above, sticky (like /tmp: others cannot
# rename or remove root's entries in it). Then nothing a non-root user does
# can redirect or replace what root finds there. Only safe characters: the
# path ends up in configs and in root's commands.
check_root_owned() { # PATH
	local p="$1" cur="" part mode uid
	case "${p}" in
	/*) ;;
	*) die "${p}: want an absolute path" ;;
	esac
	[[ "${p}" =~ ^[A-Za-z0-9._/-]+$ ]] || die "${p}: only letters, digits and . _ - / are allowed in root's folder"
	local -a parts
	IFS=/ read -ra parts <<<"${p#/}"
	for part in "" "${parts[@]}"; do
		[ -n "${part}" ] || [ -z "${cur}" ] || continue
		cur="${cur%/}/${part}"
		[ -e "${cur}" ] || [ -L "${cur}" ] || return 0 # the rest is ours to create
		[ ! -L "${cur}" ] || die "${cur} is a symbolic link: root will not follow it (root's folder is ${p})"
		read -r uid mode < <(stat -c '%u %a' "${cur}")
		[ "${uid}" = 0 ] || die "${cur} belongs to uid ${uid}, not root: root will not trust anything under it (root's folder is ${p})"
		mode=$((8#${mode}))
		if [ $((mode & 8#022)) -ne 0 ] && { [ "${cur}" = "${p}" ] || [ $((mode & 8#1000)) -eq 0 ]; }; then
			die "${cur} is writable by users other than root (mode $(printf %o "${mode}")): root will not trust anything under it (root's folder is ${p})"
		fi
	done
}

# make_root_dir DIR: create DIR (mode 0711, root's) if missing, then check
# it and everything above it with check_root_owned.
make_root_dir() { # DIR
	check_root_owned "$1"
	[ -d "$1" ] || install -d -m 0711 -o 0 -g 0 "$1"
	check_root_owned "$1"
}

# make_marked_dir DIR MARKER MAKER: a folder of root's own, made by MAKER
# (a script's name, for messages). DIR is root's all the way up
# (check_root_owned); a missing one is made with mkdir, which fails if
# someone made it meanwhile (install -d would take their folder over, with
# what they put in it); one that exists must hold MARKER (MAKER made it)
# or be empty, and is marked then. So a variable naming /etc, /usr or a
# home folder by mistake is refused before root writes or deletes there.
make_marked_dir() { # DIR MARKER MAKER
	check_root_owned "$1"
	if [ ! -e "$1" ]; then
		# the folders above as they are, whoever made them: checked again
		mkdir -p -- "$(dirname -- "$1")"
		check_root_owned "$1"
		mkdir -m 0711 -- "$1" || die "$1: could not make it (did someone else just make it?)"
	fi
	check_root_owned "$1"
	[ -d "$1" ] || die "$1 is not a folder"
	if [ ! -f "$1/$2" ]; then
		[ -z "$(find "$1" -mindepth 1 -maxdepth 1 -print -quit)" ] ||
			die "$1 is not empty and was not made by $3 (no $2 in it): name a new or empty folder"
		echo "made by $3 of kubelet-labs; it deletes this folder only while this file is in it" >"$1/$2"
	fi
}

# make_root_tree: root's tree itself (LABS_ROOT), marked with ROOT_MARKER;
# containerd-down.sh --purge deletes only a marked tree. The default tree
# of an older version (no marker yet) is adopted: its name is ours.
make_root_tree() {
	if [ "${LABS_ROOT}" = "${DEFAULT_LABS_ROOT}" ] && [ -d "${LABS_ROOT}" ] && [ ! -f "${LABS_ROOT}/${ROOT_MARKER}" ]; then
		check_root_owned "${LABS_ROOT}"
		echo "made by containerd-up.sh of kubelet-labs (adopted)" >"${LABS_ROOT}/${ROOT_MARKER}"
	fi
	make_marked_dir "${LABS_ROOT}" "${ROOT_MARKER}" containerd-up.sh
}

# is_root_tree: LABS_ROOT exists and is marked as ours.
is_root_tree() {
	[ -d "${LABS_ROOT}" ] && [ -f "${LABS_ROOT}/${ROOT_MARKER}" ]
}

# check_root_chain PATH: PATH and every symlink on the way from it to the
# file it ends at (/usr/sbin/iptables -> /etc/alternatives/iptables ->
# iptables-nft, as Debian's alternatives do; /usr/bin/go -> ../lib/go-1.NN)
# sit in folders that are root's all the way up, and so does that file.
check_root_chain() { # PATH
	local hop="$1" n=0
	while [ -L "${hop}" ]; do
		check_root_owned "$(realpath "$(dirname "${hop}")")"
		n=$((n + 1))
		[ "${n}" -lt 20 ] || die "$1: too many symbolic links"
		case "$(readlink "${hop}")" in
		/*) hop="$(readlink "${hop}")" ;;
		*) hop="$(dirname "${hop}")/$(readlink "${hop}")" ;;
		esac
	done
	check_root_owned "$(realpath "${hop}")"
}

# root_program NAME: the absolute path of a program root may run, from
# ROOT_PATH only, passing check_root_chain. Prints nothing and fails if
# there is none.
root_program() { # NAME
	local p
	p="$(command -v "$1")" || return 1
	case "${p}" in /*) ;; *) return 1 ;; esac
	check_root_chain "${p}"
	echo "${p}"
}

# version_at_least HAVE WANT: true if the dotted version HAVE (go1.26.8,
# 1.25.0) is at least WANT.
version_at_least() { # HAVE WANT
	local have="${1#go}" want="${2#go}" i h w
	local -a hs ws
	have="${have%%[!0-9.]*}"
	IFS=. read -ra hs <<<"${have}"
	IFS=. read -ra ws <<<"${want}"
	for i in 0 1 2; do
		h="${hs[i]:-0}" w="${ws[i]:-0}"
		[ "$((10#${h}))" -gt "$((10#${w}))" ] && return 0
		[ "$((10#${h}))" -lt "$((10#${w}))" ] && return 1
	done
	return 0
}

# Where Go is when it was installed the usual ways: the go.dev tarball
# (/usr/local/go), the distribution's package (Debian/Ubuntu golang-go:
# /usr/bin/go, a link into /usr/lib/go-1.NN), a snap. sudo resets PATH to
# its secure_path, which has no /usr/local/go/bin: looking in PATH alone
# misses the most common install (issue 36).
GO_PLACES=(/usr/local/go/bin/go /usr/bin/go /usr/lib/go/bin/go /snap/bin/go)

# go_version GO: what GO says its version is, asked from / with nothing of
# the caller's: no go.mod or go.work of the current folder, no toolchain
# switch (GOTOOLCHAIN=local), no go env file.
go_version() { # GO
	(cd / && env -i PATH="${ROOT_PATH}" HOME=/nonexistent GOENV=off GOTOOLCHAIN=local GOFLAGS= GOWORK=off "$1" env GOVERSION 2>/dev/null)
}

# find_go: the Go root builds containerd with: LABS_GO if set (it must
# pass the same checks), else the first of GO_PLACES (then
# /usr/lib/go-1.*) that is root's all the way up and at least
# CONTAINERD2_GO_MIN. Prints its path; dies saying what it saw and
# what to type when there is none.
find_go() {
	local c ver why
	local -a tried=() places
	if [ -n "${LABS_GO:-}" ]; then
		places=("${LABS_GO}")
	else
		places=("${GO_PLACES[@]}")
		for c in /usr/lib/go-1.*/bin/go; do [ -e "${c}" ] && places+=("${c}"); done
	fi
	for c in "${places[@]}"; do
		[ -e "${c}" ] || { [ -n "${LABS_GO:-}" ] && tried+=("${c}: no such file"); continue; }
		if ! why="$(check_root_chain "${c}" 2>&1)"; then
			tried+=("${c}: ${why#error: }")
			continue
		fi
		# run as found: a snap's /snap/bin/go leads to /usr/bin/snap, which
		# goes by the name it was called with
		ver="$(go_version "${c}")" || ver=""
		if [ -z "${ver}" ]; then
			tried+=("${c}: does not run")
			continue
		fi
		if ! version_at_least "${ver}" "${CONTAINERD2_GO_MIN}"; then
			tried+=("${c}: ${ver}, older than go${CONTAINERD2_GO_MIN}, which containerd ${CONTAINERD2_VERSION} needs")
			continue
		fi
		echo "${c}"
		return 0
	done
	local msg="no Go that root can build containerd ${CONTAINERD2_VERSION} with (go${CONTAINERD2_GO_MIN} or newer, root's all the way up)"
	if [ "${#tried[@]}" -gt 0 ]; then
		msg+="; found:$(printf '\n  %s' "${tried[@]}")"
	else
		msg+="; looked in ${places[*]}"
	fi
	msg+="
Install Go for the whole machine as go.dev/doc/install says (as root, into /usr/local/go), then run the same command again;
or name a root-owned Go: sudo LABS_GO=/path/to/go/bin/go scripts/containerd-up.sh;
or use the distribution's containerd 1.6 (no Go needed): sudo scripts/containerd-up.sh --version 1.6"
	die "${msg}"
}

# root_go: sets go_bin, go_env and a function go() for every go command
# root runs. Root runs this go and what it compiles: it must be root's (find_go), and
# so must the module and build caches it reads (a poisoned cache is code
# root runs). Every go command below runs with an environment made here,
# none of the caller's (env -i): no GOROOT, GOCACHEPROG, GOFLAGS (-toolexec)
# or TMPDIR of whoever's environment root was given; GOTOOLCHAIN=local (no
# toolchain fetched into a cache); the checksum database on. A go env file
# only if root's (not that of whoever's HOME sudo kept). The module proxy,
# the checksum database and an HTTP proxy are taken from root's own
# environment (sudo passes none of the user's).
root_go() {
	go_bin="$(find_go)"
	root_home="$(getent passwd 0 | cut -d: -f6)"
	[ "${GOSUMDB:-}" != off ] || die "GOSUMDB=off: root builds only with the Go checksum database on"
	go_env=(PATH="${ROOT_PATH}" HOME="${root_home:-/root}" GOTOOLCHAIN=local GOWORK=off GOFLAGS= CGO_ENABLED=0
		GOPROXY="${GOPROXY:-}" GOSUMDB="${GOSUMDB:-}" GONOSUMDB= GONOSUMCHECK= GOPRIVATE= GOINSECURE= GONOPROXY=
		HTTPS_PROXY="${HTTPS_PROXY:-}" HTTP_PROXY="${HTTP_PROXY:-}" NO_PROXY="${NO_PROXY:-}")
	go() { env -i "${go_env[@]}" "${go_bin}" "$@"; }
	goenv="$(go env GOENV)"
	if [ "${goenv}" = off ] || ! (check_root_owned "${goenv}") 2>/dev/null; then goenv=off; fi
	go_env+=(GOENV="${goenv}")
	go_root_env() {
		local mod cache
		mod="$(go env GOMODCACHE)"
		cache="$(go env GOCACHE)"
		if ! (check_root_owned "${mod}") 2>/dev/null; then mod="${LABS_ROOT}/go/mod"; fi
		if ! (check_root_owned "${cache}") 2>/dev/null; then cache="${LABS_ROOT}/go/cache"; fi
		check_root_owned "${mod}"
		check_root_owned "${cache}"
		echo "GOMODCACHE=${mod}"
		echo "GOCACHE=${cache}"
	}
	mapfile -t caches < <(go_root_env)
	[ "${#caches[@]}" -eq 2 ] || die "no root-owned Go module and build cache"
	go_env+=("${caches[@]}")
	[ "$(go env GOSUMDB)" != off ] || die "GOSUMDB=off in root's go env file: root builds only with the Go checksum database on"
}

# install_missing PACKAGE...: apt-get installs the Debian packages named
# (duplicates dropped), or says what to install where there is no apt or
# LABS_NO_INSTALL=1. Nothing named: nothing done.
install_missing() {
	[ "$#" -gt 0 ] || return 0
	local -a pkgs
	mapfile -t pkgs < <(printf '%s\n' "$@" | sort -u)
	if [ "${LABS_NO_INSTALL:-0}" = 1 ] || ! command -v apt-get >/dev/null; then
		die "missing: ${pkgs[*]}; install them with your package manager (Debian/Ubuntu: apt-get install -y --no-install-recommends ${pkgs[*]})"
	fi
	log "installing ${pkgs[*]} (apt)"
	local t0
	t0="$(now)"
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
	t_apt="$(elapsed "${t0}")"
	log "installed in ${t_apt}s"
}

# check_learner_group UID GID: the socket and the pod logs go to the user
# who ran sudo and to GID. Whoever is in that group gets them too, and the
# socket is root on this machine: GID must be the user's own group (named
# as the user, with no other member and no other user's primary group), as
# useradd makes it on Debian and most distributions. A shared group
# ("domain users", `useradd -g workshop`) is refused.
check_learner_group() { # UID GID
	local uid="$1" gid="$2" user gname members others
	[ "${uid}" = 0 ] && return 0
	user="$(getent passwd "${uid}" | cut -d: -f1)"
	[ -n "${user}" ] || die "uid ${uid} (SUDO_UID) is no user of this machine"
	IFS=: read -r gname _ _ members < <(getent group "${gid}" || true)
	[ -n "${gname}" ] || die "gid ${gid} (SUDO_GID) is no group of this machine"
	# users with it as their primary group, and its listed members, but the user
	others="$({
		getent passwd | awk -F: -v g="${gid}" -v u="${uid}" '$4 == g && $3 != u { print $1 }'
		tr ',' '\n' <<<"${members}" | grep -vxF -e "${user}" -e '' || true
	} | sort -u | paste -sd, -)"
	if [ "${gname}" != "${user}" ] || [ -n "${others}" ]; then
		local who=""
		[ -z "${others}" ] || who=" (also ${others//,/, })"
		[ "${gname}" = "${user}" ] || who+=" (not named ${user}: it may be shared)"
		die "your group ${gname} (gid ${gid}) is not yours alone${who}: containerd's socket and your pod logs would be that group's too, and whoever holds the socket is root on this machine. Run this from an account with a group of its own (useradd's default: a group named as the user)"
	fi
}

# check_bridge_prefix: LABS_CNI_BRIDGE goes into a CNI config (JSON) and
# names the link down deletes: letters and digits only, short enough for a
# link name (15 bytes) with the flavour's digits after it.
check_bridge_prefix() {
	[[ "${LABS_CNI_BRIDGE:-labs}" =~ ^[a-z][a-z0-9]{0,11}$ ]] ||
		die "LABS_CNI_BRIDGE='${LABS_CNI_BRIDGE:-}' is not a bridge name prefix: 1-12 lower-case letters and digits, starting with a letter"
}

# Docker (kind needs it, vm.yaml installs it) sets `iptables -P FORWARD
# DROP` and loads bridge netfilter (net.bridge.bridge-nf-call-iptables=1):
# from then on even traffic between two pods on our bridge goes through the
# FORWARD chain, and is dropped (measured 2026-11-28: upstream's
# intra-pod and lifecycle-hook tests failed with Docker up). CNI setups
# accept their own bridge's traffic for that reason; so do we: what enters
# or leaves our bridge is accepted at the top of FORWARD, each rule tagged
# with a comment naming the bridge, so that down removes exactly ours.
forward_rules() {
	local dir
	for dir in -i -o; do
		echo "${dir} ${BRIDGE} -m comment --comment kubelet-labs:${BRIDGE} -j ACCEPT"
	done
}

# allow_forward: our bridge's rules at the top of FORWARD, once each.
allow_forward() {
	local iptables rule
	local -a spec
	iptables="$(root_program iptables)" || die "iptables not found in ${ROOT_PATH}"
	while read -r rule; do
		read -ra spec <<<"${rule}"
		"${iptables}" -w -C FORWARD "${spec[@]}" 2>/dev/null || "${iptables}" -w -I FORWARD 1 "${spec[@]}"
	done < <(forward_rules)
}

# remove_forward: every copy of our bridge's rules.
remove_forward() {
	local iptables rule
	local -a spec
	iptables="$(root_program iptables 2>/dev/null)" || return 0
	while read -r rule; do
		read -ra spec <<<"${rule}"
		while "${iptables}" -w -C FORWARD "${spec[@]}" 2>/dev/null; do
			"${iptables}" -w -D FORWARD "${spec[@]}"
		done
	done < <(forward_rules)
}

# Host ports. portmap, chained after our bridge (conflist in
# containerd-up.sh), DNATs a pod's host ports from a chain of the pod's own
# in the nat table, CNI-DN-<hash of network name and sandbox id>, entered
# from CNI-HOSTPORT-DNAT; CNI DEL removes it. Down kills containerd with no
# CNI DEL, so it removes our pods' chains itself (remove_hostport). The
# chains portmap shares between all its pods it never removes:
# CNI-HOSTPORT-DNAT (entered from PREROUTING and OUTPUT), -SETMARK and -MASQ
# (the masquerade mark for connections from 127.0.0.1; -MASQ entered from
# POSTROUTING) and -SNAT (older plugins'). Another CNI user on this host
# (the other flavour, any CNI runtime) may share them, so they go only when
# no rule of anyone's is in them — DNAT and SNAT empty, SETMARK and MASQ
# holding only portmap's own mark and masquerade rules, no chain but the
# built-in ones entering them — and the jumps to them go with them. Each
# removal is one iptables-restore transaction: if another pod's rule lands
# in a chain meanwhile, the kernel refuses to delete that chain and nothing
# changes. (The route_localnet portmap sets on our bridge goes with the
# bridge.) containernetworking/plugins v1.1.1, Debian 12's:
# plugins/meta/portmap/portmap.go:47-52 (the names), 148-158 (DNAT's
# entries), 281-321 (SETMARK, MASQ), 351-377 (CNI DEL: the pod's chain only).
HOSTPORT_CHAINS=(CNI-HOSTPORT-DNAT CNI-HOSTPORT-SNAT CNI-HOSTPORT-SETMARK CNI-HOSTPORT-MASQ)

# hostport_chain ID: the chain portmap makes for sandbox ID on our network
# (pkg/utils/utils.go:39-60, MustFormatChainNameWithPrefix: "CNI-DN-" and
# the sha512 of network name and id, 28 characters in all).
hostport_chain() { # ID
	printf 'CNI-DN-%s\n' "$(printf '%s%s' "${CNI_NET}" "$1" | sha512sum | cut -c1-21)"
}

# nat_rules: `iptables -t nat -S`; nothing where there is no iptables.
nat_rules() {
	local iptables
	iptables="$(root_program iptables 2>/dev/null)" || return 0
	"${iptables}" -w -t nat -S 2>/dev/null || true
}

# nat_commit: the nat table commands on stdin (iptables-restore syntax) as
# one transaction; the rest of the table stays as it is.
nat_commit() {
	local restore
	restore="$(root_program iptables-restore 2>/dev/null)" || return 1
	{
		echo '*nat'
		cat
		echo COMMIT
	} | "${restore}" -w --noflush
}

# our_hostport_chains RULES ID...: the chains of our pods' host ports that
# exist: the ones the ids name, and those a rule of our network enters
# (portmap's comment names the network).
our_hostport_chains() { # RULES ID...
	local rules="$1" id
	shift
	{
		for id in "$@"; do hostport_chain "${id}"; done
		grep -F -- "-A CNI-HOSTPORT-DNAT " <<<"${rules}" | grep -F -- "dnat name: \\\"${CNI_NET}\\\" id:" |
			sed -n 's/.* -j \(CNI-DN-[0-9a-f]*\)$/\1/p'
	} | sort -u | while read -r id; do
		grep -qxF -- "-N ${id}" <<<"${rules}" && echo "${id}"
	done
	true
}

# unused_hostport_chains RULES: the shared chains that exist, when no rule
# of anyone's uses them (see above); nothing while one does.
unused_hostport_chains() { # RULES
	local rules="$1" line chain c
	while read -r line; do
		chain="${line#-A }"
		chain="${chain%% *}"
		case "${chain}" in
		CNI-HOSTPORT-SETMARK) [[ "${line}" == *" -j MARK --set-xmark "* ]] || return 0 ;;
		CNI-HOSTPORT-MASQ) [[ "${line}" == *" -m mark --mark "*" -j MASQUERADE"* ]] || return 0 ;;
		CNI-HOSTPORT-*) return 0 ;;
		PREROUTING | OUTPUT | POSTROUTING) ;;
		*) [[ "${line}" != *" -j CNI-HOSTPORT-"* ]] || return 0 ;;
		esac
	done < <(grep -- '^-A ' <<<"${rules}" || true)
	for c in "${HOSTPORT_CHAINS[@]}"; do
		grep -qxF -- "-N ${c}" <<<"${rules}" && echo "${c}"
	done
	true
}

# delete_nat_chains RULES ENTRY_CHAINS CHAIN...: in one transaction, the
# rules of the chains ENTRY_CHAINS (an extended regexp) that jump to one of
# CHAINS, the rules RULES lists in CHAINS (each deleted by its spec, no
# flush: a rule added since RULES was read stays, and its chain's -X fails
# the whole transaction), then CHAINS themselves.
delete_nat_chains() { # RULES ENTRY_CHAINS CHAIN...
	local rules="$1" entry="$2" c
	shift 2
	{
		for c in "$@"; do
			grep -E -- "^-A (${entry}) .* -j ${c}\$" <<<"${rules}" | sed 's/^-A /-D /' || true
		done
		for c in "$@"; do
			grep -- "^-A ${c} " <<<"${rules}" | sed 's/^-A /-D /' || true
		done
		for c in "$@"; do echo "-X ${c}"; done
	} | nat_commit
}

# remove_hostport ID...: our pods' host port chains, then portmap's shared
# chains if nobody uses them any more.
remove_hostport() { # ID...
	local rules
	local -a chains
	rules="$(nat_rules)"
	[ -n "${rules}" ] || return 0
	mapfile -t chains < <(our_hostport_chains "${rules}" "$@")
	if [ "${#chains[@]}" -gt 0 ]; then
		delete_nat_chains "${rules}" CNI-HOSTPORT-DNAT "${chains[@]}" || log "[${FLAVOUR}] could not remove the host port chains ${chains[*]}"
		rules="$(nat_rules)"
	fi
	mapfile -t chains < <(unused_hostport_chains "${rules}")
	if [ "${#chains[@]}" -gt 0 ]; then
		# a pod's rule added since we looked fails the transaction: then in use
		delete_nat_chains "${rules}" 'PREROUTING|OUTPUT|POSTROUTING' "${chains[@]}" 2>/dev/null || true
	fi
}

# rotate_log FILE: a new run starts a new log; the one before is kept as
# FILE.1 (one generation), so the log of a machine that ran the labs for
# months is two runs long, not months.
rotate_log() { # FILE
	[ -s "$1" ] || return 0
	mv -f "$1" "$1.1"
}

# pids of processes that have ARG1 ARG2 ... as consecutive arguments,
# e.g. `--config /x/config.toml` (containerd) or `-address /x/containerd.sock`
# (its shims). Exact argv match, so an editor or a grep naming the same file
# is not mistaken for ours.
pids_with_args() { # ARG...
	local f pid
	# one grep over all command lines, then an exact check of the few hits
	while read -r f; do
		pid="${f#/proc/}"
		pid="${pid%/cmdline}"
		[ "${pid}" = "$$" ] && continue
		args_adjacent "${pid}" "$@" && echo "${pid}"
	done < <(grep -laF -- "$2" /proc/[0-9]*/cmdline 2>/dev/null)
	true
}

# true if /proc/PID/cmdline has ARG1 ARG2 ... as consecutive arguments
args_adjacent() { # PID ARG...
	local pid="$1"
	shift
	local -a argv
	mapfile -d '' -t argv 2>/dev/null <"/proc/${pid}/cmdline" || return 1
	local i j n=$#
	local -a want=("$@")
	for ((i = 0; i + n <= ${#argv[@]}; i++)); do
		for ((j = 0; j < n; j++)); do
			[ "${argv[i + j]}" = "${want[j]}" ] || continue 2
		done
		return 0
	done
	return 1
}

containerd_pids() { pids_with_args --config "${CONF}"; }
shim_pids() { pids_with_args -address "${SOCK}"; }

# all descendants of the given pids (children first found via /proc/*/stat)
descendants() { # PID...
	local -A parent_of=()
	local stat pid ppid rest
	for stat in /proc/[0-9]*/stat; do
		read -r rest 2>/dev/null <"${stat}" || continue
		pid="${rest%% *}"
		rest="${rest##*) }" # skip "comm", which may contain spaces
		ppid="${rest#* }"   # fields now: state ppid ...
		ppid="${ppid%% *}"
		parent_of["${pid}"]="${ppid}"
	done
	local -a queue=("$@")
	local p c
	while [ "${#queue[@]}" -gt 0 ]; do
		p="${queue[0]}"
		queue=("${queue[@]:1}")
		for c in "${!parent_of[@]}"; do
			if [ "${parent_of[${c}]}" = "${p}" ]; then
				echo "${c}"
				queue+=("${c}")
			fi
		done
	done
}

# ids of containers and sandboxes this containerd knows about, from its
# on-disk state (works with containerd dead)
container_ids() {
	local d
	# the CRI plugin's folders: io.containerd.grpc.v1.cri (1.6),
	# io.containerd.cri.v1.runtime and friends (2.x)
	for d in "${STATE_DIR}"/io.containerd.runtime.v2.task/*/* "${RUNC_ROOT}"/*/* \
		"${ROOT_DIR}"/io.containerd.*cri*/sandboxes/* "${ROOT_DIR}"/io.containerd.*cri*/containers/* \
		"${STATE_DIR}"/io.containerd.*cri*/sandboxes/* "${STATE_DIR}"/io.containerd.*cri*/containers/*; do
		[ -d "${d}" ] && basename "${d}"
	done | sort -u | grep -E '^[0-9a-f]{64}$' || true
}

# container ids named by live processes: a shim's `-id ID` (its sandbox)
# and the 64-hex cgroup leaf of each process under it
ids_from_processes() { # SHIM_PID...
	local p
	for p in "$@"; do
		tr '\0' '\n' 2>/dev/null <"/proc/${p}/cmdline" | grep -A1 -x -- -id | tail -n +2
	done
	for p in $(descendants "$@"); do
		sed -n 's#.*/\([0-9a-f]\{64\}\)$#\1#p' "/proc/${p}/cgroup" 2>/dev/null
	done
	true
}

# processes whose cgroup path ends in one of our container ids: container
# processes, even those re-parented to PID 1 after their shim died
pids_in_our_cgroups() { # ID...
	[ $# -gt 0 ] || return 0
	local pattern pid
	pattern="/($(
		IFS='|'
		echo "$*"
	))\$"
	for pid in /proc/[0-9]*; do
		if grep -qE -- "${pattern}" "${pid}/cgroup" 2>/dev/null; then
			echo "${pid#/proc/}"
		fi
	done
}

# cgroup folders named after our containers, wherever their cgroup parent
# put them (/k8s.io/ID by default, /kubepods/.../ID under a kubelet),
# deepest first
our_cgroups() { # ID...
	[ $# -gt 0 ] || return 0
	local -a names=()
	local id
	for id in "$@"; do names+=(-o -name "${id}"); done
	find /sys/fs/cgroup -mindepth 2 -type d \( "${names[@]:1}" \) 2>/dev/null | awk '{ print length($0) " " $0 }' | sort -rn | cut -d' ' -f2-
}

# mount points under our flavour's folder, deepest first
our_mounts() {
	awk -v d="${D}/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | awk '{ print length($0) " " $0 }' | sort -rn | cut -d' ' -f2-
}

kill_wait() { # SECONDS PID...
	local secs="$1" i
	shift
	[ $# -gt 0 ] || return 0
	kill -TERM "$@" 2>/dev/null || true
	for ((i = 0; i < secs * 10; i++)); do
		local alive=0 p
		for p in "$@"; do [ -d "/proc/${p}" ] && alive=1; done
		[ "${alive}" -eq 0 ] && return 0
		sleep 0.1
	done
	kill -KILL "$@" 2>/dev/null || true
}

# record shim socket paths (/run/containerd/s/<hash>) while the state that
# names them still exists: a SIGKILLed shim leaves its socket behind. The
# shim writes its address to <state>/io.containerd.runtime.v2.task/NS/ID/address;
# the name is also computable: sha256("<containerd socket>/NS/ID") (shim
# library, SocketAddress, containerd 1.6), which covers a lost state folder.
remember_shim_sockets() { # ID...
	local f addr id
	{
		for f in "${STATE_DIR}"/io.containerd.runtime.v2.task/*/*/address; do
			[ -f "${f}" ] || continue
			addr="$(cat "${f}")"
			echo "${addr#unix://}"
		done
		for id in "$@"; do
			printf '/run/containerd/s/%s\n' "$(printf '%s' "${SOCK}/k8s.io/${id}" | sha256sum | cut -d' ' -f1)"
		done
	} >>"${SHIM_SOCKETS}" 2>/dev/null || true
	sort -u -o "${SHIM_SOCKETS}" "${SHIM_SOCKETS}"
}

# Stop everything a (possibly dead or half-started) run of ours left: the
# containerd, its containers, shims, mounts, network, fixed-path files.
# Safe to call when nothing runs.
cleanup_all() {
	local -a ids pids shims
	mkdir -p "${D}"
	# Which containers are ours: from the state folder, and, in case that is
	# gone, from the live shims (-id) and the cgroups of their children.
	mapfile -t shims < <(shim_pids)
	mapfile -t ids < <(
		container_ids
		if [ "${#shims[@]}" -gt 0 ]; then
			ids_from_processes "${shims[@]}"
		fi
	)
	mapfile -t ids < <(printf '%s\n' "${ids[@]}" | grep -E '^[0-9a-f]{64}$' | sort -u)
	remember_shim_sockets "${ids[@]}"
	# kept for leftovers(), which runs after the state is gone
	CLEANED_IDS=("${ids[@]}")
	CLEANED_SHIM_SOCKETS=()
	if [ -f "${SHIM_SOCKETS}" ]; then mapfile -t CLEANED_SHIM_SOCKETS <"${SHIM_SOCKETS}"; fi

	# 1. containerd itself first, so it does not restart or re-create anything
	mapfile -t pids < <(containerd_pids)
	if [ "${#pids[@]}" -gt 0 ]; then
		log "[${FLAVOUR}] stopping containerd (pid ${pids[*]})"
		# everything it would tidy up on the way out is cleaned below anyway
		kill_wait 3 "${pids[@]}"
	fi

	# 2. the containers: runc kills them and removes their cgroups
	local rr id
	for rr in "${RUNC_ROOT}"/*; do
		[ -d "${rr}" ] || continue
		while read -r id; do
			[ -n "${id}" ] || continue
			runc --root "${rr}" delete --force "${id}" >/dev/null 2>&1 || true
		done < <(runc --root "${rr}" list -q 2>/dev/null || true)
	done

	# 3. shims (re-parented to PID 1 once containerd is gone) and anything
	#    still under them or in our containers' cgroups
	local -a rest
	mapfile -t shims < <(shim_pids)
	mapfile -t rest < <(
		if [ "${#shims[@]}" -gt 0 ]; then descendants "${shims[@]}"; fi
		pids_in_our_cgroups "${ids[@]}"
	)
	if [ "${#rest[@]}" -gt 0 ]; then
		log "[${FLAVOUR}] killing ${#rest[@]} container process(es)"
		kill -KILL "${rest[@]}" 2>/dev/null || true
	fi
	if [ "${#shims[@]}" -gt 0 ]; then
		# with containerd gone a shim has nobody to report to: no grace needed
		log "[${FLAVOUR}] killing ${#shims[@]} shim(s)"
		kill -KILL "${shims[@]}" 2>/dev/null || true
	fi
	sleep 0.2

	# 4. mounts: container rootfs (overlay), sandbox /dev/shm, netns bind mounts
	local m try
	for try in 1 2 3; do
		local any=0
		while read -r m; do
			[ -n "${m}" ] || continue
			any=1
			umount "${m}" 2>/dev/null || { [ "${try}" -eq 3 ] && umount -l "${m}" 2>/dev/null; } || true
		done < <(our_mounts)
		[ "${any}" -eq 0 ] && break
		sleep 0.2
	done

	# 5. network: veths left on our bridge (their netns are gone by now), the
	#    bridge — only if our start created it (a link of that name someone
	#    else made is not ours to delete)
	if bridge_is_ours && [ -d "/sys/class/net/${BRIDGE}" ]; then
		local v
		for v in "/sys/class/net/${BRIDGE}/brif/"*; do
			if [ -e "${v}" ]; then ip link del "$(basename "${v}")" 2>/dev/null || true; fi
		done
		ip link del "${BRIDGE}" 2>/dev/null || true
	fi

	remove_forward
	remove_hostport "${ids[@]}"

	# 6. files in fixed host paths
	if [ -f "${SHIM_SOCKETS}" ]; then
		while read -r m; do [ -n "${m}" ] && rm -f "${m}"; done <"${SHIM_SOCKETS}"
	fi
	rm -f "${CNI_RESULTS}/${CNI_NET}-"* 2>/dev/null || true
	for id in "${ids[@]}"; do
		# libcni caches every ADD per network: ours and containerd's loopback
		rm -f "${CNI_RESULTS}/"*"-${id}-"* 2>/dev/null || true
	done
	# cgroups runc could not delete (state lost): empty now, so rmdir works
	local c
	while read -r c; do
		rmdir "${c}" 2>/dev/null || true
	done < <(our_cgroups "${ids[@]}")
	# (host paths: undo_host_paths, once every flavour is stopped)

	# 7. our own folders, only once nothing is mounted under them
	if [ -z "$(our_mounts)" ]; then
		rm -rf --one-file-system "${ROOT_DIR}" "${STATE_DIR}" "${TMP_DIR}" "${CNI_IPAM_DIR}" "${POD_LOG_DIR}"
		rm -f "${SOCK}" "${SOCK}.ttrpc" "${PIDFILE}" "${SHIM_SOCKETS}" "${ENVFILE}" "${CRICTL_YAML}"
		[ -e "/sys/class/net/${BRIDGE}" ] || rm -f "${BRIDGE_MARK}"
	fi
}

# Before a start: remember which fixed host paths do not exist yet, and the
# ip_forward setting, so down can put the host back as it was.
mark_host_paths() {
	local p
	touch "${MARKS}"
	for p in /run/containerd/s /run/containerd /var/lib/cni/results /var/lib/cni /run/netns \
		/sys/fs/cgroup/*/k8s.io /sys/fs/cgroup/k8s.io /opt/containerd /var/lib/containerd; do
		case "${p}" in *'*'*) continue ;; esac
		[ -e "${p}" ] || grep -qxF "${p}" "${MARKS}" || echo "${p}" >>"${MARKS}"
	done
	# cgroup v1 controllers: the k8s.io child appears in each one
	local c
	for c in /sys/fs/cgroup/*/; do
		p="${c%/}/k8s.io"
		[ -e "${p}" ] || grep -qxF "${p}" "${MARKS}" || echo "${p}" >>"${MARKS}"
	done
	if ! grep -q '^ip_forward=' "${MARKS}"; then
		echo "ip_forward=$(cat /proc/sys/net/ipv4/ip_forward)" >>"${MARKS}"
	fi
}

# true if any live (not zombie) containerd runs on this host
other_containerd_running() {
	local f st
	while read -r f; do
		st="$(cat "${f%/comm}/stat" 2>/dev/null)" || continue
		st="${st##*) }"
		[ "${st%% *}" != Z ] && return 0
	done < <(grep -lsx containerd /proc/[0-9]*/comm)
	return 1
}

# Remove the fixed host paths we created, if nothing but empty folders is
# left in them, and restore ip_forward if the CNI bridge turned it on; all
# of it only while no containerd runs at all (the other flavour, another
# state folder's, Docker's): it may use them. The marks stay for a later down.
undo_host_paths() {
	[ -f "${MARKS}" ] || return 0
	local p
	while read -r p; do
		case "${p}" in
		/sys/fs/cgroup/*)
			# fails (and stays marked) while a container of anyone is inside
			[ -d "${p}" ] && rmdir "${p}" 2>/dev/null
			;;
		*) other_containerd_running && continue ;;&
		ip_forward=*)
			if [ "${p#ip_forward=}" = 0 ] && [ "$(cat /proc/sys/net/ipv4/ip_forward)" = 1 ]; then
				echo 0 >/proc/sys/net/ipv4/ip_forward
			fi
			# the next start records the then-current value again
			sed -i '/^ip_forward=/d' "${MARKS}"
			;;
		/*) [ -d "${p}" ] && find "${p}" -depth -type d -empty -delete 2>/dev/null ;;
		esac
	done < <(sort -r "${MARKS}")
	true
}

# Print one line per thing of ours still present; print nothing if clean.
leftovers() {
	local p
	for p in $(containerd_pids) $(shim_pids); do
		echo "process ${p}: $(tr '\0' ' ' 2>/dev/null <"/proc/${p}/cmdline")"
	done
	local -a ids
	mapfile -t ids < <(
		container_ids
		printf '%s\n' "${CLEANED_IDS[@]}"
	)
	mapfile -t ids < <(printf '%s\n' "${ids[@]}" | grep -E '^[0-9a-f]{64}$' | sort -u)
	for p in $(pids_in_our_cgroups "${ids[@]}"); do
		echo "container process ${p}: $(tr '\0' ' ' 2>/dev/null <"/proc/${p}/cmdline")"
	done
	for m in $(our_cgroups "${ids[@]}"); do
		echo "cgroup ${m}"
	done
	local m
	while read -r m; do
		[ -n "${m}" ] && echo "mount ${m}"
	done < <(our_mounts)
	bridge_is_ours && [ -e "/sys/class/net/${BRIDGE}" ] && echo "network link ${BRIDGE}"
	local iptables rule rules
	local -a spec
	if iptables="$(root_program iptables 2>/dev/null)"; then
		while read -r rule; do
			read -ra spec <<<"${rule}"
			"${iptables}" -w -C FORWARD "${spec[@]}" 2>/dev/null && echo "iptables rule FORWARD ${rule}"
		done < <(forward_rules)
	fi
	rules="$(nat_rules)"
	for m in $(our_hostport_chains "${rules}" "${ids[@]}"); do
		echo "iptables chain ${m} (nat table: a pod's host ports)"
	done
	for m in $(unused_hostport_chains "${rules}"); do
		echo "iptables chain ${m} (nat table: portmap's, no rule of anyone's in it)"
	done
	for m in "${CLEANED_SHIM_SOCKETS[@]}"; do
		[ -n "${m}" ] && [ -e "${m}" ] && echo "shim socket ${m}"
	done
	for m in "${CNI_RESULTS}/${CNI_NET}-"*; do
		[ -e "${m}" ] && echo "CNI cache ${m}"
	done
	for p in "${ids[@]}"; do
		for m in "${CNI_RESULTS}/"*"-${p}-"*; do
			[ -e "${m}" ] && echo "CNI cache ${m}"
		done
	done
	[ -e "${SOCK}" ] && echo "socket ${SOCK}"
	true
}

# After undo_host_paths: a cgroup folder we created that is still there
# though nothing is in it (one with containers in it belongs to someone else
# now, e.g. the other flavour's pods).
leftover_host_paths() {
	[ -f "${MARKS}" ] || return 0
	local m
	while read -r m; do
		case "${m}" in
		/sys/fs/cgroup/*)
			if [ -d "${m}" ] && [ -z "$(find "${m}" -mindepth 1 -maxdepth 1 -type d -print -quit 2>/dev/null)" ]; then
				echo "cgroup ${m}"
			fi
			;;
		esac
	done <"${MARKS}"
	true
}

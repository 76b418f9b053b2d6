#!/usr/bin/env bash
# Start a private containerd for the real-runtime labs (11-containerd and
# later) on a unix socket in root's tree (/var/lib/kubelet-labs), with
# offline images, and hand the socket to the learner who ran sudo.
#
#   sudo scripts/containerd-up.sh                    # containerd 2.2 (the default)
#   sudo scripts/containerd-up.sh --version 1.6      # the distribution's (Debian 12: 1.6.20)
#   sudo scripts/containerd-up.sh --version 2.2,1.6  # both side by side
#   sudo scripts/containerd-down.sh                  # stops every one, removes every trace
#
# Flavours (LABS_CONTAINERD=... does what --version does; the flag wins):
#   2.2  containerd v2.2.x (pinned in scripts/containerd/lib.sh), built from
#        its Go module by scripts/build-containerd.sh into <root>/bin/ the
#        first time (needs Go; a few minutes), config `version = 3`
#   1.6  the distribution's containerd from apt (Debian 12: 1.6.20, end of
#        life, installed in seconds), config `version = 2`
# Both use the distribution's runc and CNI plugins and the same offline images.
# Each runs in its own folder <root>/containerd/<flavour>/ with its own
# socket, bridge (labs22, labs16) and subnet (10.231.22.0/24, 10.231.16.0/24).
# The labs use the first flavour named: its env and crictl.yaml are copied to
# <root>/containerd/env and crictl.yaml (internal/labruntime reads that env file). A
# flavour already running and not named keeps running.
#
# What it does (idempotent; a second run reuses a healthy instance):
#   1. installs runc, CNI plugins, busybox-static, gcc (and containerd for
#      1.6) from the distribution (apt) if missing; builds containerd 2.2 if
#      missing;
#   2. builds the pause and busybox images offline (scripts/containerd/build-images.sh);
#   3. writes config.toml and a CNI conflist (bridge, then portmap for host
#      ports) in the flavour's folder;
#   4. cleans up a stale previous run (killed containerd, left-over shims,
#      mounts, bridge) and starts containerd, waits until its CRI answers;
#   5. imports the images into the k8s.io namespace (the one the CRI uses);
#   6. writes and prints the flavour's env (CONTAINERD_SOCK=..., images);
#   7. accepts its bridge's traffic at the top of iptables' FORWARD chain
#      (Docker's FORWARD DROP would drop even pod-to-pod traffic; down
#      removes the rules, and the NAT rules portmap left for host ports).
#
# Everything it makes lives in root's tree, /var/lib/kubelet-labs (see
# scripts/containerd/lib.sh): never in the learner's .labs/, which any
# process of the learner could fill with symlinks for root to follow.
#
# Environment: LABS_ROOT_DIR (root's tree; root's all the way down or
# refused), LABS_CONTAINERD (flavours),
# LABS_CNI_BRIDGE (bridge name prefix, default labs), LABS_CNI_SUBNET (the
# /16 the flavours' /24s come from, default 10.231.0.0/16),
# LABS_NO_INSTALL=1 (never run apt).
set -euo pipefail
# say where it stopped: set -e alone exits silently
trap 'echo "containerd-up: line ${LINENO}: \"${BASH_COMMAND}\" failed" >&2' ERR

# shellcheck source=scripts/containerd/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/containerd/lib.sh"

usage() { die "usage: $0 [--version FLAVOURS]   (FLAVOURS: ${KNOWN_FLAVOURS[*]}, a comma list, or all; default \${LABS_CONTAINERD:-${DEFAULT_FLAVOUR}})"; }
requested="${LABS_CONTAINERD:-${DEFAULT_FLAVOUR}}"
while [ $# -gt 0 ]; do
	case "$1" in
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
# validate in this shell (die exits), then collect
parse_flavours "${requested}" >/dev/null
mapfile -t flavours < <(parse_flavours "${requested}")
wants() { # FLAVOUR
	local f
	for f in "${flavours[@]}"; do [ "${f}" = "$1" ] && return 0; done
	return 1
}

need_root "containerd needs mounts, namespaces and cgroups"
# The one command of the course that runs as root is this script (and
# containerd-down.sh). Everything else — every lab, crictl, reading pod
# logs — runs as the learner: the user who ran sudo gets the CRI socket and
# can read the pod logs. Run directly as root (CI), the learner is root.
LEARNER_UID="${SUDO_UID:-0}"
LEARNER_GID="${SUDO_GID:-0}"
[[ "${LEARNER_UID}:${LEARNER_GID}" =~ ^[0-9]+:[0-9]+$ ]] || die "SUDO_UID/SUDO_GID (${LEARNER_UID}:${LEARNER_GID}) are not numeric ids"
# The socket and the pod logs go to that user and group: a group of one.
check_learner_group "${LEARNER_UID}" "${LEARNER_GID}"
check_bridge_prefix
for f in "${flavours[@]}"; do
	use_flavour "${f}"
	check_paths
done
# Root's tree (scripts/containerd/lib.sh): nothing in it is the learner's but
# their pod logs, and nothing root runs or reads lives anywhere else.
make_root_tree
make_root_dir "${TOP}"
# one up or down at a time
exec 8>"${TOP}/.up-down.lock"
flock 8
old="$(old_layout_containerd)"
[ -z "${old}" ] || die "a containerd an older containerd-up.sh started still runs from the learner's state folder:
${old}
stop it with the scripts of that version (sudo scripts/containerd-down.sh there), or reboot; this version keeps root's things in ${LABS_ROOT} and will not touch that folder"

# --- 1. packages -------------------------------------------------------------
t_apt=0
find_cni_bin() {
	local d
	for d in /usr/lib/cni /opt/cni/bin /usr/libexec/cni; do
		if [ -x "${d}/bridge" ] && [ -x "${d}/host-local" ] && [ -x "${d}/loopback" ] && [ -x "${d}/portmap" ]; then
			echo "${d}"
			return 0
		fi
	done
	return 1
}
missing=()
if wants 1.6; then
	command -v containerd >/dev/null || missing+=(containerd)
	command -v ctr >/dev/null || missing+=(containerd)
fi
command -v runc >/dev/null || missing+=(runc)
command -v iptables >/dev/null || missing+=(iptables)
find_cni_bin >/dev/null || missing+=(containernetworking-plugins)
[ "$(dpkg-query -W -f='${Status}' busybox-static 2>/dev/null || true)" = "install ok installed" ] || missing+=(busybox-static)
command -v gcc >/dev/null || missing+=(gcc)
# gcc -static needs libc.a
[ -n "$(find /usr/lib /usr/lib64 -name libc.a -print -quit 2>/dev/null)" ] || missing+=(libc6-dev)
install_missing "${missing[@]}"
CNI_BIN="$(find_cni_bin)" || die "CNI plugins (bridge, host-local, loopback, portmap) not found"
# containerd runs the CNI plugins and runc as root: root's, all the way up
check_root_chain "${CNI_BIN}"
for plugin in bridge host-local loopback portmap; do check_root_chain "${CNI_BIN}/${plugin}"; done
RUNC_BIN="$(root_program runc)" || die "runc not found in ${ROOT_PATH}"
if wants 1.6; then
	# "1.6" is the distribution's containerd: any 1.x reads the version = 2
	# config below; a 2.x from apt is not what this flavour is for
	root_program containerd >/dev/null || die "containerd not found in ${ROOT_PATH}"
	root_program ctr >/dev/null || die "ctr not found in ${ROOT_PATH}"
	distro_version="$(containerd --version | awk '{ print $3 }')"
	case "${distro_version}" in
	1.6.*) ;;
	1.*) log "note: flavour 1.6 runs the distribution's containerd ${distro_version}" ;;
	*) die "the distribution's containerd is ${distro_version}, not 1.x: use --version 2.2" ;;
	esac
fi
t_build=0
if wants 2.2; then
	t0="$(now)"
	"${LABS_REPO}/scripts/build-containerd.sh"
	t_build="$(elapsed "${t0}")"
fi

# --- 2. images ---------------------------------------------------------------
# Rebuild only when an input changed: the recipe, pause.c, the busybox binary.
t_img=0
stamp="$(cat "${LABS_REPO}/scripts/containerd/build-images.sh" "${LABS_REPO}/hack/images/pause/pause.c" /bin/busybox | sha256sum | cut -d' ' -f1)"
if [ "$(cat "${IMAGES_DIR}/stamp" 2>/dev/null || true)" != "${stamp}" ] ||
	[ ! -f "${IMAGES_DIR}/pause.tar" ] || [ ! -f "${IMAGES_DIR}/busybox.tar" ] || [ ! -f "${IMAGES_DIR}/images.env" ]; then
	make_root_dir "${IMAGES_DIR}"
	log "building images (pause, busybox) offline"
	t0="$(now)"
	"${LABS_REPO}/scripts/containerd/build-images.sh" "${IMAGES_DIR}"
	echo "${stamp}" >"${IMAGES_DIR}/stamp"
	t_img="$(elapsed "${t0}")"
	log "images built in ${t_img}s"
fi
# shellcheck source=/dev/null
source "${IMAGES_DIR}/images.env"

# --- 3. config ---------------------------------------------------------------
# One template, two syntaxes: config_v2 (containerd 1.x, version = 2) and
# config_v3 (2.x, version = 3) say the same settings; the parts that read
# alike in both are written once below and each syntax puts them in place.

# config_head VERSION CONTAINERD_VERSION: the top, through oom_score.
config_head() {
	cat <<EOF
# Written by scripts/containerd-up.sh; edits are overwritten. containerd $(($1 - 1)).x syntax.
# $2
version = $1
root = "${ROOT_DIR}"
state = "${STATE_DIR}"
temp = "${TMP_DIR}"
oom_score = 0
EOF
}

# config_sockets NOTE: the sockets, debug, metrics and the opt plugin, the
# last line [plugins]'s first entry. NOTE ends the tcp_address comment.
config_sockets() {
	cat <<EOF

[grpc]
  # unix socket only: no tcp_address$1
  address = "${SOCK}"
  # the socket (0660) belongs to the learner who ran sudo: the labs run
  # as that user, never as root (like the docker group: whoever has this
  # socket can run any container, so it is root-equivalent on this host)
  uid = ${LEARNER_UID}
  gid = ${LEARNER_GID}

[ttrpc]
  address = "${SOCK}.ttrpc"

[debug]
  level = "info"

[metrics]
  address = ""

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "${ROOT_DIR}/opt"
EOF
}

# config_streaming: the CRI streaming server (1.x: the CRI plugin; 2.x:
# io.containerd.grpc.v1.cri).
config_streaming() {
	cat <<'EOF'
    # exec/attach/port-forward streams: loopback only, a random free port
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    disable_tcp_service = true
    enable_tls_streaming = false
EOF
}

# config_pods: how pods run (1.x: the CRI plugin; 2.x:
# io.containerd.cri.v1.runtime).
config_pods() {
	cat <<'EOF'
    # no AppArmor profile loading here
    disable_apparmor = true
    # without it every RunPodSandbox fails where we lack CAP_SYS_RESOURCE:
    # runc cannot set the sandbox's oom_score_adj (-998) below our own
    restrict_oom_score_adj = true
    # pod network namespaces under our state dir instead of /run/netns
    netns_mounts_under_state_dir = true
    tolerate_missing_hugetlb_controller = true
    disable_hugetlb_controller = true
    max_container_log_line_size = 16384
EOF
}

# config_runc_root: the end of runc's options.
config_runc_root() {
	cat <<EOF
          # runc's state under ours, not /run/containerd/runc
          Root = "${RUNC_ROOT}"
EOF
}

# containerd 1.x syntax (version = 2)
config_v2() {
	config_head 2 "$(containerd --version)"
	cat <<'EOF'
# snapshotters we never use; fewer plugins, fewer surprises in the log
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]
EOF
	config_sockets " (the old course exposed CRI on 0.0.0.0:8989)"
	cat <<EOF

  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "${PAUSE_IMAGE}"
EOF
	config_streaming
	config_pods
	cat <<EOF

    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
EOF
	config_runc_root
	cat <<EOF

    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "${CNI_BIN}"
      conf_dir = "${CNI_CONF_DIR}"
      max_conf_num = 1

    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = ""
EOF
}

# containerd 2.x syntax (version = 3). The CRI plugin is split in three:
# io.containerd.cri.v1.images (images, the sandbox image),
# io.containerd.cri.v1.runtime (pods, containers, CNI) and
# io.containerd.grpc.v1.cri (the gRPC service, the streaming server).
# The settings are the 1.6 ones above, each in its new home.
config_v3() {
	config_head 3 "$("${CONTAINERD_BIN}" --version)"
	cat <<'EOF'
# plugins we never use; fewer plugins, fewer surprises in the log. NRI would
# listen on /var/run/nri/nri.sock, a fixed host path.
disabled_plugins = ["io.containerd.snapshotter.v1.blockfile", "io.containerd.snapshotter.v1.erofs", "io.containerd.differ.v1.erofs", "io.containerd.mount-handler.v1.erofs", "io.containerd.nri.v1.nri"]
EOF
	config_sockets ""
	cat <<'EOF'

  [plugins."io.containerd.grpc.v1.cri"]
EOF
	config_streaming
	cat <<EOF

  [plugins."io.containerd.cri.v1.images"]
    snapshotter = "overlayfs"
    [plugins."io.containerd.cri.v1.images".pinned_images]
      # 1.6's sandbox_image
      sandbox = "${PAUSE_IMAGE}"
    [plugins."io.containerd.cri.v1.images".registry]
      config_path = ""

  [plugins."io.containerd.cri.v1.runtime"]
EOF
	config_pods
	cat <<EOF
    # no device plugins here: do not watch /etc/cdi and /var/run/cdi
    enable_cdi = false

    [plugins."io.containerd.cri.v1.runtime".containerd]
      default_runtime_name = "runc"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        # the shim built with this containerd, not one found in PATH
        runtime_path = "${CONTAINERD2_BIN_DIR}/containerd-shim-runc-v2"
        snapshotter = "overlayfs"
        [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
          SystemdCgroup = false
          # the distribution's runc
          BinaryName = "${RUNC_BIN}"
EOF
	config_runc_root
	cat <<EOF

    [plugins."io.containerd.cri.v1.runtime".cni]
      bin_dirs = ["${CNI_BIN}"]
      conf_dir = "${CNI_CONF_DIR}"
      max_conf_num = 1
EOF
}

# One bridge network per flavour. No ipMasq (no NAT for pod traffic: pods
# need no internet, images are local); isGateway puts the gateway IP on the
# bridge so the host can reach pod IPs (probes in later labs). Our own
# iptables rules are allow_forward's; the only NAT rules are portmap's, and
# only for pods with host ports.
#
# portmap, chained after the bridge as kind's CNI config and containerd's
# own (its script/setup/install-cni: bridge, then portmap) do, is what makes
# a container's hostPort work: the kubelet puts the pod's ports in the
# sandbox config (PortMappings, pkg/kubelet/kuberuntime/
# kuberuntime_sandbox.go:116-135, v1.36.3), containerd hands them to the
# plugins that declare the portMappings capability, and portmap DNATs
# hostIP:hostPort to the pod. Without it a hostPort is silently ignored, and
# upstream's conformance spec "HostPort validates that there is no conflict
# between pods with same hostPort but different hostIP and protocol"
# (test/e2e/network/hostport.go:63) fails. Its snat option (default true)
# masquerades connections from 127.0.0.1 and hairpin ones, and sets
# route_localnet on our bridge, so that 127.0.0.1:hostPort, which that spec
# calls, reaches the pod (containernetworking/plugins v1.1.1, Debian 12's:
# plugins/meta/portmap/main.go:196-199, portmap.go:77-100 and 242-265).
# Its rules live in the nat table: one CNI-DN-… chain per pod with host
# ports, removed at CNI DEL, entered from shared CNI-HOSTPORT-* chains it
# never removes; containerd-down.sh removes both (remove_hostport in
# scripts/containerd/lib.sh).
conflist() {
	cat <<EOF
{
  "cniVersion": "1.0.0",
  "name": "${CNI_NET}",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "${BRIDGE}",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "${SUBNET}" }]],
        "routes": [{ "dst": "0.0.0.0/0" }],
        "dataDir": "${CNI_IPAM_DIR}"
      }
    },
    {
      "type": "portmap",
      "capabilities": { "portMappings": true }
    }
  ]
}
EOF
}

answers() { timeout 5 "${CTR}" -a "${SOCK}" version >/dev/null 2>&1; }
cri_ok() { timeout 5 "${CTR}" -a "${SOCK}" plugins ls 2>/dev/null | awk '$2 == "cri" && $4 == "ok" { f = 1 } END { exit !f }'; }

# Steps 3-6 for the flavour chosen with use_flavour.
start_flavour() {
	local new_conf new_cni t0 t_start t_import tarball i left path out
	local -a running=()
	make_root_dir "${D}"
	mkdir -p "${CNI_CONF_DIR}"
	new_conf="$(mktemp "${D}/.config.XXXXXX")"
	new_cni="${CNI_CONF_DIR}/10-${CNI_NET}.conflist.tmp"
	# the names stay in variables: a path is never pasted into a command
	CLEANUP_FILES=("${new_conf}" "${new_cni}")
	trap 'rm -f "${CLEANUP_FILES[@]}"' EXIT
	if [ "${FLAVOUR}" = 1.6 ]; then config_v2 >"${new_conf}"; else config_v3 >"${new_conf}"; fi
	conflist >"${new_cni}"

	# --- 4. reuse or (re)start ---------------------------------------------
	mapfile -t running < <(containerd_pids)
	if [ "${#running[@]}" -eq 1 ] && cmp -s "${new_conf}" "${CONF}" &&
		cmp -s "${new_cni}" "${CNI_CONF_DIR}/10-${CNI_NET}.conflist" &&
		answers && cri_ok; then
		log "[${FLAVOUR}] containerd already running (pid ${running[0]}) with this config; reusing it"
		rm -f "${new_cni}" "${new_conf}"
		t_start=0
	else
		if [ "${#running[@]}" -gt 0 ] || [ -e "${PIDFILE}" ] || [ -e "${SOCK}" ] || [ -n "$(our_mounts)" ] ||
			[ -d "${STATE_DIR}" ] || { bridge_is_ours && [ -e "/sys/class/net/${BRIDGE}" ]; }; then
			log "[${FLAVOUR}] cleaning up a previous run (pid file, socket, state or processes left)"
			cleanup_all
			left="$(leftovers)"
			[ -z "${left}" ] || die "could not clean the previous run of containerd ${FLAVOUR}; still there:
${left}"
		fi
		# the CNI bridge plugin would take over a link of that name someone
		# else made, and down would delete it: refuse, and record the one we
		# make so that down deletes only ours
		if [ -e "/sys/class/net/${BRIDGE}" ]; then
			die "a network link named ${BRIDGE} exists and was not made by containerd-up.sh; remove it or choose another prefix with LABS_CNI_BRIDGE (now ${LABS_CNI_BRIDGE:-labs})"
		fi
		echo "${BRIDGE}" >"${BRIDGE_MARK}"
		# a conflist of an older bridge name (LABS_CNI_BRIDGE changed) would
		# win (max_conf_num = 1 takes the first by name)
		find "${CNI_CONF_DIR}" -maxdepth 1 -name '*.conflist' -delete
		mkdir -p "${CNI_IPAM_DIR}" "${TMP_DIR}"
		mv "${new_cni}" "${CNI_CONF_DIR}/10-${CNI_NET}.conflist"
		mv "${new_conf}" "${CONF}"
		mark_host_paths

		log "[${FLAVOUR}] starting containerd $("${CONTAINERD_BIN}" --version | awk '{ print $3 }') on ${SOCK}"
		t0="$(now)"
		# containerd looks helpers up by name in PATH: ours first
		path="${PATH}"
		[ "${FLAVOUR}" = 1.6 ] || path="${CONTAINERD2_BIN_DIR}:${PATH}"
		# a new log per start, the last one kept as containerd.log.1
		rotate_log "${LOGFILE}"
		# own session: it must outlive this script and the terminal/CI step;
		# without our lock (fd 8), or it would hold it as long as it runs
		PATH="${path}" setsid "${CONTAINERD_BIN}" --config "${CONF}" >>"${LOGFILE}" 2>&1 </dev/null 8>&- &
		echo $! >"${PIDFILE}"
		for ((i = 0; i < 300; i++)); do
			if ! kill -0 "$(cat "${PIDFILE}")" 2>/dev/null; then
				tail -n 30 "${LOGFILE}" >&2
				die "containerd ${FLAVOUR} exited during start-up; log: ${LOGFILE}"
			fi
			if [ -S "${SOCK}" ] && answers && cri_ok; then break; fi
			sleep 0.1
		done
		if ! { answers && cri_ok; }; then
			tail -n 30 "${LOGFILE}" >&2
			die "containerd ${FLAVOUR} did not become ready in 30s; log: ${LOGFILE}"
		fi
		t_start="$(elapsed "${t0}")"
		log "[${FLAVOUR}] containerd ready in ${t_start}s (pid $(cat "${PIDFILE}"))"
	fi
	trap - EXIT
	# pod traffic on our bridge passes whatever Docker did to FORWARD
	allow_forward

	# The pod log folder belongs to the learner, whose kubelet (a lab) makes
	# a folder per pod and container in it; setgid, so each file containerd
	# (root) writes there (0640) gets the learner's group: the learner reads
	# logs without sudo, and can remove them.
	# (install -d: created with its owner and mode in one step; chown -h:
	# never through a symlink)
	[ -d "${POD_LOG_DIR}" ] || install -d -m 2750 -o "${LEARNER_UID}" -g "${LEARNER_GID}" "${POD_LOG_DIR}"
	chown -h "${LEARNER_UID}:${LEARNER_GID}" "${POD_LOG_DIR}"
	chmod 2750 "${POD_LOG_DIR}"

	# --- 5. images into the CRI's namespace --------------------------------
	t0="$(now)"
	for tarball in "${IMAGES_DIR}/pause.tar" "${IMAGES_DIR}/busybox.tar"; do
		# ctr 2.x repeats the daemon's deprecation warnings (cgroup v1) on
		# every call: show its output only when the import fails
		if ! out="$("${CTR}" -a "${SOCK}" -n k8s.io images import "${tarball}" 2>&1)"; then
			printf '%s\n' "${out}" >&2
			die "importing ${tarball} into containerd ${FLAVOUR} failed; log: ${LOGFILE}"
		fi
	done
	t_import="$(elapsed "${t0}")"

	# --- 6. env file (and crictl's config) ---------------------------------
	cat >"${CRICTL_YAML}" <<EOF
runtime-endpoint: unix://${SOCK}
image-endpoint: unix://${SOCK}
timeout: 10
EOF
	cat >"${ENVFILE}.tmp" <<EOF
CONTAINERD_FLAVOUR=${FLAVOUR}
CONTAINERD_SOCK=${SOCK}
CONTAINERD_ENDPOINT=unix://${SOCK}
CONTAINERD_PID=$(cat "${PIDFILE}")
CONTAINERD_LOG=${LOGFILE}
CONTAINERD_VERSION=$("${CONTAINERD_BIN}" --version | awk '{ print $3 }')
CONTAINERD_BIN=$(command -v "${CONTAINERD_BIN}")
CTR=$(command -v "${CTR}")
PAUSE_IMAGE=${PAUSE_IMAGE}
BUSYBOX_IMAGE=${BUSYBOX_IMAGE}
POD_LOG_DIR=${POD_LOG_DIR}
CNI_BRIDGE=${BRIDGE}
CNI_SUBNET=${SUBNET}
CRI_CONFIG_FILE=${CRICTL_YAML}
EOF
	mv "${ENVFILE}.tmp" "${ENVFILE}"
	log "[${FLAVOUR}] times: start ${t_start}s, import ${t_import}s"
}

for f in "${flavours[@]}"; do
	use_flavour "${f}"
	start_flavour
done

# The labs' default: the first flavour named. Its crictl.yaml is copied
# too, and the copy of the env names that copy.
use_flavour "${flavours[0]}"
sed "s#^CRI_CONFIG_FILE=.*#CRI_CONFIG_FILE=${DEFAULT_CRICTL}#" "${ENVFILE}" >"${DEFAULT_ENVFILE}.tmp"
cp "${CRICTL_YAML}" "${DEFAULT_CRICTL}.tmp"
mv "${DEFAULT_CRICTL}.tmp" "${DEFAULT_CRICTL}"
mv "${DEFAULT_ENVFILE}.tmp" "${DEFAULT_ENVFILE}"

log "times: apt ${t_apt}s, containerd ${CONTAINERD2_VERSION} build check/build ${t_build}s, images ${t_img}s"
for f in "${flavours[@]}"; do
	use_flavour "${f}"
	echo "# containerd ${f}: ${ENVFILE}"
	cat "${ENVFILE}"
done
echo "# the labs use containerd ${flavours[0]}: ${DEFAULT_ENVFILE} (load it with: set -a; . ${DEFAULT_ENVFILE}; set +a)"

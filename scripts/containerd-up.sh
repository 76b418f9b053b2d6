#!/usr/bin/env bash
# Start a private containerd for the real-runtime labs (11-containerd and
# later) on a unix socket in the state folder, with offline images.
#
#   sudo scripts/containerd-up.sh      # then: go run ./labs/11-containerd
#   sudo scripts/containerd-down.sh    # stops it and removes every trace
#
# What it does (idempotent; a second run reuses a healthy instance):
#   1. installs containerd, runc, CNI plugins, busybox-static, gcc from the
#      distribution (apt) if missing;
#   2. builds the pause and busybox images offline (scripts/containerd/build-images.sh);
#   3. writes config.toml and a CNI bridge conflist under
#      ${LABS_STATE_DIR:-<repo>/.labs}/containerd/;
#   4. cleans up a stale previous run (killed containerd, left-over shims,
#      mounts, bridge) and starts containerd, waits until its CRI answers;
#   5. imports the images into the k8s.io namespace (the one the CRI uses);
#   6. writes and prints .labs/containerd/env (CONTAINERD_SOCK=..., images).
#
# Environment: LABS_STATE_DIR (state folder), LABS_CNI_BRIDGE (default labs0),
# LABS_CNI_SUBNET (default 10.231.0.0/24), LABS_NO_INSTALL=1 (never run apt).
set -euo pipefail
# say where it stopped: set -e alone exits silently
trap 'echo "containerd-up: line ${LINENO}: \"${BASH_COMMAND}\" failed" >&2' ERR

# shellcheck source=scripts/containerd/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/containerd/lib.sh"

need_root
check_paths
if [ ! -d "${LABS_STATE}" ]; then
	# the state folder is shared with labs that run as the user: under sudo,
	# give it to the user (our containerd/ folder inside stays root's)
	mkdir -p "${LABS_STATE}"
	chmod 0700 "${LABS_STATE}"
	chown "${SUDO_UID:-0}:${SUDO_GID:-0}" "${LABS_STATE}"
fi
mkdir -p "${D}"
# the socket is root's (0660); keep its folder private too
chmod 0700 "${D}"

# --- 1. packages -------------------------------------------------------------
t_apt=0
find_cni_bin() {
	local d
	for d in /usr/lib/cni /opt/cni/bin /usr/libexec/cni; do
		if [ -x "${d}/bridge" ] && [ -x "${d}/host-local" ] && [ -x "${d}/loopback" ]; then
			echo "${d}"
			return 0
		fi
	done
	return 1
}
missing=()
command -v containerd >/dev/null || missing+=(containerd)
command -v ctr >/dev/null || missing+=(containerd)
command -v runc >/dev/null || missing+=(runc)
find_cni_bin >/dev/null || missing+=(containernetworking-plugins)
[ "$(dpkg-query -W -f='${Status}' busybox-static 2>/dev/null || true)" = "install ok installed" ] || missing+=(busybox-static)
command -v gcc >/dev/null || missing+=(gcc)
# gcc -static needs libc.a
[ -n "$(find /usr/lib /usr/lib64 -name libc.a -print -quit 2>/dev/null)" ] || missing+=(libc6-dev)
if [ "${#missing[@]}" -gt 0 ]; then
	mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
	if [ "${LABS_NO_INSTALL:-0}" = 1 ] || ! command -v apt-get >/dev/null; then
		die "missing: ${missing[*]}; install them with your package manager (Debian/Ubuntu: apt-get install -y --no-install-recommends ${missing[*]})"
	fi
	log "installing ${missing[*]} (apt)"
	t0="$(now)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	t_apt="$(elapsed "${t0}")"
	log "installed in ${t_apt}s"
fi
CNI_BIN="$(find_cni_bin)" || die "CNI plugins (bridge, host-local, loopback) not found"

# --- 2. images ---------------------------------------------------------------
# Rebuild only when an input changed: the recipe, pause.c, the busybox binary.
t_img=0
stamp="$(cat "${LABS_REPO}/scripts/containerd/build-images.sh" "${LABS_REPO}/hack/images/pause/pause.c" /bin/busybox | sha256sum | cut -d' ' -f1)"
if [ "$(cat "${IMAGES_DIR}/stamp" 2>/dev/null || true)" != "${stamp}" ] ||
	[ ! -f "${IMAGES_DIR}/pause.tar" ] || [ ! -f "${IMAGES_DIR}/busybox.tar" ] || [ ! -f "${IMAGES_DIR}/images.env" ]; then
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
mkdir -p "${CNI_CONF_DIR}" "${CNI_IPAM_DIR}" "${POD_LOG_DIR}"
new_conf="$(mktemp "${D}/.config.XXXXXX")"
trap 'rm -f "${new_conf}"' EXIT
cat >"${new_conf}" <<EOF
# Written by scripts/containerd-up.sh; edits are overwritten. containerd 1.6 syntax.
version = 2
root = "${ROOT_DIR}"
state = "${STATE_DIR}"
temp = "${TMP_DIR}"
oom_score = 0
# snapshotters we never use; fewer plugins, fewer surprises in the log
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  # unix socket only: no tcp_address (the old course exposed CRI on 0.0.0.0:8989)
  address = "${SOCK}"
  uid = 0
  gid = 0

[ttrpc]
  address = "${SOCK}.ttrpc"

[debug]
  level = "info"

[metrics]
  address = ""

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "${ROOT_DIR}/opt"

  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "${PAUSE_IMAGE}"
    # exec/attach/port-forward streams: loopback only, a random free port
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    disable_tcp_service = true
    enable_tls_streaming = false
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

    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          # runc's state under ours, not /run/containerd/runc
          Root = "${RUNC_ROOT}"

    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "${CNI_BIN}"
      conf_dir = "${CNI_CONF_DIR}"
      max_conf_num = 1

    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = ""
EOF
# One bridge network of our own. No ipMasq (no iptables rules to clean up,
# pods need no internet: images are local); isGateway puts the gateway IP on
# the bridge so the host can reach pod IPs (probes in later labs).
cat >"${CNI_CONF_DIR}/10-${CNI_NET}.conflist.tmp" <<EOF
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
    }
  ]
}
EOF

# --- 4. reuse or (re)start -----------------------------------------------------
answers() { timeout 5 ctr -a "${SOCK}" version >/dev/null 2>&1; }
cri_ok() { timeout 5 ctr -a "${SOCK}" plugins ls 2>/dev/null | awk '$2 == "cri" && $4 == "ok" { f = 1 } END { exit !f }'; }

running=()
mapfile -t running < <(containerd_pids)
if [ "${#running[@]}" -eq 1 ] && cmp -s "${new_conf}" "${CONF}" &&
	cmp -s "${CNI_CONF_DIR}/10-${CNI_NET}.conflist.tmp" "${CNI_CONF_DIR}/10-${CNI_NET}.conflist" &&
	answers && cri_ok; then
	log "containerd already running (pid ${running[0]}) with this config; reusing it"
	rm -f "${CNI_CONF_DIR}/10-${CNI_NET}.conflist.tmp"
	t_start=0
else
	if [ "${#running[@]}" -gt 0 ] || [ -e "${PIDFILE}" ] || [ -e "${SOCK}" ] || [ -n "$(our_mounts)" ] ||
		[ -d "${STATE_DIR}" ] || [ -e "/sys/class/net/${BRIDGE}" ]; then
		log "cleaning up a previous run (pid file, socket, state or processes left)"
		cleanup_all
		left="$(leftovers)"
		[ -z "${left}" ] || die "could not clean the previous run; still there:
${left}"
	fi
	mkdir -p "${CNI_CONF_DIR}" "${CNI_IPAM_DIR}" "${POD_LOG_DIR}" "${TMP_DIR}"
	mv "${CNI_CONF_DIR}/10-${CNI_NET}.conflist.tmp" "${CNI_CONF_DIR}/10-${CNI_NET}.conflist"
	mv "${new_conf}" "${CONF}"
	mark_host_paths

	log "starting containerd ($(containerd --version | awk '{ print $3 }')) on ${SOCK}"
	t0="$(now)"
	# own session: it must outlive this script and the terminal/CI step
	setsid containerd --config "${CONF}" >>"${LOGFILE}" 2>&1 </dev/null &
	echo $! >"${PIDFILE}"
	for ((i = 0; i < 300; i++)); do
		if ! kill -0 "$(cat "${PIDFILE}")" 2>/dev/null; then
			tail -n 30 "${LOGFILE}" >&2
			die "containerd exited during start-up; log: ${LOGFILE}"
		fi
		if [ -S "${SOCK}" ] && answers && cri_ok; then break; fi
		sleep 0.1
	done
	if ! { answers && cri_ok; }; then
		tail -n 30 "${LOGFILE}" >&2
		die "containerd did not become ready in 30s; log: ${LOGFILE}"
	fi
	t_start="$(elapsed "${t0}")"
	log "containerd ready in ${t_start}s (pid $(cat "${PIDFILE}"))"
fi

# --- 5. images into the CRI's namespace ----------------------------------------
t0="$(now)"
for tarball in "${IMAGES_DIR}/pause.tar" "${IMAGES_DIR}/busybox.tar"; do
	ctr -a "${SOCK}" -n k8s.io images import "${tarball}" >/dev/null ||
		die "importing ${tarball} failed; log: ${LOGFILE}"
done
t_import="$(elapsed "${t0}")"

# --- 6. env file (and crictl's config) ----------------------------------------
cat >"${D}/crictl.yaml" <<EOF
runtime-endpoint: unix://${SOCK}
image-endpoint: unix://${SOCK}
timeout: 10
EOF
cat >"${ENVFILE}.tmp" <<EOF
CONTAINERD_SOCK=${SOCK}
CONTAINERD_ENDPOINT=unix://${SOCK}
CONTAINERD_PID=$(cat "${PIDFILE}")
CONTAINERD_LOG=${LOGFILE}
CONTAINERD_VERSION=$(containerd --version | awk '{ print $3 }')
PAUSE_IMAGE=${PAUSE_IMAGE}
BUSYBOX_IMAGE=${BUSYBOX_IMAGE}
POD_LOG_DIR=${POD_LOG_DIR}
CNI_BRIDGE=${BRIDGE}
CNI_SUBNET=${SUBNET}
CRI_CONFIG_FILE=${D}/crictl.yaml
EOF
mv "${ENVFILE}.tmp" "${ENVFILE}"

log "times: apt ${t_apt}s, images ${t_img}s, start ${t_start}s, import ${t_import}s"
echo "# ${ENVFILE} (load it with: set -a; . ${ENVFILE}; set +a)"
cat "${ENVFILE}"

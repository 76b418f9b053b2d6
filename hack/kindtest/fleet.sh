#!/usr/bin/env bash
# Lab 18's fleet mode in shards, for real, on one machine: the shards run as
# the StatefulSet of labs/18-mykubelet/shards in a kind cluster (the
# management cluster), their nodes register and stay Ready in lab 00's
# control plane (the target), and a shard whose pod is killed comes back and
# its nodes with it — as kubemark runs hollow nodes.
#
# As root (kind needs Docker); Docker must be running (make kind-test
# starts one if not). Steps, each timed, with the machine's load:
#   1. kind create cluster --name kubelet-labs-fleet (yaml/kind-config.yaml,
#      with the containerd patch hack/kindtest/run.sh explains on a machine
#      whose root lacks capabilities), kind's DaemonSets pinned to kind's
#      node as docs/vm.md §3 says;
#   2. lab 00 on the kind bridge's address (--apiserver-address: the only
#      address its apiserver listens on, TLS and client certificates as
#      ever), its own ports and a state folder of its own;
#   3. scripts/build-fleet-image.sh, kind load image-archive;
#   4. the namespace, the Secret target-kubeconfig (lab 00's admin
#      kubeconfig, which names the bridge's address) and fleet.yaml, cut to
#      FLEET_NODES nodes per shard and smaller requests: its 3 × 1,000 nodes
#      and 3 × 500m CPU do not fit a 2-core machine beside kind's own pods;
#   5. every node Ready in lab 00;
#   6. shard 1's pod deleted: the StatefulSet makes it again, the new pod
#      takes its nodes back, their Leases are renewed after the old pod was
#      gone, and they are Ready;
# and on exit, also on failure or Ctrl-C, lab 00 stopped, the kind cluster
# deleted (kind's network too if this made it and nothing else uses it) and
# the state folder removed. Every wait has a deadline.
#
#   hack/kindtest/fleet.sh
#   FLEET_NODES=50 hack/kindtest/fleet.sh      # nodes per shard (3 shards)
#   FLEET_KEEP=1 hack/kindtest/fleet.sh        # leave it all up, say how to clean
set -euo pipefail
trap 'echo "fleet-test: line ${LINENO}: \"${BASH_COMMAND}\" failed" >&2' ERR

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/../.." && pwd)"
# shellcheck source=scripts/containerd/lib.sh
source "${repo}/scripts/containerd/lib.sh"

CLUSTER=kubelet-labs-fleet
NS=kubelet-labs-fleet
SHARDS=3 # fleet.yaml's replicas and SHARDS
NODES="${FLEET_NODES:-10}"
# lab 00's ports: not the defaults, so a learner's lab 00 may run beside it
APISERVER_PORT="${FLEET_APISERVER_PORT:-16443}"
ETCD_PORT="${FLEET_ETCD_PORT:-12379}"
ETCD_PEER_PORT="${FLEET_ETCD_PEER_PORT:-12380}"
KCM_PORT="${FLEET_CONTROLLER_MANAGER_PORT:-20257}"
LABEL=kubelet-labs.dev/lab-node=18-mykubelet

if ! [[ "${NODES}" =~ ^[1-9][0-9]{0,3}$ ]] || [ "${NODES}" -gt 3000 ]; then
	die "FLEET_NODES=${NODES}: want 1 … 3000 nodes per shard"
fi
need_root "Docker, kind and lab 00 on the bridge need it"
docker_bin="$(root_program docker)" || die "no docker (apt-get install docker.io)"
kind_bin="${LABS_ROOT}/kind/bin/kind" # built by scripts/kind/build-go.sh
[ -x "${kind_bin}" ] || die "no ${kind_bin}: scripts/kind/build-go.sh builds it"
"${docker_bin}" info >/dev/null 2>&1 || die "Docker is not running: start it (make kind-test starts one for its run) and run this again"
go_bin="$(find_go)"
PATH="$(dirname "${go_bin}"):${PATH}"
export PATH
kubectl_bin="${repo}/.labs/bin/kubectl"
[ -x "${kubectl_bin}" ] || kubectl_bin="${LABS_ROOT}/kind/bin/kubectl"
[ -x "${kubectl_bin}" ] || die "no kubectl: go run ./labs/00-cluster --build-only builds it into .labs/bin"

work="$(mktemp -d /tmp/kindtest-fleet.XXXXXX)"
state="${work}/state"
mgmt="${work}/management.kubeconfig"
target="${state}/admin.kubeconfig"
lab00_pid=""
network_before=""
report=()
step_start=""
step() {
	step_start="$(now)"
	log "fleet-test: $*"
}
load() { cut -d' ' -f1-3 /proc/loadavg; }
took() { report+=("$(printf '%-62s %8s s   load %s' "$1" "$(elapsed "${step_start}")" "$(load)")"); }
mk() { "${kubectl_bin}" --kubeconfig "${mgmt}" --request-timeout=30s "$@"; }
tk() { "${kubectl_bin}" --kubeconfig "${target}" --request-timeout=30s "$@"; }
# until SECONDS WHAT COMMAND...: run COMMAND every second until it succeeds
until_ok() {
	local secs="$1" what="$2"
	shift 2
	local deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		[ "${SECONDS}" -lt "${deadline}" ] || die "${what}: not after ${secs}s"
		sleep 1
	done
}

diagnose() {
	echo "--- fleet-test failed; what there is:" >&2
	[ -f "${mgmt}" ] && mk get namespace "${NS}" >/dev/null 2>&1 && {
		mk -n "${NS}" get statefulset,pods -o wide
		mk -n "${NS}" describe pods | tail -n 40
		for i in $(seq 0 $((SHARDS - 1))); do
			echo "--- log of mykubelet-fleet-${i} (last 15 lines)"
			mk -n "${NS}" logs "mykubelet-fleet-${i}" --tail=15
		done
	} >&2 2>&1
	[ -f "${target}" ] && tk get nodes -l "${LABEL}" >&2 2>&1
	[ -f "${work}/lab00.log" ] && { echo "--- lab 00 (last 20 lines)"; tail -n 20 "${work}/lab00.log"; } >&2
}

finish() {
	local rc=$?
	set +e
	trap - ERR
	[ "${rc}" -eq 0 ] || diagnose
	if [ "${FLEET_KEEP:-}" = 1 ]; then
		log "fleet-test: FLEET_KEEP=1: left up: lab 00 (pid ${lab00_pid}, state ${state}), kind cluster ${CLUSTER} (kubeconfig ${mgmt}); clean with: kill ${lab00_pid}; ${kind_bin} delete cluster --name ${CLUSTER}; rm -rf ${work}"
	else
		if [ -n "${lab00_pid}" ]; then
			# SIGTERM, which lab 00 takes as Ctrl-C: a job started with &
			# in a script has SIGINT ignored
			step "stopping lab 00 (SIGTERM)"
			kill -TERM "${lab00_pid}" 2>/dev/null
			local deadline=$((SECONDS + 60))
			while kill -0 "${lab00_pid}" 2>/dev/null && [ "${SECONDS}" -lt "${deadline}" ]; do sleep 0.5; done
			# its children die with it (Pdeathsig)
			kill -KILL "${lab00_pid}" 2>/dev/null && {
				echo "fleet-test: lab 00 did not stop in 60s: killed" >&2
				rc=1
			}
			wait "${lab00_pid}" 2>/dev/null
			took "lab 00 stopped"
		fi
		step "kind delete cluster --name ${CLUSTER}"
		timeout 5m "${kind_bin}" delete cluster --name "${CLUSTER}" && took "kind delete cluster"
		# kind leaves its network by design; this made it, so it goes —
		# unless another cluster is on it now
		if [ -z "${network_before}" ] &&
			[ "$("${docker_bin}" network inspect kind -f '{{len .Containers}}' 2>/dev/null)" = 0 ]; then
			"${docker_bin}" network rm kind >/dev/null
		fi
		local left
		left="$("${docker_bin}" ps -a -q --filter "label=io.x-k8s.kind.cluster=${CLUSTER}")"
		[ -z "${left}" ] || {
			echo "fleet-test: containers of ${CLUSTER} left: ${left}" >&2
			rc=1
		}
		rm -rf -- "${work}"
	fi
	printf '%s\n' "${report[@]}"
	if [ "${rc}" -eq 0 ]; then echo "fleet-test: PASS"; else echo "fleet-test: FAIL (${rc})"; fi
	exit "${rc}"
}
trap finish EXIT
trap 'exit 130' INT TERM

log "fleet-test: load at start: $(load); ${SHARDS} shards × ${NODES} nodes"

# 1. The management cluster, as run.sh makes its own (it says why the patch)
# shellcheck source=hack/kindtest/kind.sh
source "${here}/kind.sh"
docker_runs_in_bounds "${docker_bin}" ||
	die "root's capability bounding set is ${bounding}: kind's privileged node needs Docker with runc-in-bounds as its default runtime (make kind-test starts such a dockerd when none runs)"
config="$(kind_config "${work}")"
"${docker_bin}" network inspect kind >/dev/null 2>&1 && network_before=yes
if "${kind_bin}" get clusters 2>/dev/null | grep -qxF "${CLUSTER}"; then
	log "fleet-test: a cluster ${CLUSTER} is left from an earlier run: deleting it"
	timeout 5m "${kind_bin}" delete cluster --name "${CLUSTER}"
fi
step "kind create cluster --name ${CLUSTER} (the management cluster)"
timeout 10m "${kind_bin}" create cluster --name "${CLUSTER}" --config "${config}" --kubeconfig "${mgmt}" --wait 5m
pin_daemonsets "${kubectl_bin}" "${mgmt}"
took "kind create cluster, to the node Ready"

# 2. The target: lab 00 on the kind bridge's address
bridge="$("${docker_bin}" network inspect kind -f '{{range .IPAM.Config}}{{println .Gateway}}{{end}}' | grep -m1 -F .)" ||
	die "kind's network has no IPv4 gateway: docker network inspect kind"
step "lab 00 on the kind bridge ${bridge}:${APISERVER_PORT}"
mkdir -m 0700 "${state}"
# a state folder of its own (marked as the labs mark theirs) that shares
# the repository's built binaries, as the labs' tests do; with none there
# yet, lab 00 builds them into it (minutes)
touch "${state}/.kubelet-labs-state"
[ -x "${repo}/.labs/bin/kube-apiserver" ] && ln -s "${repo}/.labs/bin" "${state}/bin"
(cd "${repo}" && go build -o "${work}/lab00" ./labs/00-cluster)
LABS_STATE_DIR="${state}" "${work}/lab00" --fresh --apiserver-address "${bridge}" \
	--apiserver-port "${APISERVER_PORT}" --etcd-port "${ETCD_PORT}" --etcd-peer-port "${ETCD_PEER_PORT}" \
	--controller-manager-port "${KCM_PORT}" >"${work}/lab00.log" 2>&1 &
lab00_pid=$!
deadline=$((SECONDS + 600)) # 10 min: it may build the binaries first
until grep -qs "Press Ctrl-C to stop." "${work}/lab00.log"; do
	kill -0 "${lab00_pid}" 2>/dev/null || die "lab 00 exited: $(tail -n 5 "${work}/lab00.log")"
	[ "${SECONDS}" -lt "${deadline}" ] || die "lab 00 not ready after 600s"
	sleep 1
done
grep -F "apiserver  " "${work}/lab00.log" >&2
grep -q "server: https://${bridge}:${APISERVER_PORT}" "${target}" || die "lab 00's admin kubeconfig does not name https://${bridge}:${APISERVER_PORT}"
took "lab 00 ready on the bridge"

# 3. The image, offline
step "scripts/build-fleet-image.sh; kind load image-archive"
LABS_STATE_DIR="${state}" timeout 10m "${repo}/scripts/build-fleet-image.sh" "${work}/mykubelet.tar"
timeout 5m "${kind_bin}" load image-archive "${work}/mykubelet.tar" --name "${CLUSTER}"
took "fleet image built and loaded"

# 4. The Secret and the StatefulSet, cut down
step "the StatefulSet: ${SHARDS} shards × ${NODES} nodes"
mk create namespace "${NS}" >/dev/null
mk -n "${NS}" create secret generic target-kubeconfig --from-file=kubeconfig="${target}" >/dev/null
sed -e "s/--nodes=1000\$/--nodes=${NODES}/" \
	-e 's/cpu: 500m$/cpu: 100m/' -e 's/memory: 1Gi$/memory: 128Mi/' -e 's/memory: 2Gi$/memory: 512Mi/' \
	-e 's/--memory-limit=1800Mi/--memory-limit=400Mi/' \
	"${repo}/labs/18-mykubelet/shards/fleet.yaml" >"${work}/fleet.yaml"
for want in "--nodes=${NODES}" "cpu: 100m" "memory: 128Mi" "memory: 512Mi" "--memory-limit=400Mi" "replicas: ${SHARDS}" "value: \"${SHARDS}\""; do
	grep -qF -- "${want}" "${work}/fleet.yaml" || die "fleet.yaml changed: cutting it down gave no \"${want}\""
done
mk apply -f "${work}/fleet.yaml"
total=$((SHARDS * NODES))

# 5. Every node Ready in lab 00
ready_nodes() {
	tk get nodes -l "${LABEL}" -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
		grep -c '^True$'
}
all_ready() { [ "$(ready_nodes)" -eq "${total}" ]; }
until_ok 300 "${total} fleet nodes Ready in lab 00" all_ready
took "namespace, Secret, apply -> ${total} nodes Ready in lab 00"
mk -n "${NS}" get pods -o wide
tk get nodes -l "${LABEL}" | sed -n '1,3p;$p'

# 6. A shard's pod killed
victim=mykubelet-fleet-1
first=$((1 * NODES))
old_uid="$(mk -n "${NS}" get pod "${victim}" -o jsonpath='{.metadata.uid}')"
# the times below all count from the delete
step "kubectl delete pod ${victim} (shard 1: nodes ${first} … $((first + NODES - 1)))"
mk -n "${NS}" delete pod "${victim}" --wait=true --timeout=2m
gone="$(now)" # the old pod's containers have stopped: a renewal after this is the new pod's
took "delete -> the old pod gone"
new_pod() {
	local uid
	uid="$(mk -n "${NS}" get pod "${victim}" -o jsonpath='{.metadata.uid}')" && [ -n "${uid}" ] && [ "${uid}" != "${old_uid}" ] &&
		[ "$(mk -n "${NS}" get pod "${victim}" -o jsonpath='{.status.phase}')" = Running ]
}
until_ok 180 "a new ${victim} Running" new_pod
took "delete -> a new ${victim} Running"
shard_ready() { mk -n "${NS}" logs "${victim}" | grep -q "nodes Ready with leases"; }
until_ok 180 "the new ${victim} saying its nodes are Ready" shard_ready
mk -n "${NS}" logs "${victim}" | grep -E "^(fleet|ready) " >&2
took "delete -> it says: ${NODES} nodes Ready with leases"
names=()
for n in $(seq "${first}" $((first + NODES - 1))); do names+=("$(printf 'mykubelet-%04d' "${n}")"); done
renewed() {
	local name t
	for name in "${names[@]}"; do
		t="$(tk -n kube-node-lease get lease "${name}" -o jsonpath='{.spec.renewTime}')" || return 1
		awk -v a="$(date -d "${t}" +%s.%N)" -v b="${gone}" 'BEGIN { exit !(a > b) }' || return 1
	done
}
until_ok 120 "the Leases of ${victim}'s nodes renewed after the old pod was gone" renewed
until_ok 120 "${total} fleet nodes Ready in lab 00 after the restart" all_ready
took "delete -> their ${NODES} Leases renewed, ${total} nodes Ready"
tk -n kube-node-lease get lease "${names[0]}" "${names[-1]}" -o custom-columns=LEASE:.metadata.name,HOLDER:.spec.holderIdentity,RENEWED:.spec.renewTime
log "fleet-test: load at the end: $(load)"

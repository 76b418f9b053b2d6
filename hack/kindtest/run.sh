#!/usr/bin/env bash
# make kind-test: the labs against a kind cluster, proven on this machine.
#
# As root (like CI): Docker started if it is not running (and stopped
# again), the kind node image built or reused (scripts/kind/build-image.sh),
# a kind cluster created from yaml/kind-config.yaml as docs/vm.md §3 says,
# the READMEs of the labs that take a cluster run against it as the learner
# with the README runner (internal/readmerun, LABS_README_KUBECONFIG), and
# the cluster deleted — then nothing of it may be left: no container,
# volume or network of kind's, no process of Docker's if it was not running
# before. Each step is timed.
#
#   hack/kindtest/run.sh                 # labs 01-05, 08-10, 11 (starts containerd), 14, 18
#   KINDTEST_LABS=03,04 hack/kindtest/run.sh
#   KINDTEST_KEEP=1 hack/kindtest/run.sh # leave the cluster up afterwards
set -euo pipefail
trap 'echo "kind-test: line ${LINENO}: \"${BASH_COMMAND}\" failed" >&2' ERR

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/../.." && pwd)"
# shellcheck source=scripts/containerd/lib.sh
source "${repo}/scripts/containerd/lib.sh"

CLUSTER=kubelet-labs-kindtest
LABS="${KINDTEST_LABS:-01,02,03,04,05,08,09,10,11,14,18}"

need_root "Docker and kind need it"
docker_bin="$(root_program docker)" || die "no docker (apt-get install docker.io)"
kind_bin="${LABS_ROOT}/kind/bin/kind" # built by scripts/kind/build-go.sh

work="$(mktemp -d /tmp/kindtest.XXXXXX)"
dockerd_pid=""
network_before=""
containerd_before=false
report=()
step_start=""
step() {
	step_start="$(now)"
	log "kind-test: $*"
}
took() { report+=("$(printf '%-58s %8s s' "$1" "$(elapsed "${step_start}")")"); }

finish() {
	local rc=$?
	set +e
	if [ "${KINDTEST_KEEP:-}" != 1 ] && [ -x "${kind_bin}" ]; then
		step "kind delete cluster --name ${CLUSTER}"
		"${kind_bin}" delete cluster --name "${CLUSTER}" && took "kind delete cluster"
		# kind leaves its network by design; this test made it, so it goes
		if [ -z "${network_before}" ] && "${docker_bin}" network inspect kind >/dev/null 2>&1; then
			"${docker_bin}" network rm kind >/dev/null
		fi
		local left
		left="$("${docker_bin}" ps -a -q --filter "label=io.x-k8s.kind.cluster=${CLUSTER}")"
		[ -z "${left}" ] || {
			echo "kind-test: containers of ${CLUSTER} left: ${left}" >&2
			rc=1
		}
		left="$("${docker_bin}" volume ls -q --filter dangling=true)"
		[ -z "${left}" ] || {
			echo "kind-test: volumes left: ${left}" >&2
			rc=1
		}
	fi
	if [ "${containerd_before}" = false ] && [ -f "${TOP}/env" ]; then
		"${repo}/scripts/containerd-down.sh" >/dev/null || rc=1
	fi
	if [ -n "${dockerd_pid}" ]; then
		kill "${dockerd_pid}" 2>/dev/null
		wait "${dockerd_pid}" 2>/dev/null
	fi
	rm -rf -- "${work}"
	printf '%s\n' "${report[@]}"
	if [ "${rc}" -eq 0 ]; then echo "kind-test: PASS"; else echo "kind-test: FAIL (${rc})"; fi
	exit "${rc}"
}
trap finish EXIT

# shellcheck source=hack/kindtest/kind.sh
source "${here}/kind.sh"
config="$(kind_config "${work}")"
dockerd_args=()
if lacks_caps; then
	log "kind-test: root's capability bounding set is ${bounding}, short of one: Docker gets runc-in-bounds, the node's containerd restrict_oom_score_adj"
	install -m 0755 "${here}/runc-in-bounds.sh" "${work}/runc-in-bounds"
	dockerd_args=(--add-runtime "in-bounds=${work}/runc-in-bounds" --default-runtime in-bounds)
fi

[ -f "${TOP}/env" ] && containerd_before=true
if ! "${docker_bin}" info >/dev/null 2>&1; then
	step "starting dockerd (it was not running; stopped at the end)"
	dockerd_bin="$(root_program dockerd)" || die "no dockerd (apt-get install docker.io)"
	"${dockerd_bin}" "${dockerd_args[@]}" >"${work}/dockerd.log" 2>&1 &
	dockerd_pid=$!
	for _ in $(seq 1 60); do "${docker_bin}" info >/dev/null 2>&1 && break; sleep 0.5; done
	"${docker_bin}" info >/dev/null 2>&1 || {
		tail -n 20 "${work}/dockerd.log" >&2
		die "dockerd did not start"
	}
	took "dockerd"
fi
if ! docker_runs_in_bounds "${docker_bin}"; then
	die "Docker runs already, with runc as it is: on this machine (bounding set ${bounding}) kind's privileged nodes cannot start so. Stop dockerd and run this again: it starts one with runc-in-bounds"
fi
"${docker_bin}" network inspect kind >/dev/null 2>&1 && network_before=yes

step "the node image (make kind-image)"
"${repo}/scripts/kind/build-image.sh"
took "make kind-image"
[ -x "${kind_bin}" ] || die "no ${kind_bin}: scripts/kind/build-go.sh builds it"

if "${kind_bin}" get clusters 2>/dev/null | grep -qxF "${CLUSTER}"; then
	log "kind-test: a cluster ${CLUSTER} is left from an earlier run: deleting it"
	"${kind_bin}" delete cluster --name "${CLUSTER}"
fi
step "kind create cluster --config yaml/kind-config.yaml"
"${kind_bin}" create cluster --name "${CLUSTER}" --config "${config}" \
	--kubeconfig "${work}/kubeconfig" --wait 5m
took "kind create cluster, to the node Ready"
kubectl_bin="${repo}/.labs/bin/kubectl"
[ -x "${kubectl_bin}" ] || kubectl_bin="${LABS_ROOT}/kind/bin/kubectl"
pin_daemonsets "${kubectl_bin}" "${work}/kubeconfig"
"${kubectl_bin}" --kubeconfig "${work}/kubeconfig" get nodes,pods -A -o wide

step "the READMEs of labs ${LABS} against it, as the learner"
# the tests as make test runs them, with root's Go (lib.sh set PATH to
# Debian's secure_path, which has none)
go_bin="$(find_go)"
(
	cd "${repo}"
	PATH="$(dirname "${go_bin}"):${PATH}" LABS_README="${LABS}" LABS_README_KUBECONFIG="${work}/kubeconfig" \
		go run ./internal/testsummary -count=1 -timeout 90m -run '^TestLabREADMEs$' ./internal/readmerun/
)
took "READMEs ${LABS}"

# shellcheck shell=bash
# What make kind-test (run.sh) and make fleet-test (fleet.sh) both do to a
# kind cluster on this machine. Sourced after scripts/containerd/lib.sh.

# lacks_caps: true when root's capability bounding set lacks one the kernel
# knows (the machines this course is developed on have no
# CAP_SYS_RESOURCE: they are sandboxes), which a learner's machine has.
# Two things then need help, and only then: Docker's privileged containers
# (runc-in-bounds.sh says why) and the node's containerd, whose runc cannot
# lower a pod's oom_score_adj below containerd's own without
# CAP_SYS_RESOURCE (kubeadm's control plane pods ask -997).
bounding="$(awk '$1 == "CapBnd:" { print $2 }' /proc/self/status)"
lacks_caps() {
	local all=$(((1 << ($(cat /proc/sys/kernel/cap_last_cap) + 1)) - 1))
	[ $((0x${bounding} & all)) -ne "${all}" ]
}

# kind_config DIR: the cluster config to create with — yaml/kind-config.yaml
# as it is, or, where root lacks a capability, a copy in DIR with the
# node's containerd told restrict_oom_score_adj: it clamps a pod's
# oom_score_adj at containerd's own, as kind does for rootless nodes; on a
# machine with the capability containerd runs at -999 and nothing asks
# lower, so the clamp changes nothing.
kind_config() { # DIR
	local config="${LABS_REPO}/yaml/kind-config.yaml" # lib.sh
	if lacks_caps; then
		cp "${config}" "$1/kind-config.yaml"
		cat >>"$1/kind-config.yaml" <<'EOT'
containerdConfigPatches:
  - |-
    [plugins."io.containerd.grpc.v1.cri"]
      restrict_oom_score_adj = true
EOT
		config="$1/kind-config.yaml"
	fi
	echo "${config}"
}

# docker_runs_in_bounds DOCKER: where root lacks a capability, the Docker
# that answers must run containers with runc-in-bounds (a dockerd started
# by run.sh does).
docker_runs_in_bounds() { # DOCKER
	! lacks_caps || [ "$("$1" info --format '{{.DefaultRuntime}}')" = in-bounds ]
}

# pin_daemonsets KUBECTL KUBECONFIG: docs/vm.md §3 — kind's DaemonSets stay
# on kind's own node (yaml/kind-config.yaml labels it), so the labs' nodes
# run only the pods the labs give them.
pin_daemonsets() { # KUBECTL KUBECONFIG
	local ds
	for ds in kindnet kube-proxy; do
		"$1" --kubeconfig "$2" -n kube-system patch daemonset "${ds}" --type merge \
			-p '{"spec":{"template":{"spec":{"nodeSelector":{"kubelet-labs/kind-node":"true"}}}}}' >/dev/null
	done
}

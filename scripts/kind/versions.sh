# shellcheck shell=bash
# shellcheck disable=SC2034 # the variables are used by the scripts that source this
# Every version the kind node image's Go programs and component images are
# made of, in one place. Sourced by scripts/kind/build-go.sh (what it
# builds) and scripts/kind/component-images.sh (the names kind and kubeadm
# look the images up by). Sourced, never run.
#
# Each Go version below was checked against the Go module proxy this
# project builds from (it refuses some that exist upstream: see the notes).

# --- Go programs (scripts/kind/build-go.sh) --------------------------------
# kubeadm, kubelet, kubectl and the control plane: what kind v0.32.0's node
# image v1.36.x carries, at the patch release the labs run.
KUBERNETES_VERSION=v1.36.3
# The staging modules (k8s.io/api, client-go, ...) are tagged v0.<minor>.<patch>.
KUBERNETES_STAGING_VERSION="v0.${KUBERNETES_VERSION#v1.}"
# etcd: kubeadm v1.36's own (k8s.io/kubernetes v1.36.3
# cmd/kubeadm/app/constants/constants.go:334, 516-518: image tag 3.6.8-0)
ETCD_VERSION=v3.6.8
# CoreDNS: kubeadm v1.36's own (constants.go:372)
COREDNS_VERSION=v1.14.2
# kindnetd: scripts/kind/kindnetd is our compact one, mirroring kind's
# images/kindnetd at this commit (in kind's tags v0.28.0 to v0.32.0). The
# proxy serves no version of sigs.k8s.io/kind/images/kindnetd; the commit
# kind v0.32.0 tagged v20260528-9350166c from needs
# sigs.k8s.io/kube-network-policies v1.0.1-..., which the proxy refuses too.
KINDNETD_COMMIT=619609ae2c3073aaf65eb88988284df600a26cc5
# local-path-provisioner: kind pins v0.0.34 (sigs.k8s.io/kind@v0.32.0
# images/local-path-provisioner/Makefile:14), which the proxy refuses (403); v0.0.30 is the newest it has.
LOCAL_PATH_PROVISIONER_VERSION=v0.0.30
# crictl: what kind's base image builds (images/base/Dockerfile:160)
CRI_TOOLS_VERSION=v1.36.0
# the kind CLI, and the commit of its tag (it stamps `kind version` with it)
KIND_VERSION=v0.32.0
KIND_COMMIT=cda67ef8588f6bfdac5358233f2471cb2149ecaf

# --- component images (scripts/kind/component-images.sh) -------------------
# The exact names kubeadm (cmd/kubeadm/app/images/images.go:37-131), kind's
# manifests (pkg/build/nodeimage/const_cni.go:23, const_storage.go:29-30)
# and kind's containerd config (images/base/files/etc/containerd/
# config.toml:37, sandbox_image) ask for, all IfNotPresent: a name that differs by one
# character is pulled at `kind create cluster`, and there is no registry.
KUBE_IMAGE_REPO=registry.k8s.io
ETCD_IMAGE="${KUBE_IMAGE_REPO}/etcd:3.6.8-0"
COREDNS_IMAGE="${KUBE_IMAGE_REPO}/coredns/coredns:${COREDNS_VERSION}"
PAUSE_IMAGE="${KUBE_IMAGE_REPO}/pause:3.10"
KINDNETD_IMAGE=docker.io/kindest/kindnetd:v20260528-9350166c
LOCAL_PATH_PROVISIONER_IMAGE=docker.io/kindest/local-path-provisioner:v20260521-9fb22683
LOCAL_PATH_HELPER_IMAGE=docker.io/kindest/local-path-helper:v20260131-7181c60a

// Package controlplane runs a real Kubernetes control plane on 127.0.0.1
// with no VM: etcd, kube-apiserver and kube-controller-manager, built from
// this module's own dependency graph (k8s.io/kubernetes v1.36.3) and started
// as child processes.
//
// It is the "embedded control plane" of lab 00 and of every test. What it
// does, in order (see Start):
//
//  1. build the binaries into the state folder if they are missing
//     (binaries.go, guarded by a file lock because test packages run in
//     parallel);
//  2. generate the PKI in Go (pki.go): a cluster CA, a separate etcd CA, a
//     service-account key pair and one certificate per client and server,
//     keys 0600;
//  3. start etcd, then kube-apiserver, wait for /readyz, then
//     kube-controller-manager (it exits when RBAC is not ready yet), wait
//     for its /healthz — every one of them TLS with client authentication on
//     127.0.0.1 (the apiserver on Config.APIServerAddress, when one is
//     named: the one way to open it to another network);
//  4. write the admin kubeconfig and the RBAC the apiserver needs to reach
//     kubelets.
//
// Every child runs with Pdeathsig=SIGKILL in its own process group, so a
// killed parent leaves no orphans, and logs to a file the errors name.
//
// The flags mirror what kubeadm writes into its static pod manifests
// (cmd/kubeadm/app/phases/controlplane/manifests.go, v1.36.3), cut down to
// one loopback machine.
package controlplane

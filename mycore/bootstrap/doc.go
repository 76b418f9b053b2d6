// Package bootstrap is our kubelet's TLS bootstrap: how a machine that only
// has a short-lived bootstrap token ends up with its own client certificate
// for system:node:NAME.
//
// The pieces, in the order a joining node meets them:
//
//   - token.go: a bootstrap token is a Secret of type
//     bootstrap.kubernetes.io/token in kube-system; the apiserver
//     (--enable-bootstrap-token-auth) authenticates "ID.SECRET" as user
//     system:bootstrap:ID in group system:bootstrappers. Tokens are made with
//     k8s.io/cluster-bootstrap, as `kubeadm token create` does
//     (cmd/kubeadm/app/phases/bootstraptoken/node/token.go, v1.36.3).
//   - rbac.go: the three ClusterRoleBindings kubeadm creates so a token may
//     post a CSR and have it approved by the controller-manager
//     (cmd/kubeadm/app/phases/bootstraptoken/node/tlsbootstrap.go, v1.36.3).
//   - whoami.go: proving who a credential is, with a SelfSubjectReview, and
//     explaining a 401 in words.
//   - clusterinfo.go: the kube-public/cluster-info ConfigMap that the
//     controller-manager's bootstrapsigner signs with every token that has
//     usage-bootstrap-signing.
//   - csr.go: the CertificateSigningRequest, compact from the kubelet's
//     requestNodeCertificate (pkg/kubelet/certificate/bootstrap/bootstrap.go,
//     v1.36.3) on top of k8s.io/client-go/util/certificate/csr;
//     csr_request.go holds what the csr-request build-it stage has a
//     learner write: the CSR's subject, usages, name and object, and the
//     wait's decision on each state of it.
//   - credentials.go: the node's key, certificate and kubeconfig in the
//     state folder, and when they may be reused.
//   - join.go: all of it as one call, what the kubelet does at start-up when
//     given --bootstrap-kubeconfig (LoadClientCert in bootstrap.go).
package bootstrap

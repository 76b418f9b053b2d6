// Package configsecret gets the ConfigMaps and Secrets a node's pods name,
// as that node, for their volumes (mycore/volumes) and their environment
// (envFrom, configMapKeyRef, secretKeyRef). It is the kubelet's configMapManager and
// secretManager (kubelet.go:650-670), imported from upstream
// (pkg/kubelet/configmap, pkg/kubelet/secret) with the "Get" change
// detection strategy: one GET per call, as the node (system:node:NAME),
// which the Node authorizer allows only for objects a pod bound to the
// node refers to — never a LIST of them all. Every sync of a pod reads the
// objects again, so a changed ConfigMap shows up at the pod's next sync
// (the kubelet's resync, a minute), as upstream's e2e tests expect.
package configsecret

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	kubeconfigmap "k8s.io/kubernetes/pkg/kubelet/configmap"
	kubesecret "k8s.io/kubernetes/pkg/kubelet/secret"
)

// Managers are the node's getters. The fields are upstream's interfaces
// (GetConfigMap(namespace, name), GetSecret(namespace, name), plus
// RegisterPod/UnregisterPod, which the simple managers ignore), so a
// caching or watching manager can replace them without changing callers.
type Managers struct {
	ConfigMaps kubeconfigmap.Manager
	Secrets    kubesecret.Manager
}

// New returns getters that GET each object with c, which should act as
// the node.
func New(c kubernetes.Interface) Managers {
	return Managers{
		ConfigMaps: kubeconfigmap.NewSimpleConfigMapManager(c),
		Secrets:    kubesecret.NewSimpleSecretManager(c),
	}
}

// GetConfigMap is the config map namespace/name (for the environment's
// envFrom and configMapKeyRef: kuberuntime.ObjectGetter).
func (o Managers) GetConfigMap(namespace, name string) (*v1.ConfigMap, error) {
	return o.ConfigMaps.GetConfigMap(namespace, name)
}

// GetSecret is the secret namespace/name.
func (o Managers) GetSecret(namespace, name string) (*v1.Secret, error) {
	return o.Secrets.GetSecret(namespace, name)
}

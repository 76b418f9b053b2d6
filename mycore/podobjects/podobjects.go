// Package podobjects gets the config maps and secrets a pod refers to
// (envFrom, valueFrom, and the volumes of those kinds), as the node does:
// with upstream's simple managers (pkg/kubelet/configmap and
// pkg/kubelet/secret, NewSimple…Manager), one GET per use. The node acts as
// system:node:NAME, and the Node authorizer lets it GET only the objects of
// pods bound to it, never list them; a GET also sees a change at once,
// where the kubelet's default watching managers would need the pods
// registered first (RegisterPod), which our pod workers do not do.
package podobjects

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/pkg/kubelet/configmap"
	"k8s.io/kubernetes/pkg/kubelet/secret"
)

// Getter gets one config map or secret of a namespace. Safe for
// concurrent use. Errors are the apiserver's (apierrors.IsNotFound tells a
// missing object, which an optional reference skips).
type Getter struct {
	configMaps configmap.Manager
	secrets    secret.Manager
}

// New returns a Getter acting with client (the node's credentials).
func New(client kubernetes.Interface) *Getter {
	return &Getter{configMaps: configmap.NewSimpleConfigMapManager(client), secrets: secret.NewSimpleSecretManager(client)}
}

// GetConfigMap is the config map namespace/name.
func (g *Getter) GetConfigMap(namespace, name string) (*v1.ConfigMap, error) {
	return g.configMaps.GetConfigMap(namespace, name)
}

// GetSecret is the secret namespace/name.
func (g *Getter) GetSecret(namespace, name string) (*v1.Secret, error) {
	return g.secrets.GetSecret(namespace, name)
}

package bootstrap

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/cluster-bootstrap/token/jws"
)

// EnsureClusterInfo publishes the kube-public/cluster-info ConfigMap (a
// kubeconfig holding only the server and its CA), as kubeadm's
// CreateBootstrapConfigMapIfNotExists does
// (cmd/kubeadm/app/phases/bootstraptoken/clusterinfo/clusterinfo.go,
// v1.36.3). An existing one (kind/kubeadm clusters have it) is left alone.
func EnsureClusterInfo(ctx context.Context, admin kubernetes.Interface, server string, caPEM []byte) (created bool, err error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[""] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return false, err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: bootstrapapi.ConfigMapClusterInfo, Namespace: metav1.NamespacePublic},
		Data:       map[string]string{bootstrapapi.KubeConfigKey: string(data)},
	}
	_, err = admin.CoreV1().ConfigMaps(metav1.NamespacePublic).Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create ConfigMap kube-public/cluster-info: %w", err)
	}
	return true, nil
}

// WaitForClusterInfoSignature waits until the controller-manager's
// bootstrapsigner has added jws-kubeconfig-ID to cluster-info and checks
// that signature with the token's secret: proof that whoever holds the
// token can trust the CA in cluster-info (kubeadm join's token discovery).
func WaitForClusterInfoSignature(ctx context.Context, client kubernetes.Interface, tok Token, wait time.Duration) error {
	key := bootstrapapi.JWSSignatureKeyPrefix + tok.ID
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		cm, err := client.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
		if err == nil {
			if sig, ok := cm.Data[key]; ok {
				if !jws.DetachedTokenIsValid(sig, cm.Data[bootstrapapi.KubeConfigKey], tok.ID, tok.Secret) {
					return fmt.Errorf("cluster-info has %s, but it does not verify with this token", key)
				}
				return nil
			}
		} else if ctx.Err() == nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("read kube-public/cluster-info: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster-info was not signed for token %s within %s: is the controller-manager's bootstrapsigner controller on (--controllers=*,bootstrapsigner)?", tok.ID, wait)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ClusterCA returns the PEM of the CA that signed the apiserver's serving
// certificate, so the kubeconfigs we write verify the server: from the
// kubeconfig in use (inline data or a file), else from kube-public/cluster-info.
// It never falls back to skipping verification.
func ClusterCA(ctx context.Context, cfg *rest.Config, admin kubernetes.Interface) (caPEM []byte, source string, err error) {
	switch {
	case len(cfg.TLSClientConfig.CAData) > 0:
		caPEM, source = cfg.TLSClientConfig.CAData, "the kubeconfig"
	case cfg.TLSClientConfig.CAFile != "":
		if caPEM, err = os.ReadFile(cfg.TLSClientConfig.CAFile); err != nil {
			return nil, "", fmt.Errorf("read the kubeconfig's certificate-authority: %w", err)
		}
		source = cfg.TLSClientConfig.CAFile
	default:
		cm, err := admin.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
		if err != nil {
			return nil, "", fmt.Errorf("the kubeconfig names no CA and kube-public/cluster-info cannot be read (%w); add certificate-authority-data to the kubeconfig", err)
		}
		kc, err := clientcmd.Load([]byte(cm.Data[bootstrapapi.KubeConfigKey]))
		if err != nil {
			return nil, "", fmt.Errorf("kube-public/cluster-info: %w", err)
		}
		for _, c := range kc.Clusters {
			caPEM = c.CertificateAuthorityData
		}
		source = "kube-public/cluster-info"
	}
	if _, err := certutil.ParseCertsPEM(caPEM); err != nil {
		return nil, "", fmt.Errorf("CA from %s: %w", source, err)
	}
	return caPEM, source, nil
}

package controlplane

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ClusterName is the cluster and context name in every kubeconfig we write.
const ClusterName = "kubelet-labs"

// WriteKubeconfig writes a kubeconfig (mode 0600) for server that trusts
// caFile and authenticates with a client certificate. The CA, cert and key
// are embedded so the file works from any folder and machine.
func WriteKubeconfig(path, server, caFile, certFile, keyFile, user string) error {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	cert, err := os.ReadFile(certFile)
	if err != nil {
		return err
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[ClusterName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts[ClusterName] = &clientcmdapi.Context{Cluster: ClusterName, AuthInfo: user}
	cfg.CurrentContext = ClusterName
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	// clientcmd.WriteToFile writes 0600; write to a temp name and rename so
	// a reader (kubectl in another terminal) never sees half a file.
	tmp := path + ".tmp"
	if err := clientcmd.WriteToFile(*cfg, tmp); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

func (cp *ControlPlane) writeKubeconfigs() error {
	p := cp.pki
	if err := WriteKubeconfig(filepath.Join(cp.cfg.Dir, "controller-manager.kubeconfig"), cp.URL(), p.CAFile(),
		p.CertFile(controllerManagerName), p.KeyFile(controllerManagerName), "system:kube-controller-manager"); err != nil {
		return err
	}
	return WriteKubeconfig(cp.cfg.AdminKubeconfig, cp.URL(), p.CAFile(),
		p.CertFile(adminName), p.KeyFile(adminName), "kubernetes-admin")
}

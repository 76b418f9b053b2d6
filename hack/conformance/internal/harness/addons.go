package harness

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/template"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	kubeadmdns "k8s.io/kubernetes/cmd/kubeadm/app/phases/addons/dns"
	kubeadmproxy "k8s.io/kubernetes/cmd/kubeadm/app/phases/addons/proxy"

	"kubelet-labs/hack/conformance/internal/images"
)

// The cluster's DNS, as the nodes are told it (--cluster-dns,
// --cluster-domain) and the kube-dns Service has it: the tenth address of
// the service range (10.0.0.0/24, internal/controlplane), as kubeadm takes
// the tenth of its own (cmd/kubeadm/app/constants/constants.go
// GetDNSIP), and kubeadm's default domain.
const (
	ClusterDNS    = "10.0.0.10"
	ClusterDomain = "cluster.local"
)

// addons are what a kubeadm cluster runs on its nodes and the certified
// suite expects: kube-proxy (a DaemonSet) and CoreDNS (a Deployment behind
// the kube-dns Service), rendered from kubeadm's own manifests
// (cmd/kubeadm/app/phases/addons/{proxy,dns}/manifests.go at v1.36.3) with
// the values kubeadm would give them, and run by the nodes as pods.
type addons struct {
	// apiserver is the URL the pods reach the apiserver at (kube-proxy
	// cannot use the Service IP: it is what makes that IP work).
	apiserver string
	// proxyNode is the one node kube-proxy runs on (see proxyDaemonSet).
	proxyNode string
	// clusterCIDR covers every node's pod subnet.
	clusterCIDR string
}

// proxyConfig is the KubeProxyConfiguration: kubeadm's defaults
// (iptables mode), with the pods' CIDR, and conntrack left as the host has
// it (0 values: kube-proxy sets no sysctl; cmd/kube-proxy/app/server_linux.go
// skips each zero), because every node here shares this host's network
// namespace and its settings outlive the run.
const proxyConfig = `    apiVersion: kubeproxy.config.k8s.io/v1alpha1
    kind: KubeProxyConfiguration
    clientConnection:
      kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
    clusterCIDR: %s
    mode: iptables
    conntrack:
      maxPerCore: 0
      min: 0
      tcpEstablishedTimeout: 0s
      tcpCloseWaitTimeout: 0s`

// objects renders the add-ons' manifests into API objects, in the order
// they are created.
func (a addons) objects() ([]runtime.Object, error) {
	var docs []string
	render := func(tmpl string, values any) error {
		t, err := template.New("addon").Option("missingkey=error").Parse(tmpl)
		if err != nil {
			return err
		}
		var b strings.Builder
		if err := t.Execute(&b, values); err != nil {
			return err
		}
		docs = append(docs, b.String())
		return nil
	}
	proxy := map[string]any{
		"ProxyConfigMap": "kube-proxy", "ProxyConfigMapKey": "config.conf",
		"ControlPlaneEndpoint": a.apiserver, "ProxyConfig": fmt.Sprintf(proxyConfig, a.clusterCIDR),
		"Image": images.KubeProxy,
	}
	dns := map[string]any{
		"DNSIP": ClusterDNS, "DeploymentName": "coredns", "Replicas": 2,
		"ControlPlaneTaintKey": "node-role.kubernetes.io/control-plane",
		"Image":                images.CoreDNS, "DNSDomain": ClusterDomain,
	}
	for _, r := range []struct {
		tmpl   string
		values any
	}{
		{kubeadmproxy.KubeProxyConfigMap19, proxy}, {kubeadmproxy.KubeProxyDaemonSet19, proxy},
		{kubeadmdns.CoreDNSServiceAccount, dns}, {kubeadmdns.CoreDNSClusterRole, dns},
		{kubeadmdns.CoreDNSClusterRoleBinding, dns}, {kubeadmdns.CoreDNSConfigMap, dns},
		{kubeadmdns.CoreDNSService, dns}, {kubeadmdns.CoreDNSDeployment, dns},
	} {
		if err := render(r.tmpl, r.values); err != nil {
			return nil, err
		}
	}
	// kube-proxy's identity, as kubeadm's proxy.go:70-100 creates it
	objs := []runtime.Object{
		&v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: kubeadmproxy.KubeProxyServiceAccountName, Namespace: metav1.NamespaceSystem}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:node-proxier"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node-proxier"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: kubeadmproxy.KubeProxyServiceAccountName, Namespace: metav1.NamespaceSystem}},
		},
	}
	decode := scheme.Codecs.UniversalDeserializer().Decode
	for _, d := range docs {
		obj, _, err := decode([]byte(d), nil, nil)
		if err != nil {
			return nil, fmt.Errorf("kubeadm's add-on manifest: %w", err)
		}
		if ds, ok := obj.(*appsv1.DaemonSet); ok {
			a.adaptProxy(ds)
		}
		if svc, ok := obj.(*v1.Service); ok {
			svc.ResourceVersion = "" // kubeadm's "0" is for its updates
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// adaptProxy changes kubeadm's kube-proxy DaemonSet where this host is
// not a kubeadm cluster's node:
//   - it runs on one node: every node of this cluster is a process on the
//     same host, in the host's one network namespace, and kube-proxy owns
//     the Service rules of the namespace it runs in — two would rewrite
//     each other's chains. One kube-proxy serves every node here, as one
//     per node does on machines of their own;
//   - no /lib/modules: this host's kernel has its netfilter built in and
//     no module folder to mount (kube-proxy's iptables mode loads no module).
func (a addons) adaptProxy(ds *appsv1.DaemonSet) {
	spec := &ds.Spec.Template.Spec
	spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{a.proxyNode}}},
		}}},
	}}
	if _, err := os.Stat("/lib/modules"); err == nil {
		return
	}
	keep := spec.Volumes[:0]
	for _, v := range spec.Volumes {
		if v.Name != "lib-modules" {
			keep = append(keep, v)
		}
	}
	spec.Volumes = keep
	c := &spec.Containers[0]
	mounts := c.VolumeMounts[:0]
	for _, m := range c.VolumeMounts {
		if m.Name != "lib-modules" {
			mounts = append(mounts, m)
		}
	}
	c.VolumeMounts = mounts
}

// create creates the add-ons' objects (an existing one is left as it is).
func (a addons) create(ctx context.Context, cs kubernetes.Interface) error {
	objs, err := a.objects()
	if err != nil {
		return err
	}
	sys := metav1.NamespaceSystem
	for _, obj := range objs {
		var err error
		switch o := obj.(type) {
		case *v1.ServiceAccount:
			_, err = cs.CoreV1().ServiceAccounts(sys).Create(ctx, o, metav1.CreateOptions{})
		case *v1.ConfigMap:
			_, err = cs.CoreV1().ConfigMaps(sys).Create(ctx, o, metav1.CreateOptions{})
		case *v1.Service:
			_, err = cs.CoreV1().Services(sys).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = cs.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *appsv1.DaemonSet:
			_, err = cs.AppsV1().DaemonSets(sys).Create(ctx, o, metav1.CreateOptions{})
		case *appsv1.Deployment:
			_, err = cs.AppsV1().Deployments(sys).Create(ctx, o, metav1.CreateOptions{})
		default:
			err = fmt.Errorf("no way to create a %T", obj)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("add-ons: %w", err)
		}
	}
	return nil
}

// waitReady waits until kube-proxy runs ready on its node and CoreDNS has
// every replica ready, and the kube-dns Service has their endpoints; the
// error says which is not.
func (a addons) waitReady(ctx context.Context, cs kubernetes.Interface, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	sys := metav1.NamespaceSystem
	for {
		last := ""
		ds, err := cs.AppsV1().DaemonSets(sys).Get(ctx, "kube-proxy", metav1.GetOptions{})
		switch {
		case err != nil:
			last = "kube-proxy: " + err.Error()
		case ds.Status.DesiredNumberScheduled != 1 || ds.Status.NumberReady != 1:
			last = fmt.Sprintf("kube-proxy: %d of %d ready", ds.Status.NumberReady, ds.Status.DesiredNumberScheduled)
		}
		if last == "" {
			d, err := cs.AppsV1().Deployments(sys).Get(ctx, "coredns", metav1.GetOptions{})
			switch {
			case err != nil:
				last = "coredns: " + err.Error()
			case d.Status.ReadyReplicas != *d.Spec.Replicas:
				last = fmt.Sprintf("coredns: %d of %d replicas ready", d.Status.ReadyReplicas, *d.Spec.Replicas)
			}
		}
		if last == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster add-ons not ready after %s (%s): kubectl -n kube-system get pods -o wide; describe them", timeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

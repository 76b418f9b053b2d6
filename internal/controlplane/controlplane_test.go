package controlplane_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"

	"kubelet-labs/internal/testenv"
)

func TestAdminListsNamespaces(t *testing.T) {
	client := testenv.AdminClient(t)
	ctx := context.Background()
	var names []string
	// kube-node-lease and kube-public are created by a post-start hook
	// that may finish just after /readyz: poll.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		names = names[:0]
		for _, ns := range list.Items {
			names = append(names, ns.Name)
		}
		return len(names) >= 4, nil
	})
	if err != nil {
		t.Fatalf("namespaces %v: %v", names, err)
	}
	for _, want := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		if !contains(names, want) {
			t.Errorf("namespace %q missing from %v", want, names)
		}
	}
	v, err := client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != "v1.36.3" {
		t.Errorf("server version %q, want v1.36.3", v.GitVersion)
	}
}

// TestBootstrapTokenAuthenticates creates a bootstrap token Secret, as
// `kubeadm token create` does, and asks the apiserver who the token is.
func TestBootstrapTokenAuthenticates(t *testing.T) {
	cp := testenv.ControlPlane(t)
	admin := testenv.AdminClient(t)
	ctx := context.Background()

	id, secret := randomHex(t, 3), randomHex(t, 8) // [a-z0-9]{6}.[a-z0-9]{16}
	tokenSecret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: bootstrapapi.BootstrapTokenSecretPrefix + id, Namespace: metav1.NamespaceSystem},
		Type:       bootstrapapi.SecretTypeBootstrapToken,
		StringData: map[string]string{
			bootstrapapi.BootstrapTokenIDKey:               id,
			bootstrapapi.BootstrapTokenSecretKey:           secret,
			bootstrapapi.BootstrapTokenExpirationKey:       time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
			bootstrapapi.BootstrapTokenUsageAuthentication: "true",
		},
	}
	if _, err := admin.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, tokenSecret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin.CoreV1().Secrets(metav1.NamespaceSystem).Delete(context.Background(), tokenSecret.Name, metav1.DeleteOptions{})
	})

	cfg := tokenConfig(cp.PKI().CAFile(), cp.URL(), id+"."+secret)
	review := selfReview(t, cfg)
	if want := "system:bootstrap:" + id; review.Status.UserInfo.Username != want {
		t.Errorf("token authenticates as %q, want %q", review.Status.UserInfo.Username, want)
	}
	if !contains(review.Status.UserInfo.Groups, "system:bootstrappers") {
		t.Errorf("groups %v lack system:bootstrappers", review.Status.UserInfo.Groups)
	}

	// A wrong secret for the same id must be refused.
	bad := tokenConfig(cp.PKI().CAFile(), cp.URL(), id+"."+randomHex(t, 8))
	c := kubernetes.NewForConfigOrDie(bad)
	_, err := c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err == nil {
		t.Fatal("a wrong token secret was accepted")
	}
}

// TestClientSurvivesAPIServerRestart: a client made before the restart
// works after it, and data written before is still there (etcd kept it).
func TestClientSurvivesAPIServerRestart(t *testing.T) {
	cp := testenv.ControlPlane(t)
	client := testenv.AdminClient(t)
	ctx := context.Background()

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "survives-restart", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client.CoreV1().ConfigMaps("default").Delete(context.Background(), cm.Name, metav1.DeleteOptions{})
	})

	oldPid := cp.Pids()["kube-apiserver"]
	start := time.Now()
	if err := cp.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("apiserver restarted in %s", time.Since(start).Round(10*time.Millisecond))
	if newPid := cp.Pids()["kube-apiserver"]; newPid == oldPid || newPid == 0 {
		t.Fatalf("apiserver pid %d -> %d: not restarted", oldPid, newPid)
	}
	got, err := client.CoreV1().ConfigMaps("default").Get(ctx, cm.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the old client fails after the restart: %v", err)
	}
	if got.Data["k"] != "v" {
		t.Errorf("data after restart = %v", got.Data)
	}
}

func tokenConfig(caFile, host, token string) *rest.Config {
	return &rest.Config{Host: host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAFile: caFile}}
}

func selfReview(t *testing.T, cfg *rest.Config) *authenticationv1.SelfSubjectReview {
	t.Helper()
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview: %v", err)
	}
	return r
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

package kuberuntime_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"kubelet-labs/mycore/cri"
	"kubelet-labs/mycore/kuberuntime"
	"kubelet-labs/mycore/plegruntime"
	"kubelet-labs/mylib/fakecri"
)

// privateRegistry is the mock's image service behind a registry that
// wants user/password, as agnhost's fake-registry-server --private does
// for the node suite's "pull from private registry" specs: a pull without
// them is refused with 401; it counts the pulls.
type privateRegistry struct {
	runtimeapi.ImageServiceServer
	mu    sync.Mutex
	pulls []*runtimeapi.AuthConfig
}

func (r *privateRegistry) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	r.mu.Lock()
	r.pulls = append(r.pulls, req.GetAuth())
	r.mu.Unlock()
	if a := req.GetAuth(); a.GetUsername() != "user" || a.GetPassword() != "password" {
		return nil, status.Error(codes.Unknown, "failed to pull: 401 Unauthorized")
	}
	return r.ImageServiceServer.PullImage(ctx, req)
}

func (r *privateRegistry) pulled() []*runtimeapi.AuthConfig {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*runtimeapi.AuthConfig(nil), r.pulls...)
}

// secretsOf is the node's view of the pod's secrets (ObjectGetter).
type secretsOf map[string]*v1.Secret

func (s secretsOf) GetConfigMap(ns, name string) (*v1.ConfigMap, error) {
	return nil, fmt.Errorf("configmap %s/%s: none here", ns, name)
}
func (s secretsOf) GetSecret(ns, name string) (*v1.Secret, error) {
	if sec, ok := s[ns+"/"+name]; ok {
		return sec, nil
	}
	return nil, fmt.Errorf("secret %s/%s not found", ns, name)
}

// The image a container starts from, as the real kubelet's image manager
// decides (image_manager.go:107-136, 284-370): the pull policy, the pull
// secrets' credentials for the image's registry, and the container's
// waiting reason when the image is not there — ErrImagePull, then
// ImagePullBackOff, or ErrImageNeverPull — which the node suite's image
// specs read.
func TestImagePullPolicySecretsAndReasons(t *testing.T) {
	const image = "localhost:5000/pause:testing"
	dockerConfig := fmt.Sprintf(`{"auths":{"localhost:5000":{"username":"user","password":"password","auth":%q}}}`,
		base64.StdEncoding.EncodeToString([]byte("user:password")))
	objects := secretsOf{"reg/pull-secret": {
		ObjectMeta: metav1.ObjectMeta{Namespace: "reg", Name: "pull-secret", UID: "uid-secret"},
		Type:       v1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{v1.DockerConfigJsonKey: []byte(dockerConfig)},
	}}
	start := func(t *testing.T, pod *v1.Pod, images ...string) (*privateRegistry, func() *kubecontainer.SyncResult) {
		t.Helper()
		mock := fakecri.New(fakecri.WithImages(images...))
		t.Cleanup(mock.Close)
		reg := &privateRegistry{ImageServiceServer: mock}
		c := cri.InProcess("mock", mock, reg)
		m := kuberuntime.New(c, kuberuntime.Options{PodLogsDir: t.TempDir(), Env: &kuberuntime.EnvSources{Objects: objects}})
		ctx := context.Background()
		return reg, func() *kubecontainer.SyncResult {
			t.Helper()
			st := &kubecontainer.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
			if p, err := plegruntime.New(c).GetPod(ctx, pod.UID); err == nil {
				if st, err = plegruntime.New(c).GetPodStatus(ctx, p); err != nil {
					t.Fatal(err)
				}
			}
			r := m.SyncPod(ctx, pod, st, kuberuntime.PodIPs{}, nil)
			for _, s := range r.SyncResults {
				if s.Action == kubecontainer.StartContainer {
					return s
				}
			}
			t.Fatalf("SyncPod started no container: %+v", r)
			return nil
		}
	}
	podWith := func(policy v1.PullPolicy, secret string) *v1.Pod {
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "image-pull-test", Namespace: "reg", UID: "uid-pull"},
			Spec: v1.PodSpec{DNSPolicy: v1.DNSDefault, RestartPolicy: v1.RestartPolicyNever,
				Containers: []v1.Container{{Name: "image-pull-test", Image: image, ImagePullPolicy: policy}}},
		}
		if secret != "" {
			p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: secret}}
		}
		return p
	}

	t.Run("without a secret: ErrImagePull, then ImagePullBackOff with the pull's error", func(t *testing.T) {
		reg, sync := start(t, podWith(v1.PullAlways, ""))
		r := sync()
		if r.Error == nil || r.Error.Error() != "ErrImagePull" || !strings.Contains(r.Message, "401 Unauthorized") {
			t.Fatalf("first start: reason %v, message %q; want ErrImagePull with the registry's 401", r.Error, r.Message)
		}
		r = sync()
		if r.Error == nil || r.Error.Error() != "ImagePullBackOff" || !strings.HasPrefix(r.Message, fmt.Sprintf("Back-off pulling image %q: ErrImagePull: ", image)) {
			t.Fatalf("second start: reason %v, message %q; want ImagePullBackOff naming the last pull's error", r.Error, r.Message)
		}
		if n := len(reg.pulled()); n != 1 {
			t.Errorf("%d pulls, want 1: a pod in back-off is not pulled again", n)
		}
	})
	t.Run("with the pod's pull secret: pulled with its credentials, started", func(t *testing.T) {
		reg, sync := start(t, podWith(v1.PullAlways, "pull-secret"))
		if r := sync(); r.Error != nil {
			t.Fatalf("start: %v: %s", r.Error, r.Message)
		}
		p := reg.pulled()
		if len(p) != 1 || p[0].GetUsername() != "user" || p[0].GetPassword() != "password" {
			t.Errorf("pulls %v, want one with the secret's user and password", p)
		}
	})
	t.Run("Always pulls an image the runtime has", func(t *testing.T) {
		reg, sync := start(t, podWith(v1.PullAlways, "pull-secret"), image)
		if r := sync(); r.Error != nil {
			t.Fatalf("start: %v: %s", r.Error, r.Message)
		}
		if n := len(reg.pulled()); n != 1 {
			t.Errorf("%d pulls with pullPolicy Always, want 1", n)
		}
	})
	t.Run("IfNotPresent uses the runtime's", func(t *testing.T) {
		reg, sync := start(t, podWith(v1.PullIfNotPresent, ""), image)
		if r := sync(); r.Error != nil {
			t.Fatalf("start: %v: %s", r.Error, r.Message)
		}
		if n := len(reg.pulled()); n != 0 {
			t.Errorf("%d pulls with pullPolicy IfNotPresent and the image there, want 0", n)
		}
	})
	t.Run("Never with no image: ErrImageNeverPull", func(t *testing.T) {
		reg, sync := start(t, podWith(v1.PullNever, "pull-secret"))
		r := sync()
		if r.Error == nil || r.Error.Error() != "ErrImageNeverPull" || r.Message != fmt.Sprintf("Container image %q is not present with pull policy of Never", image) {
			t.Fatalf("start: reason %v, message %q; want ErrImageNeverPull", r.Error, r.Message)
		}
		if n := len(reg.pulled()); n != 0 {
			t.Errorf("%d pulls with pullPolicy Never, want 0", n)
		}
	})
}

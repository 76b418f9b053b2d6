package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/credentialprovider"
	credentialprovidersecrets "k8s.io/kubernetes/pkg/credentialprovider/secrets"
	"k8s.io/kubernetes/pkg/kubelet/events"
	"k8s.io/kubernetes/pkg/kubelet/images"
	"k8s.io/kubernetes/pkg/util/parsers"
)

// The image back-off of the real kubelet: 10 s doubling to 300 s, per pod
// and image (kubelet.go: flowcontrol.NewBackOff(backOffPeriod,
// MaxContainerBackOff); image_manager.go:336).
const (
	imageBackOffStart = 10 * time.Second
	imageBackOffMax   = 300 * time.Second
)

// imagePulls is the part of the image manager (pkg/kubelet/images,
// image_manager.go) our node keeps: the back-off per pod and image and
// the last pull error, which a back-off's message repeats.
type imagePulls struct {
	backOff *flowcontrol.Backoff
	lastErr sync.Map // backOffKey -> "ErrImagePull: message"
}

func newImagePulls() *imagePulls {
	return &imagePulls{backOff: flowcontrol.NewBackOff(imageBackOffStart, imageBackOffMax)}
}

// imageError is a container that did not start because of its image: the
// sync result's reason is one of the image manager's errors
// (ErrImagePull, ImagePullBackOff, ErrImageNeverPull, ImageInspectError),
// which becomes the container's waiting reason; the message is its
// waiting message.
type imageError struct {
	reason error
	msg    string
}

func (e imageError) Error() string { return e.msg }

// ImageReason is the image manager's error behind a StartContainer that
// failed on its image, and whether it was one.
func ImageReason(err error) (error, bool) {
	var e imageError
	if errors.As(err, &e) {
		return e.reason, true
	}
	return nil, false
}

// ensureContainerImage is the image manager's EnsureImageExists
// (image_manager.go:164-282) for container c of pod, with its events:
//   - the pull policy decides (imagePullPrecheck, :107-136): Always pulls
//     every time; IfNotPresent and Never use what the runtime has, and
//     Never with nothing there is ErrImageNeverPull. An empty policy, which
//     the API server never leaves but a pod built in Go may have, is
//     IfNotPresent here;
//   - a pod and image in back-off get ImagePullBackOff without a pull
//     (pullImage, :336-350);
//   - the pull carries the credentials of the pod's imagePullSecrets for
//     the image's registry, tried in turn (makeLookupPullCredentialsFunc,
//     :284-313; kuberuntime_image.go:33-71);
//   - a failed pull is ErrImagePull and starts or extends the back-off.
//
// Left out: the KubeletEnsureSecretPulledImages check of an image already
// present (whether this pod's credentials may use it), credential
// provider plugins and the node's own docker config.
func (m *Manager) ensureContainerImage(ctx context.Context, pod *v1.Pod, c *v1.Container) error {
	on := podAbout(pod).of(c.Name)
	policy := c.ImagePullPolicy
	if policy == "" {
		policy = v1.PullIfNotPresent
	}
	if policy != v1.PullAlways {
		ok, err := m.hasImage(ctx, on, c.Image)
		if err != nil {
			msg := fmt.Sprintf("Failed to inspect image %q: %v", c.Image, grpcMessage(err))
			m.recordContainerEvent(pod, c, "", v1.EventTypeWarning, events.FailedToInspectImage, "%s", msg)
			return imageError{images.ErrImageInspect, msg}
		}
		if ok {
			m.recordContainerEvent(pod, c, "", v1.EventTypeNormal, events.PulledImage, "Container image %q already present on machine and can be accessed by the pod", c.Image)
			return nil
		}
		if policy == v1.PullNever {
			msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image)
			m.recordContainerEvent(pod, c, "", v1.EventTypeWarning, events.ErrImageNeverPullPolicy, "%s", msg)
			return imageError{images.ErrImageNeverPull, msg}
		}
	}

	key := fmt.Sprintf("%s_%s", pod.UID, c.Image)
	if m.pulls.backOff.IsInBackOffSinceUpdate(key, m.pulls.backOff.Clock.Now()) {
		msg := fmt.Sprintf("Back-off pulling image %q", c.Image)
		m.recordContainerEvent(pod, c, "", v1.EventTypeNormal, events.BackOffPullImage, "%s", msg)
		if prev, ok := m.pulls.lastErr.Load(key); ok {
			msg = fmt.Sprintf("%s: %s", msg, prev)
		}
		return imageError{images.ErrImagePullBackOff, msg}
	}
	m.pulls.lastErr.Delete(key)

	creds, err := m.pullCredentials(pod, c.Image)
	if err != nil {
		return imageError{images.ErrImagePull, err.Error()}
	}
	m.recordContainerEvent(pod, c, "", v1.EventTypeNormal, events.PullingImage, "Pulling image %q", c.Image)
	start := time.Now()
	if err := m.pullImage(ctx, on, c.Image, creds); err != nil {
		m.recordContainerEvent(pod, c, "", v1.EventTypeWarning, events.FailedToPullImage, "Failed to pull image %q: %v", c.Image, grpcMessage(err))
		m.pulls.backOff.Next(key, m.pulls.backOff.Clock.Now())
		msg := grpcMessage(err)
		m.pulls.lastErr.Store(key, fmt.Sprintf("%s: %s", images.ErrImagePull, msg))
		return imageError{images.ErrImagePull, msg}
	}
	m.recordContainerEvent(pod, c, "", v1.EventTypeNormal, events.PulledImage, "Successfully pulled image %q in %v", c.Image, time.Since(start).Round(time.Millisecond))
	m.pulls.backOff.GC()
	return nil
}

// pullCredentials are the credentials of pod's imagePullSecrets that match
// image's registry (makeLookupPullCredentialsFunc, image_manager.go:284-313,
// with the secrets as getPullSecretsForPod reads them, kubelet_pods.go: a
// secret the node cannot read is skipped, not an error).
func (m *Manager) pullCredentials(pod *v1.Pod, image string) ([]credentialprovider.TrackedAuthConfig, error) {
	if len(pod.Spec.ImagePullSecrets) == 0 || m.env == nil || m.env.Objects == nil {
		return nil, nil
	}
	var secrets []v1.Secret
	for _, ref := range pod.Spec.ImagePullSecrets {
		if ref.Name == "" {
			continue
		}
		s, err := m.env.Objects.GetSecret(pod.Namespace, ref.Name)
		if err != nil {
			klog.InfoS("Unable to retrieve pull secret, the image pull may not succeed", "pod", klog.KObj(pod), "secret", ref.Name, "err", err)
			continue
		}
		secrets = append(secrets, *s)
	}
	repo, _, _, err := parsers.ParseImageName(image)
	if err != nil {
		return nil, fmt.Errorf("image %q: %w", image, err)
	}
	keyring, err := credentialprovidersecrets.MakeDockerKeyring(secrets, &credentialprovider.BasicDockerKeyring{})
	if err != nil {
		return nil, err
	}
	creds, _ := keyring.Lookup(repo)
	return creds, nil
}

// pullImage is PullImage of kuberuntime_image.go:33-71: without
// credentials one pull; with, one pull per credential until one works.
func (m *Manager) pullImage(ctx context.Context, a about, image string, creds []credentialprovider.TrackedAuthConfig) error {
	if len(creds) == 0 {
		return m.cri.PullImage(ctx, a.saying("CRI PullImage %s", image), image, nil)
	}
	var errs []error
	for _, c := range creds {
		auth := &runtimeapi.AuthConfig{Username: c.Username, Password: c.Password, Auth: c.Auth,
			ServerAddress: c.ServerAddress, IdentityToken: c.IdentityToken, RegistryToken: c.RegistryToken}
		err := m.cri.PullImage(ctx, a.saying("CRI PullImage %s (with the credentials of a pull secret)", image), image, auth)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

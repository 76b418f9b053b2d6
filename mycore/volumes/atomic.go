package volumes

import (
	"errors"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevolume "k8s.io/kubernetes/pkg/volume"
	"k8s.io/kubernetes/pkg/volume/configmap"
	"k8s.io/kubernetes/pkg/volume/downwardapi"
	"k8s.io/kubernetes/pkg/volume/secret"
	volumeutil "k8s.io/kubernetes/pkg/volume/util"
)

// payload is the files of a volume, by path in it (upstream's type).
type payload = map[string]volumeutil.FileProjection

// setUpAtomic is the SetUpAt that the configMap, secret, downwardAPI and
// projected plugins share (configmap.go:180-260, secret.go:176-256,
// downwardapi.go:170-230, projected.go:186-245): build the files first (a
// missing source leaves no half-made volume), make the folder as their
// wrapped emptyDir does (on disk for configMap, a tmpfs for the others:
// secrets never touch the node's disk), write the files with upstream's
// AtomicWriter (..data symlink swapped in one rename: a container sees
// the old files or the new, never a mix) and give them to the fsGroup.
// At each sync the payload is built again; the writer writes only if it
// changed, which is how the volume follows its ConfigMap.
func (m *Manager) setUpAtomic(pod *v1.Pod, plugin, name string, medium v1.StorageMedium, build func(fsUser *int64) (payload, error)) (volume, error) {
	fsUser := volumeutil.FsUserFrom(pod)
	files, err := build(fsUser)
	if err != nil {
		return volume{}, err
	}
	dir := m.volumeDir(pod.UID, plugin, name)
	if medium == v1.StorageMediumMemory && m.root {
		err = m.setupTmpfs(dir, nil)
	} else {
		err = setupDir(dir)
	}
	if err != nil {
		return volume{}, err
	}
	if err := volumeutil.MakeNestedMountpoints(name, dir, *pod); err != nil {
		return volume{}, err
	}
	w, err := volumeutil.NewAtomicWriter(dir, fmt.Sprintf("pod %s/%s volume %s", pod.Namespace, pod.Name, name))
	if err != nil {
		return volume{}, err
	}
	// setPerms runs once the new files are in place, before they become
	// visible (atomic_writer.go:139-268).
	setPerms := func(string) error { return m.ownership(dir, pod, true) }
	if err := w.Write(files, setPerms); err != nil {
		return volume{}, fmt.Errorf("write files: %w", err)
	}
	return volume{path: dir, readOnly: true}, nil
}

// configMapPayload: the ConfigMap's keys (or the items asked for) as
// files; a ConfigMap that does not exist is an empty volume if optional
// (configmap.go:189-203, MakePayload :263).
func (m *Manager) configMapPayload(pod *v1.Pod, src *v1.ConfigMapVolumeSource) (payload, error) {
	optional := src.Optional != nil && *src.Optional
	cm, err := m.o.Objects.ConfigMaps.GetConfigMap(pod.Namespace, src.Name)
	if err != nil {
		if !apierrors.IsNotFound(err) || !optional {
			return nil, fmt.Errorf("configmap %q: %w", src.Name, err)
		}
		cm = &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: src.Name}}
	}
	return configmap.MakePayload(src.Items, cm, src.DefaultMode, optional)
}

// secretPayload is configMapPayload for a Secret (secret.go:185-199, :259).
func (m *Manager) secretPayload(pod *v1.Pod, src *v1.SecretVolumeSource) (payload, error) {
	optional := src.Optional != nil && *src.Optional
	s, err := m.o.Objects.Secrets.GetSecret(pod.Namespace, src.SecretName)
	if err != nil {
		if !apierrors.IsNotFound(err) || !optional {
			return nil, fmt.Errorf("secret %q: %w", src.SecretName, err)
		}
		s = &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: src.SecretName}}
	}
	return secret.MakePayload(src.Items, s, src.DefaultMode, optional)
}

// downwardAPIPayload is upstream's downwardapi.CollectData: the pod's
// metadata fields and its containers' resources as files.
func (m *Manager) downwardAPIPayload(pod *v1.Pod, items []v1.DownwardAPIVolumeFile, defaultMode *int32) (payload, error) {
	return downwardapi.CollectData(items, pod, volumeHost{m: m}, defaultMode)
}

// volumeHost is the one method of volume.VolumeHost that CollectData
// calls (downwardapi.go:263: a resourceFieldRef whose container has no
// limit gets the node's allocatable). The embedded interface stays nil:
// CollectData calls no other method at v1.36.3.
type volumeHost struct {
	kubevolume.VolumeHost
	m *Manager
}

func (h volumeHost) GetNodeAllocatable() (v1.ResourceList, error) {
	if h.m.o.NodeAllocatable == nil {
		return nil, errors.New("this node does not know its allocatable resources (resourceFieldRef)")
	}
	return h.m.o.NodeAllocatable()
}

// projectedPayload is projected.go's collectData (:247-420) for the
// sources this node has: secret, configMap, downwardAPI and
// serviceAccountToken. ClusterTrustBundle and PodCertificate need
// informers and a signer this node does not run: refused by name.
func (m *Manager) projectedPayload(pod *v1.Pod, volName string, src *v1.ProjectedVolumeSource, fsUser *int64) (payload, error) {
	if src.DefaultMode == nil {
		return nil, errors.New("no defaultMode used, not even the default value for it")
	}
	out := payload{}
	var errs []error
	add := func(p payload, err error) {
		if err != nil {
			errs = append(errs, err)
			return
		}
		for k, v := range p {
			out[k] = v
		}
	}
	for _, s := range src.Sources {
		switch {
		case s.Secret != nil:
			add(m.secretPayload(pod, &v1.SecretVolumeSource{SecretName: s.Secret.Name, Items: s.Secret.Items, DefaultMode: src.DefaultMode, Optional: s.Secret.Optional}))
		case s.ConfigMap != nil:
			add(m.configMapPayload(pod, &v1.ConfigMapVolumeSource{LocalObjectReference: s.ConfigMap.LocalObjectReference, Items: s.ConfigMap.Items, DefaultMode: src.DefaultMode, Optional: s.ConfigMap.Optional}))
		case s.DownwardAPI != nil:
			add(m.downwardAPIPayload(pod, s.DownwardAPI.Items, src.DefaultMode))
		case s.ServiceAccountToken != nil:
			add(m.tokenPayload(pod, s.ServiceAccountToken, *src.DefaultMode, fsUser))
		case s.ClusterTrustBundle != nil:
			errs = append(errs, errors.New("projected clusterTrustBundle is not supported on this node"))
		case s.PodCertificate != nil:
			errs = append(errs, errors.New("projected podCertificate is not supported on this node"))
		}
	}
	return out, errors.Join(errs...)
}

// tokenPayload asks for a token bound to the pod (projected.go:320-350):
// only this pod's objects may then use it, and it dies with the pod. The
// node may ask only for pods bound to it (the Node authorizer and
// NodeRestriction check the boundObjectRef). With a fsUser or fsGroup the
// file is 0600, the fsGroup's ownership makes it 0640.
func (m *Manager) tokenPayload(pod *v1.Pod, tp *v1.ServiceAccountTokenProjection, mode int32, fsUser *int64) (payload, error) {
	if m.o.Tokens == nil {
		return nil, errors.New("projected serviceAccountToken: this node has no token manager")
	}
	if fsUser != nil || (pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.FSGroup != nil) {
		mode = 0o600
	}
	var auds []string
	if tp.Audience != "" {
		auds = []string{tp.Audience}
	}
	tr, err := m.o.Tokens.GetServiceAccountToken(pod.Namespace, pod.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			Audiences:         auds,
			ExpirationSeconds: tp.ExpirationSeconds,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("service account token for %s/%s: %w", pod.Namespace, pod.Spec.ServiceAccountName, err)
	}
	return payload{tp.Path: {Data: []byte(tr.Status.Token), Mode: mode, FsUser: fsUser}}, nil
}

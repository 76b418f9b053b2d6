package podconfig

import (
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/apis/core/helper"
	_ "k8s.io/kubernetes/pkg/apis/core/install" // the core API in legacyscheme, with its defaults
	corev1 "k8s.io/kubernetes/pkg/apis/core/v1"
	"k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/pkg/features"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
	"k8s.io/kubernetes/pkg/util/hash"
)

// MaxManifestSize is the largest manifest file read (maxConfigLength,
// pkg/kubelet/config/common.go:52).
const MaxManifestSize = 10 << 20

// StaticPodName is the name a static pod gets on node nodeName: the
// manifest's name with the node's appended, so the same manifest on many
// nodes makes distinct mirror pods (generatePodName, common.go:56-58).
func StaticPodName(name, nodeName string) string {
	return fmt.Sprintf("%s-%s", name, strings.ToLower(nodeName))
}

// DecodeManifest turns the content of one manifest file (YAML or JSON, one
// Pod) into the pod the kubelet runs, as tryDecodeSinglePod and
// applyDefaults do for the file source (pkg/kubelet/config/common.go:
// 60-105, 116-179, Kubernetes v1.36.3):
//
//   - decoded through the internal API type, so the API's defaults apply
//     exactly as for a pod sent to the apiserver (restartPolicy Always,
//     dnsPolicy ClusterFirst, imagePullPolicy, terminationGracePeriod…);
//   - UID: when the manifest has none, the hash of the decoded pod, the
//     node name and the file name — so every edit of the file makes a new
//     UID, and the kubelet sees a new pod (REMOVE + ADD), never an UPDATE;
//   - name NAME-NODE (StaticPodName), namespace "default" if empty,
//     spec.nodeName set, the config.hash annotation = the UID, a
//     toleration of every NoExecute taint (a node problem must not evict
//     a static pod), phase Pending;
//   - validated as the apiserver validates a create (ValidatePodCreate),
//     and refused if it references other API objects (a Secret, a
//     ConfigMap, a service account…): a static pod runs without the
//     apiserver, so it may not depend on it (PreventStaticPodAPIReferences,
//     beta and on in 1.36).
//
// The config.source and config.seen annotations are the source's
// business: Files adds them.
func DecodeManifest(data []byte, filename, nodeName string) (*v1.Pod, error) {
	// JSON is valid YAML, so this works for both (common.go:117-118).
	js, err := utilyaml.ToJSON(data)
	if err != nil {
		return nil, err
	}
	obj, err := runtime.Decode(legacyscheme.Codecs.UniversalDecoder(), js)
	if err != nil {
		return nil, err
	}
	pod, ok := obj.(*api.Pod)
	if !ok {
		return nil, fmt.Errorf("invalid pod: the manifest is a %T, not a Pod", obj)
	}
	if pod.Name == "" {
		return nil, errors.New("invalid pod: name is needed for the pod")
	}
	applyFileDefaults(pod, filename, nodeName)
	opts := podutil.GetValidationOptionsFromPodSpecAndMeta(&pod.Spec, nil, &pod.ObjectMeta, nil)
	if errs := validation.ValidatePodCreate(pod, opts); len(errs) > 0 {
		return nil, fmt.Errorf("invalid pod: %v", errs.ToAggregate())
	}
	if utilfeature.DefaultFeatureGate.Enabled(features.PreventStaticPodAPIReferences) {
		_, resource, err := podutil.HasAPIObjectReference(pod)
		if err != nil {
			return nil, err
		}
		if resource != "" {
			return nil, fmt.Errorf("static pods may not reference %s", resource)
		}
	}
	out := &v1.Pod{}
	if err := corev1.Convert_core_Pod_To_v1_Pod(pod, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// applyFileDefaults is applyDefaults (common.go:60-105) for a file.
func applyFileDefaults(pod *api.Pod, filename, nodeName string) {
	if pod.UID == "" {
		// The hash of the decoded pod, then where it came from: the same
		// manifest in another file or on another node is another pod.
		// DeepHashObject resets the hasher, so the source goes in after.
		h := fnv.New128a()
		hash.DeepHashObject(h, pod)
		fmt.Fprintf(h, "host:%s", nodeName)
		fmt.Fprintf(h, "file:%s", filename)
		pod.UID = types.UID(hex.EncodeToString(h.Sum(nil)))
	}
	pod.Name = StaticPodName(pod.Name, nodeName)
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	pod.Spec.NodeName = nodeName
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	// The mirror pod carries this hash (config.mirror): the kubelet
	// compares the two to tell whether its mirror pod is up to date.
	pod.Annotations[kubetypes.ConfigHashAnnotationKey] = string(pod.UID)
	helper.AddOrUpdateTolerationInPod(pod, &api.Toleration{Operator: api.TolerationOpExists, Effect: api.TaintEffectNoExecute})
	pod.Status.Phase = api.PodPending
}

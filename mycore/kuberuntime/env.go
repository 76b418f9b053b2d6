package kuberuntime

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/kubernetes/pkg/api/v1/resource"
	podshelper "k8s.io/kubernetes/pkg/apis/core/pods"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
	"k8s.io/kubernetes/pkg/fieldpath"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/envvars"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
	"k8s.io/kubernetes/third_party/forked/golang/expansion"
)

// EnvSources is where a container's environment comes from besides the
// pod itself. Every field may be nil: a pod that needs it then gets a clear
// error (CreateContainerConfigError), as upstream's kubelet without a
// client does ("no kubeClient defined").
type EnvSources struct {
	// Objects gets the config maps and secrets of envFrom and
	// valueFrom (mycore/configsecret: one GET as the node).
	Objects ObjectGetter
	// Services lists the services the node sees, all namespaces (a
	// client-go lister over the node's watch); ServicesSynced tells
	// whether the watch listed them once. nil Services: no service
	// variables at all, as a kubelet without an apiserver
	// (kl.serviceLister == nil, kubelet_pods.go:694-697).
	Services       ServiceLister
	ServicesSynced func() bool
	// NodeAllocatable is the node's status.allocatable: the limit of a
	// container that sets none, for resourceFieldRef
	// (defaultPodLimitsForDownwardAPI, kubelet_resources.go:35-75).
	NodeAllocatable func() (v1.ResourceList, error)
}

// ObjectGetter is what mycore/configsecret.Managers does.
type ObjectGetter interface {
	GetConfigMap(namespace, name string) (*v1.ConfigMap, error)
	GetSecret(namespace, name string) (*v1.Secret, error)
}

// ServiceLister is client-go's corelisters.ServiceLister, the part used.
type ServiceLister interface {
	List(selector labels.Selector) ([]*v1.Service, error)
}

// masterServices are the services of the default namespace every pod
// gets variables for, whatever its enableServiceLinks (kubelet_pods.go:680).
var masterServices = map[string]bool{"kubernetes": true}

// serviceEnv is getServiceEnvVarMap (kubelet_pods.go:682-731): the
// variables of the services of namespace ns (when enableServiceLinks) and
// of default/kubernetes (always), by envvars.FromServices.
func (s *EnvSources) serviceEnv(ns string, enableServiceLinks bool) (map[string]string, error) {
	m := map[string]string{}
	if s == nil || s.Services == nil {
		return m, nil
	}
	services, err := s.Services.List(labels.Everything())
	if err != nil {
		return m, errors.New("failed to list services when setting up env vars")
	}
	byName := map[string]*v1.Service{}
	for _, svc := range services {
		if !v1helper.IsServiceIPSet(svc) { // ClusterIP None or empty
			continue
		}
		if svc.Namespace == v1.NamespaceDefault && masterServices[svc.Name] {
			if _, ok := byName[svc.Name]; !ok {
				byName[svc.Name] = svc
			}
		} else if svc.Namespace == ns && enableServiceLinks {
			byName[svc.Name] = svc
		}
	}
	list := make([]*v1.Service, 0, len(byName))
	for _, svc := range byName {
		list = append(list, svc)
	}
	for _, e := range envvars.FromServices(list) {
		m[e.Name] = e.Value
	}
	return m, nil
}

// containerEnv is makeEnvironmentVariables (kubelet_pods.go:734-989) without
// fileKeyRef (EnvFiles, which needs the pod's volumes):
//
//  1. the service variables (serviceEnv), once the node's watch of
//     services listed them (static pods do not wait);
//  2. envFrom, in order, each config map's or secret's keys (with the
//     prefix) — a later source overwrites an earlier one's key; an
//     optional source that does not exist is skipped;
//  3. env, in order: a value has its $(VAR) expanded against what is
//     defined so far (envFrom, earlier env) and then the service
//     variables; else its valueFrom is read (fieldRef, resourceFieldRef,
//     configMapKeyRef, secretKeyRef; an optional one that is missing sets
//     nothing). An env name overwrites the same envFrom name;
//  4. the service variables not already defined.
//
// Upstream appends step 2-3's variables from a map, in no fixed order; we
// keep the order they were first defined in, so the runtime's config (and a
// test) sees the same list every time. A missing config map, secret or key
// is the error upstream returns, which StartContainer reports as
// CreateContainerConfigError with this message.
func containerEnv(pod *v1.Pod, c *v1.Container, ips PodIPs, src *EnvSources) ([]kubecontainer.EnvVar, error) {
	enableServiceLinks := true
	if pod.Spec.EnableServiceLinks != nil {
		enableServiceLinks = *pod.Spec.EnableServiceLinks
	}
	// Upstream refuses a nil enableServiceLinks (:736-738); the apiserver
	// and the static-pod defaulting always set it, so only a pod built in
	// Go and handed straight to the runtime manager (lab 12) lacks it: we
	// take the API's default, true.
	if src != nil && src.Services != nil && !kubetypes.IsStaticPod(pod) && src.ServicesSynced != nil && !src.ServicesSynced() {
		return nil, errors.New("services have not yet been read at least once, cannot construct envvars")
	}
	serviceEnv, err := src.serviceEnv(pod.Namespace, enableServiceLinks)
	if err != nil {
		return nil, err
	}

	env := newOrderedEnv()
	configMaps := map[string]*v1.ConfigMap{}
	secrets := map[string]*v1.Secret{}
	getConfigMap := func(name string) (*v1.ConfigMap, error) {
		if cm, ok := configMaps[name]; ok {
			return cm, nil
		}
		if src == nil || src.Objects == nil {
			return nil, fmt.Errorf("couldn't get configMap %v/%v, no kubeClient defined", pod.Namespace, name)
		}
		cm, err := src.Objects.GetConfigMap(pod.Namespace, name)
		if err == nil {
			configMaps[name] = cm
		}
		return cm, err
	}
	getSecret := func(name string) (*v1.Secret, error) {
		if s, ok := secrets[name]; ok {
			return s, nil
		}
		if src == nil || src.Objects == nil {
			return nil, fmt.Errorf("couldn't get secret %v/%v, no kubeClient defined", pod.Namespace, name)
		}
		s, err := src.Objects.GetSecret(pod.Namespace, name)
		if err == nil {
			secrets[name] = s
		}
		return s, err
	}

	// Step 2: envFrom (:772-840). Map keys come in random order; sorted,
	// the list is the same every time (a later source still wins).
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			ref := from.ConfigMapRef
			cm, err := getConfigMap(ref.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && ref.Optional != nil && *ref.Optional {
					continue
				}
				return nil, err
			}
			for _, k := range sortedKeys(cm.Data) {
				env.set(from.Prefix+k, cm.Data[k])
			}
		case from.SecretRef != nil:
			ref := from.SecretRef
			s, err := getSecret(ref.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && ref.Optional != nil && *ref.Optional {
					continue
				}
				return nil, err
			}
			for _, k := range sortedKeys(s.Data) {
				env.set(from.Prefix+k, string(s.Data[k]))
			}
		}
	}

	// Step 3: env (:852-966).
	mapping := expansion.MappingFuncFor(env.values, serviceEnv)
	for _, e := range c.Env {
		val := e.Value
		if val != "" {
			val = expansion.Expand(val, mapping)
		} else if e.ValueFrom != nil {
			var skip bool
			var err error
			switch from := e.ValueFrom; {
			case from.FieldRef != nil:
				val, err = podFieldValue(from.FieldRef, pod, ips)
			case from.ResourceFieldRef != nil:
				val, err = resourceFieldValue(from.ResourceFieldRef, pod, c, src)
			case from.ConfigMapKeyRef != nil:
				val, skip, err = configMapKeyValue(from.ConfigMapKeyRef, pod.Namespace, getConfigMap)
			case from.SecretKeyRef != nil:
				val, skip, err = secretKeyValue(from.SecretKeyRef, pod.Namespace, getSecret)
			case from.FileKeyRef != nil:
				err = fmt.Errorf("container %s env %s: fileKeyRef (env from a file of a volume) is not supported on this node", c.Name, e.Name)
			}
			if err != nil {
				return nil, err // as upstream: the apiserver's message, e.g. configmaps "x" not found
			}
			if skip {
				continue
			}
		}
		env.set(e.Name, val)
	}

	// Step 4: the service variables not already defined (:973-987).
	out := env.list()
	for _, k := range sortedKeys(serviceEnv) {
		if _, ok := env.values[k]; !ok {
			out = append(out, kubecontainer.EnvVar{Name: k, Value: serviceEnv[k]})
		}
	}
	return out, nil
}

func configMapKeyValue(ref *v1.ConfigMapKeySelector, ns string, get func(string) (*v1.ConfigMap, error)) (string, bool, error) {
	optional := ref.Optional != nil && *ref.Optional
	cm, err := get(ref.Name)
	if err != nil {
		if apierrors.IsNotFound(err) && optional {
			return "", true, nil
		}
		return "", false, err
	}
	v, ok := cm.Data[ref.Key]
	if !ok {
		if optional {
			return "", true, nil
		}
		return "", false, fmt.Errorf("couldn't find key %v in ConfigMap %v/%v", ref.Key, ns, ref.Name)
	}
	return v, false, nil
}

func secretKeyValue(ref *v1.SecretKeySelector, ns string, get func(string) (*v1.Secret, error)) (string, bool, error) {
	optional := ref.Optional != nil && *ref.Optional
	s, err := get(ref.Name)
	if err != nil {
		if apierrors.IsNotFound(err) && optional {
			return "", true, nil
		}
		return "", false, err
	}
	v, ok := s.Data[ref.Key]
	if !ok {
		if optional {
			return "", true, nil
		}
		return "", false, fmt.Errorf("couldn't find key %v in Secret %v/%v", ref.Key, ns, ref.Name)
	}
	return string(v), false, nil
}

// podFieldValue is podFieldSelectorRuntimeValue (kubelet_pods.go:993-1036):
// the node knows the IPs, pkg/fieldpath the rest (labels['k'],
// annotations['k'], spec.restartPolicy, status.phase …). The apiserver
// defaults an empty apiVersion to v1; a pod built in Go may leave it out.
func podFieldValue(fs *v1.ObjectFieldSelector, pod *v1.Pod, ips PodIPs) (string, error) {
	version := fs.APIVersion
	if version == "" {
		version = "v1"
	}
	path, _, err := podshelper.ConvertDownwardAPIFieldLabel(version, fs.FieldPath, "")
	if err != nil {
		return "", err
	}
	podIPs := sortedPodIPs(ips.PodIPs, ips.hostIPs())
	switch path {
	case "spec.nodeName":
		if pod.Spec.NodeName == "" {
			return ips.NodeName, nil
		}
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		host := ips.hostIPs()
		if len(host) == 0 {
			return "", errors.New("the node has no IP (status.hostIP)")
		}
		if path == "status.hostIP" {
			return host[0], nil
		}
		return strings.Join(host, ","), nil
	case "status.podIP":
		if len(podIPs) > 0 {
			return podIPs[0], nil
		}
		return "", nil
	case "status.podIPs":
		return strings.Join(podIPs, ","), nil
	}
	return fieldpath.ExtractFieldPathAsString(pod, path)
}

// resourceFieldValue is containerResourceRuntimeValue on the pod and
// container whose missing limits are the node's allocatable
// (kubelet_pods.go:947-955, kubelet_resources.go:35-75, with the
// pod-level limits, PodLevelResources, in between).
func resourceFieldValue(fs *v1.ResourceFieldSelector, pod *v1.Pod, c *v1.Container, src *EnvSources) (string, error) {
	if src == nil || src.NodeAllocatable == nil {
		return "", errors.New("resourceFieldRef needs the node's allocatable, which this node was not given")
	}
	allocatable, err := src.NodeAllocatable()
	if err != nil {
		return "", fmt.Errorf("failed to find node object, expected a node: %w", err)
	}
	allocatable = podLevelAllocatable(pod, allocatable)
	outPod := pod.DeepCopy()
	for i := range outPod.Spec.Containers {
		resource.MergeContainerResourceLimits(&outPod.Spec.Containers[i], allocatable)
	}
	outContainer := c.DeepCopy()
	resource.MergeContainerResourceLimits(outContainer, allocatable)
	if fs.ContainerName == "" {
		return resource.ExtractContainerResourceValue(fs, outContainer)
	}
	return resource.ExtractResourceValueByContainerName(fs, outPod, fs.ContainerName)
}

// orderedEnv is upstream's tmpEnv map with the order of first definition.
type orderedEnv struct {
	values map[string]string
	order  []string
}

func newOrderedEnv() *orderedEnv { return &orderedEnv{values: map[string]string{}} }

func (o *orderedEnv) set(k, v string) {
	if _, ok := o.values[k]; !ok {
		o.order = append(o.order, k)
	}
	o.values[k] = v
}

func (o *orderedEnv) list() []kubecontainer.EnvVar {
	out := make([]kubecontainer.EnvVar, 0, len(o.order))
	for _, k := range o.order {
		out = append(out, kubecontainer.EnvVar{Name: k, Value: o.values[k]})
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

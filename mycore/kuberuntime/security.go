package kuberuntime

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/util/format"
	"k8s.io/kubernetes/pkg/security/apparmor"
	"k8s.io/kubernetes/pkg/securitycontext"
)

// A pod's securityContext reaches the process only through the CRI: the
// runtime (containerd) applies what the kubelet puts into
// LinuxSandboxSecurityContext and LinuxContainerSecurityContext, and knows
// nothing of the rest. So a field this node does not map is refused
// (unsupportedSecurity), never dropped: a pod that asked for a restriction
// must not run without it, as root with the default capabilities.

// ImageUser is the user an image's config says it runs as, from the
// runtime's ImageStatus: a UID, or a name only the runtime can resolve (in
// the image's /etc/passwd), or neither — then root.
type ImageUser struct {
	UID  *int64
	Name string
}

// imageUser is getImageUser (helpers.go:148-168).
func (m *Manager) imageUser(ctx context.Context, a about, image string) (ImageUser, error) {
	img, err := m.cri.ImageStatus(ctx, a, image)
	if err != nil {
		return ImageUser{}, fmt.Errorf("ImageStatus %s (for the image's user): %w", image, err)
	}
	if img != nil {
		if img.Uid != nil {
			uid := img.Uid.Value
			return ImageUser{UID: &uid}, nil
		}
		if img.Username != "" {
			return ImageUser{Name: img.Username}, nil
		}
	}
	// An image that names no user runs as root (helpers.go:166-167).
	return ImageUser{UID: new(int64)}, nil
}

// containerSecurity is determineEffectiveSecurityContext
// (security_context.go:30-96) and convertToRuntimeSecurityContext
// (:99-122): the pod's fields, overridden by the container's
// (securitycontext.DetermineEffectiveSecurityContext), as the CRI's
// container security context. It first refuses what this node does not
// map and a runAsNonRoot container that would run as root.
func (m *Manager) containerSecurity(pod *v1.Pod, c *v1.Container, user ImageUser) (*runtimeapi.LinuxContainerSecurityContext, error) {
	if err := unsupportedSecurity(pod, c); err != nil {
		return nil, err
	}
	if err := verifyRunAsNonRoot(pod, c, user); err != nil {
		return nil, err
	}
	eff := securitycontext.DetermineEffectiveSecurityContext(pod, c)
	sc := &runtimeapi.LinuxContainerSecurityContext{
		NamespaceOptions: namespaceOptions(pod),
		Capabilities:     capabilities(eff.Capabilities),
		Privileged:       eff.Privileged != nil && *eff.Privileged,
		ReadonlyRootfs:   eff.ReadOnlyRootFilesystem != nil && *eff.ReadOnlyRootFilesystem,
		// allowPrivilegeEscalation: false is no_new_privs: setuid binaries
		// and file capabilities no longer raise privileges (util.go:179-191).
		NoNewPrivs: securitycontext.AddNoNewPrivileges(eff),
		// Always sent (security_context.go:92-93): containerd 2.x starts
		// from empty masked and read-only path lists and applies only
		// these, so without them /proc/kcore is readable and /proc/sys
		// writable by a root container.
		// SELinux labels are the runtime's to apply, as the real kubelet
		// leaves them (security_context.go:106): containerd labels the
		// process and its files where SELinux is enabled and ignores them
		// where it is not, as on these machines.
		SelinuxOptions: seLinuxOption(eff.SELinuxOptions),
		MaskedPaths:    securitycontext.ConvertToRuntimeMaskedPaths(eff.ProcMount),
		ReadonlyPaths:  securitycontext.ConvertToRuntimeReadonlyPaths(eff.ProcMount),
	}
	if eff.RunAsUser != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *eff.RunAsUser}
	} else {
		// The image's user, as upstream passes it (security_context.go:53-59):
		// the runtime then need not look it up again.
		if user.UID != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *user.UID}
		}
		sc.RunAsUsername = user.Name
	}
	if eff.RunAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *eff.RunAsGroup}
	}
	var err error
	if sc.SupplementalGroups, sc.SupplementalGroupsPolicy, err = supplementalGroups(pod.Spec.SecurityContext); err != nil {
		return nil, fmt.Errorf("container %s: %w", c.Name, err)
	}
	if sc.Seccomp, err = seccompProfile(pod, c, m.seccompRoot); err != nil {
		return nil, fmt.Errorf("container %s: %w", c.Name, err)
	}
	return sc, nil
}

// sandboxSecurity is the security part of generatePodSandboxLinuxConfig
// (kuberuntime_sandbox.go:163-230): the pause container runs as the pod's
// user and groups, under the runtime's default seccomp profile whatever
// the pod says (:170-174, kubernetes#84623), and privileged if any
// container is — containerd refuses a privileged container in an
// unprivileged sandbox. The pod-level fields this node refuses are refused
// for each container (unsupportedSecurity), where the reason shows in the
// pod's status.
func sandboxSecurity(pod *v1.Pod) *runtimeapi.LinuxSandboxSecurityContext {
	sc := &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions: namespaceOptions(pod),
		Privileged:       kubecontainer.HasPrivilegedContainer(pod),
		Seccomp:          &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
	}
	psc := pod.Spec.SecurityContext
	if psc == nil {
		return sc
	}
	if psc.RunAsUser != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
	}
	if psc.RunAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
	}
	// the runtime labels the sandbox with it where SELinux is on
	// (kuberuntime_sandbox.go:220-227)
	sc.SelinuxOptions = seLinuxOption(psc.SELinuxOptions)
	// An unknown policy: upstream fails the sandbox (:212-216); here every
	// container is refused with that error instead, so the sandbox gets
	// the default policy.
	sc.SupplementalGroups, sc.SupplementalGroupsPolicy, _ = supplementalGroups(psc)
	return sc
}

// supplementalGroups is fsGroup then supplementalGroups, and the policy
// (security_context.go:66-87, kuberuntime_sandbox.go:201-218). fsGroup
// also owns the pod's volumes: mycore/volumes does that, with
// fsGroupChangePolicy.
func supplementalGroups(psc *v1.PodSecurityContext) ([]int64, runtimeapi.SupplementalGroupsPolicy, error) {
	if psc == nil {
		return nil, runtimeapi.SupplementalGroupsPolicy_Merge, nil
	}
	var groups []int64
	if psc.FSGroup != nil {
		groups = append(groups, *psc.FSGroup)
	}
	groups = append(groups, psc.SupplementalGroups...)
	policy := runtimeapi.SupplementalGroupsPolicy_Merge
	if p := psc.SupplementalGroupsPolicy; p != nil {
		v, ok := runtimeapi.SupplementalGroupsPolicy_value[string(*p)]
		if !ok {
			return nil, 0, fmt.Errorf("unsupported supplementalGroupsPolicy: %s", *p)
		}
		policy = runtimeapi.SupplementalGroupsPolicy(v)
	}
	return groups, policy, nil
}

// RuntimeFeatures is the features part of the runtime manager's Status
// (toKubeRuntimeStatus, helpers.go:261-267): what the runtime's CRI Status
// says it implements, nil when it says nothing — containerd 1.6 and 1.7,
// whose CRI predates the field. The kubelet keeps them from each status
// check (updateRuntimeUp, kubelet.go:3279) and admits a pod with
// supplementalGroupsPolicy: Strict only if they include it
// (lifecycle/predicate.go:316-346, via node.status.features,
// nodestatus/setters.go:431-447): a runtime that does not know the field
// drops it, and the container would get the image's groups besides the
// pod's — the Merge the pod refused.
func (m *Manager) RuntimeFeatures(ctx context.Context) (*kubecontainer.RuntimeFeatures, error) {
	resp, err := m.cri.Status(ctx, onNode)
	if err != nil {
		return nil, fmt.Errorf("CRI Status: %w", err)
	}
	f := resp.GetFeatures()
	if f == nil {
		return nil, nil
	}
	return &kubecontainer.RuntimeFeatures{
		SupplementalGroupsPolicy:  f.SupplementalGroupsPolicy,
		UserNamespacesHostNetwork: f.UserNamespacesHostNetwork,
	}, nil
}

// capabilities is convertToRuntimeCapabilities (security_context.go:139-156).
// "ALL" and names without CAP_ are the runtime's to expand.
func capabilities(c *v1.Capabilities) *runtimeapi.Capability {
	if c == nil {
		return nil
	}
	out := &runtimeapi.Capability{}
	for _, v := range c.Add {
		out.AddCapabilities = append(out.AddCapabilities, string(v))
	}
	for _, v := range c.Drop {
		out.DropCapabilities = append(out.DropCapabilities, string(v))
	}
	return out
}

// seccompProfile is getSeccompProfile (helpers.go:303-324) with the
// kubelet's default seccompDefault: false — the container's field, else
// the pod's, else Unconfined — and fieldSeccompProfile (:271-301) for each.
// A Localhost profile is a file under root, the kubelet's seccomp folder
// (ROOT/seccomp, kuberuntime_manager.go:266); with no folder it is refused.
func seccompProfile(pod *v1.Pod, c *v1.Container, root string) (*runtimeapi.SecurityProfile, error) {
	var p *v1.SeccompProfile
	switch {
	case c.SecurityContext != nil && c.SecurityContext.SeccompProfile != nil:
		p = c.SecurityContext.SeccompProfile
	case pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.SeccompProfile != nil:
		p = pod.Spec.SecurityContext.SeccompProfile
	}
	switch {
	case p == nil:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	case p.Type == v1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	case p.Type == v1.SeccompProfileTypeLocalhost:
		if p.LocalhostProfile == nil || *p.LocalhostProfile == "" {
			return nil, fmt.Errorf("localhostProfile must be set if seccompProfile type is Localhost")
		}
		if root == "" {
			return nil, fmt.Errorf("seccompProfile type Localhost: this node has no seccomp profile folder (kuberuntime.Options.SeccompProfileRoot); use RuntimeDefault")
		}
		// The API server checks this (ValidateLocalDescendingPath), a
		// static pod's file is not checked by anyone: the profile must not
		// name a file outside the folder.
		if !filepath.IsLocal(*p.LocalhostProfile) {
			return nil, fmt.Errorf("seccompProfile localhostProfile %q must be a path inside the node's seccomp folder", *p.LocalhostProfile)
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: filepath.Join(root, *p.LocalhostProfile)}, nil
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
}

// seLinuxOption is convertToRuntimeSELinuxOption (security_context.go:125-137).
func seLinuxOption(o *v1.SELinuxOptions) *runtimeapi.SELinuxOption {
	if o == nil {
		return nil
	}
	return &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
}

// unsupportedSecurity refuses what this node does not pass to the runtime,
// in the way containerEnv refuses an env source it cannot fill: the
// container does not start and its status says why.
func unsupportedSecurity(pod *v1.Pod, c *v1.Container) error {
	var set []string
	// windowsOptions are not refused: they are Windows's, and a Linux
	// kubelet never reads them (the sandbox's Windows config is made only
	// when runtime.GOOS == "windows", kuberuntime_sandbox.go:144-150, and
	// the container's in kuberuntime_container_windows.go, built for
	// Windows only). Upstream's e2e registry pod sets them on every OS
	// (test/e2e/framework/registry/registry.go:126-129).
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.AppArmorProfile != nil {
			set = append(set, "spec.securityContext.appArmorProfile")
		}
	}
	if pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers {
		set = append(set, "spec.hostUsers: false (a user namespace)")
	}
	if csc := c.SecurityContext; csc != nil {
		if csc.AppArmorProfile != nil {
			set = append(set, "securityContext.appArmorProfile")
		}
		// The API server may store "Default" explicitly; it is what we do.
		if csc.ProcMount != nil && *csc.ProcMount != v1.DefaultProcMount {
			set = append(set, "securityContext.procMount: "+string(*csc.ProcMount))
		}
	}
	// Fields set above are covered; this catches the deprecated annotation
	// (apparmor/helpers.go:54-70).
	if len(set) == 0 && apparmor.GetProfile(pod, c) != nil {
		set = append(set, "the AppArmor annotation "+v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+c.Name)
	}
	if len(set) == 0 {
		return nil
	}
	return fmt.Errorf("container %s: %s: not supported on this node, and running without it would drop what the pod asked for", c.Name, strings.Join(set, ", "))
}

// verifyRunAsNonRoot is security_context_others.go:34-69: with
// runAsNonRoot, the container's user (its runAsUser, else the image's)
// must be a known UID other than 0. A user name cannot be checked before
// the runtime resolves it, so it is refused too.
func verifyRunAsNonRoot(pod *v1.Pod, c *v1.Container, user ImageUser) error {
	eff := securitycontext.DetermineEffectiveSecurityContext(pod, c)
	if eff.RunAsNonRoot == nil || !*eff.RunAsNonRoot {
		return nil
	}
	if eff.RunAsUser != nil {
		if *eff.RunAsUser == 0 {
			return fmt.Errorf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", format.Pod(pod), c.Name)
		}
		return nil
	}
	switch {
	case user.UID == nil && user.Name != "":
		return fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)", user.Name, format.Pod(pod), c.Name)
	case user.UID != nil && *user.UID == 0:
		return fmt.Errorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", format.Pod(pod), c.Name)
	case user.UID != nil:
		if errs := validation.IsValidUserID(*user.UID); len(errs) > 0 {
			return fmt.Errorf("container has runAsNonRoot and image has an invalid user id (%d). (Must be 1-(%d)): %s (pod: %q, container: %s)",
				*user.UID, math.MaxInt32, strings.Join(errs, "; "), format.Pod(pod), c.Name)
		}
	}
	return nil
}

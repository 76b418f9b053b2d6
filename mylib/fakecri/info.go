package fakecri

import (
	"context"
	"encoding/json"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Version answers the kubelet's first call. RuntimeApiVersion "v1" is what
// makes the kubelet (and crictl) accept us as a CRI v1 runtime.
func (r *Runtime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{
		Version:           "0.1.0", // version of the kubelet runtime API, as containerd reports
		RuntimeName:       r.opts.runtimeName,
		RuntimeVersion:    r.opts.runtimeVersion,
		RuntimeApiVersion: "v1",
	}, nil
}

// Status reports RuntimeReady and NetworkReady (the kubelet marks the node
// NotReady if either is false; SetRuntimeCondition flips them), the
// runtime handlers, the runtime's features (the kubelet admits a pod with
// supplementalGroupsPolicy: Strict only if it reports that one) and, when
// verbose, a JSON summary crictl info prints.
func (r *Runtime) Status(_ context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	types := slices.Sorted(maps.Keys(r.conditions))
	conds := make([]*runtimeapi.RuntimeCondition, 0, len(types))
	for _, t := range types {
		c := r.conditions[t]
		conds = append(conds, &runtimeapi.RuntimeCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
	}
	handlers := []*runtimeapi.RuntimeHandler{{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{}}}
	for _, h := range r.opts.handlers {
		handlers = append(handlers, &runtimeapi.RuntimeHandler{Name: h, Features: &runtimeapi.RuntimeHandlerFeatures{}})
	}
	resp := &runtimeapi.StatusResponse{
		Status:          &runtimeapi.RuntimeStatus{Conditions: conds},
		RuntimeHandlers: handlers,
		Features:        &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: r.opts.supplementalGroupsPolicy},
	}
	if req.GetVerbose() {
		running := 0
		for _, c := range r.containers {
			if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
				running++
			}
		}
		cfg, _ := json.Marshal(map[string]any{
			"podCIDR":       r.ipam.prefix.String(),
			"cgroupDriver":  r.opts.cgroupDriver.String(),
			"pauseImage":    r.opts.pauseImage,
			"handlers":      r.opts.handlers,
			"streamingAddr": r.opts.streamingAddr,
		})
		counts, _ := json.Marshal(map[string]int{
			"sandboxes": len(r.sandboxes), "containers": len(r.containers),
			"runningContainers": running, "images": len(r.images.byID),
			"activeExecs": int(r.execs.Load()),
		})
		resp.Info = map[string]string{"config": string(cfg), "counts": string(counts)}
	}
	return resp, nil
}

// RuntimeConfig tells the kubelet which cgroup driver to use
// (KubeletCgroupDriverFromCRI).
func (r *Runtime) RuntimeConfig(context.Context, *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: r.opts.cgroupDriver}}, nil
}

// UpdateRuntimeConfig takes the node's pod CIDR, which the kubelet sends
// once the node object has one. New sandboxes get IPs from it.
func (r *Runtime) UpdateRuntimeConfig(_ context.Context, req *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	cidr := req.GetRuntimeConfig().GetNetworkConfig().GetPodCidr()
	if cidr == "" {
		return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
	}
	// The kubelet may send "v4cidr,v6cidr"; the mock is single-stack and
	// uses the first one.
	first, _, _ := strings.Cut(cidr, ",")
	a, err := newIPAM(first)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "UpdateRuntimeConfig: bad pod CIDR %q: %v", cidr, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, sb := range r.sandboxes {
		if ip, err := netip.ParseAddr(sb.ip); err == nil {
			a.used[ip] = true
		}
	}
	r.ipam = a
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}

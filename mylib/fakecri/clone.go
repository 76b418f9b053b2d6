package fakecri

import (
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The runtime never hands out pointers into its own state: callers in the
// same process could otherwise mutate it without the lock. These helpers
// deep-copy the nested messages a status carries.

func cloneNamespaceOptions(o *runtimeapi.NamespaceOption) *runtimeapi.NamespaceOption {
	if o == nil {
		return nil
	}
	return proto.Clone(o).(*runtimeapi.NamespaceOption)
}

func cloneResources(r *runtimeapi.ContainerResources) *runtimeapi.ContainerResources {
	if r == nil {
		return nil
	}
	return proto.Clone(r).(*runtimeapi.ContainerResources)
}

func cloneLinuxResources(r *runtimeapi.LinuxContainerResources) *runtimeapi.LinuxContainerResources {
	if r == nil {
		return nil
	}
	return proto.Clone(r).(*runtimeapi.LinuxContainerResources)
}

func cloneMounts(ms []*runtimeapi.Mount) []*runtimeapi.Mount {
	if len(ms) == 0 {
		return nil
	}
	out := make([]*runtimeapi.Mount, len(ms))
	for i, m := range ms {
		out[i] = proto.Clone(m).(*runtimeapi.Mount)
	}
	return out
}

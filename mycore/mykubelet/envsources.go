package mykubelet

import (
	"context"

	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"kubelet-labs/mycore/configsecret"
	"kubelet-labs/mycore/kuberuntime"
)

// services is the kubelet's service informer (kubelet.go:497-513): the
// node may list and watch every service (the Node authorizer allows it),
// for the service variables of each container's environment.
//
// Not in fleet mode (Options.Updates set): a thousand nodes would each
// watch every service, and the fleet's shared user may list only nodes. Those nodes give pods no service variables, as a kubelet without
// an apiserver (kl.serviceLister == nil, kubelet_pods.go:694-697).
type services struct {
	factory informers.SharedInformerFactory
	lister  corelisters.ServiceLister
	synced  cache.InformerSynced
}

func newServices(k *Kubelet) *services {
	if k.o.Updates != nil {
		return &services{}
	}
	f := informers.NewSharedInformerFactory(k.o.Client, 0)
	inf := f.Core().V1().Services()
	return &services{factory: f, lister: inf.Lister(), synced: inf.Informer().HasSynced}
}

// run watches until ctx ends, then waits for the watch to stop.
func (s *services) run(ctx context.Context) {
	if s.factory == nil {
		return
	}
	s.factory.Start(ctx.Done())
	<-ctx.Done()
	s.factory.Shutdown()
}

// envSources is where the runtime manager reads envFrom and valueFrom:
// config maps and secrets by one GET as the node (mycore/configsecret, shared with the volumes), the
// services from the informer, the node's allocatable from its object
// (getNodeAnyWay, kubelet_getters.go).
func (k *Kubelet) envSources() *kuberuntime.EnvSources {
	src := &kuberuntime.EnvSources{
		Objects:         configsecret.New(k.o.Client),
		NodeAllocatable: nodeAllocatable(k.o.Client, k.o.NodeName),
	}
	if k.services.lister != nil { // a nil lister in the interface would not be nil
		src.Services, src.ServicesSynced = k.services.lister, k.services.synced
	}
	return src
}

package labnode

import (
	"context"
	"time"

	"k8s.io/client-go/rest"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/mycore/node"
)

// Join is step 2 alone, for the labs whose node is only the join and what
// they build on it (08 static pods, 09 the pod manager, 10 the pod
// workers, 13 a virtual kubelet): the join as lab 05 makes it, in the
// node's folder of the state folder, its steps printed indented under one
// line. From the Joined it returns on, the lab is system:node:NAME; Stop
// ends the heartbeats.
func Join(ctx context.Context, admin *rest.Config, lab, name string, timeout time.Duration, out *labenv.Printer) (*node.Joined, error) {
	out.Printf("joining %s as node %s", admin.Host, name)
	dir, err := labenv.NodeDir(name)
	if err != nil {
		return nil, err
	}
	return node.Join(ctx, node.JoinOptions{Admin: admin, Dir: dir, Name: name, Lab: lab, Timeout: timeout, Log: out.Indented()})
}

package labnode

import (
	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/liveview"
	"kubelet-labs/mycore/journal"
)

// view starts the live view of the node's journal j.
func (n *Node) view(o Options, j *journal.Bus, out *labenv.Printer) error {
	v, err := ServeView(o.View, o.Lab, o.Name, j, out)
	if err != nil {
		return err
	}
	n.View = v
	n.closers = append(n.closers, func() { _ = v.Close() })
	return nil
}

// ServeView starts the live view (internal/liveview) of node's journal on
// addr, as lab lab's, and prints its URL: labs 10, 12, 17 and 18 open it
// the same way. Close it when the lab ends.
func ServeView(addr, lab, node string, j *journal.Bus, out *labenv.Printer) (*liveview.Server, error) {
	v, err := liveview.Start(liveview.Options{Address: addr, Title: "labs/" + lab + " · node " + node, Journal: j})
	if err != nil {
		return nil, err
	}
	out.Printf("view      %s   (the live view: this node's pods, workers, PLEG and probes, in a browser)", v.URL())
	if fp := v.Fingerprint(); fp != "" {
		out.Printf("          TLS, a certificate made now: SHA-256 fingerprint %s", fp)
	}
	return v, nil
}

package labnode

import (
	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/liveview"
)

// view starts the live view of the node's journal and prints its URL.
func (n *Node) view(o Options, out *labenv.Printer) error {
	v, err := liveview.Start(liveview.Options{Address: o.View, Title: "labs/" + o.Lab + " · node " + o.Name, Journal: n.Kubelet.Journal()})
	if err != nil {
		return err
	}
	n.View = v
	n.closers = append(n.closers, func() { _ = v.Close() })
	out.Printf("view      %s   (the live view: this node's pods, workers, PLEG and probes, in a browser)", v.URL())
	if fp := v.Fingerprint(); fp != "" {
		out.Printf("          TLS, a certificate made now: SHA-256 fingerprint %s", fp)
	}
	return nil
}

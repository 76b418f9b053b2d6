package labnode

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"time"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labruntime"
	"kubelet-labs/mycore/mykubelet"
)

// Defaults are a node without a server, with the kubelet's own periods,
// for a lab whose flags are the node's (labs 12, 17) to start from.
func Defaults(lab, name string) Options {
	return Options{Lab: lab, Name: name, Timeout: 2 * time.Minute, Kubelet: mykubelet.Options{
		RelistPeriod: mykubelet.DefaultRelistPeriod, BackOffInitial: mykubelet.DefaultBackOffInitial,
		BackOffMax: mykubelet.DefaultBackOffMax, GCPeriod: mykubelet.DefaultGCPeriod}}
}

// Register adds the flags of a node without a server to fs, with o's
// values as their defaults (a lab sets its node name and back-off first).
// Labs 14 and 18 have flags of their own: the server's, and other words.
func (o *Options) Register(fs *flag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, labenv.KubeconfigUsage)
	fs.StringVar(&o.Name, "node-name", o.Name, "name of the node to join; pods bound to it (spec.nodeName) run here")
	o.Runtime.Register(fs, labruntime.Containerd)
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "how long the join may take (certificate issued, node Ready)")
	k := &o.Kubelet
	fs.DurationVar(&k.RelistPeriod, "relist-period", k.RelistPeriod, "PLEG relist period (kubelet: 1s)")
	fs.DurationVar(&k.BackOffInitial, "backoff-initial", k.BackOffInitial, "crash-loop back-off of the first restart that waits (kubelet: 10s)")
	fs.DurationVar(&k.BackOffMax, "backoff-max", k.BackOffMax, "longest crash-loop back-off (kubelet: 5m)")
	fs.DurationVar(&k.GCPeriod, "gc-period", k.GCPeriod, "how often dead containers and sandboxes of pods that are over are removed (kubelet: 1m)")
	RegisterView(fs, &o.View)
}

// ViewOff is the --view value that serves no live view.
const ViewOff = "off"

// RegisterView adds --view, the live view's address, with *addr as its
// default: labs 12, 17 and 18 share it.
func RegisterView(fs *flag.FlagSet, addr *string) {
	def := *addr
	if def == "" {
		def = ViewOff
	}
	*addr = def
	fs.StringVar(addr, "view", def, "serve the live view of this node (its pods, workers, PLEG and probes, in a browser) on this host:port and print its URL; 127.0.0.1:0 picks a free port on loopback; another host serves TLS; off: none")
}

// CheckView refuses a --view that is neither off nor host:port, before
// anything starts (the view itself starts once the node has joined).
func CheckView(v string) error {
	if v == ViewOff || v == "" {
		return nil
	}
	if _, port, err := net.SplitHostPort(v); err != nil || port == "" {
		return fmt.Errorf("--view %q: want host:port (e.g. 127.0.0.1:0, a free port on loopback) or off", v)
	}
	return nil
}

// ViewAddress is a --view value as Options.View takes it ("" for off).
func ViewAddress(v string) string {
	if v == ViewOff {
		return ""
	}
	return v
}

// Check refuses the flags Register added when the node could not run with
// them, before anything starts. (mykubelet would take a zero period for
// its default; a flag set to zero is refused instead.)
func (o *Options) Check() error {
	k := o.Kubelet
	if o.Timeout <= 0 || k.RelistPeriod <= 0 || k.BackOffInitial <= 0 || k.GCPeriod <= 0 || k.BackOffMax < k.BackOffInitial {
		return errors.New("--timeout, --relist-period, --backoff-initial and --gc-period must be positive, --backoff-max at least --backoff-initial")
	}
	if err := CheckView(o.View); err != nil {
		return err
	}
	return labenv.CheckNodeName(o.Name)
}

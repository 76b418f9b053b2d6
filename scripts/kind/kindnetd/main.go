// Command kindnetd is kubelet-labs' compact kindnetd: the network daemon
// kind's default CNI DaemonSet runs on every node of a kind cluster. It
// mirrors kind's images/kindnetd at commit 619609ae (sigs.k8s.io/kind,
// Copyright 2019 The Kubernetes Authors, Apache License 2.0), which the Go
// module proxy does not serve, minus its network policy controller (kind's
// default CNI manifest runs it fail-open; the labs use no NetworkPolicy).
//
// Every 10 seconds, and whenever a Node changes, it
//   - writes this node's CNI config (cni.go), so containerd gives pods IPs
//     from the node's spec.podCIDRs;
//   - routes every other node's podCIDRs via that node's InternalIP
//     (routes.go), so pods reach pods on other nodes;
//
// and every 60 seconds it makes sure pod traffic leaving the pod subnet is
// masqueraded (masq.go).
//
// Its input is the environment kind's manifest gives it (sigs.k8s.io/kind
// @v0.32.0 pkg/build/nodeimage/const_cni.go:113-122 and
// pkg/cluster/internal/create/actions/installcni/cni.go:91-117): HOST_IP,
// POD_IP, POD_SUBNET and CONTROL_PLANE_ENDPOINT.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

const version = "kubelet-labs-kindnetd (mirrors kind kindnetd 619609ae)"

// config is what the DaemonSet's environment says.
type config struct {
	hostIP     netip.Addr     // this node: the Node whose InternalIP it is
	podSubnets []netip.Prefix // the cluster's pod network: not masqueraded
	endpoint   string         // host:port of the apiserver, "" if not given
}

// parseConfig mirrors kind main.go:136-177, but refuses what kind would
// only notice later (or panic on) with one line that names the variable.
func parseConfig(getenv func(string) string) (config, error) {
	var c config
	var err error
	if c.hostIP, err = netip.ParseAddr(getenv("HOST_IP")); err != nil {
		return c, fmt.Errorf("HOST_IP=%q is not an IP address (kind's manifest sets it from status.hostIP)", getenv("HOST_IP"))
	}
	subnets := strings.TrimSpace(getenv("POD_SUBNET"))
	if subnets == "" {
		return c, fmt.Errorf("POD_SUBNET is not set (kind's manifest sets it to the cluster's podSubnet, e.g. 10.244.0.0/16)")
	}
	for _, s := range strings.Split(subnets, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return c, fmt.Errorf("POD_SUBNET=%q: %q is not a CIDR", subnets, s)
		}
		c.podSubnets = append(c.podSubnets, p.Masked())
	}
	c.endpoint = getenv("CONTROL_PLANE_ENDPOINT")
	if _, _, err := net.SplitHostPort(c.endpoint); c.endpoint != "" && err != nil {
		return c, fmt.Errorf("CONTROL_PLANE_ENDPOINT=%q is not host:port", c.endpoint)
	}
	return c, nil
}

func main() {
	log.SetPrefix("kindnetd: ")
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println(version)
		return
	}
	if flag.NArg() > 0 {
		log.Fatalf("takes no arguments, got %q (its input is the environment: HOST_IP, POD_SUBNET, CONTROL_PLANE_ENDPOINT)", flag.Args())
	}
	cfg, err := parseConfig(os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	if podIP := os.Getenv("POD_IP"); podIP != cfg.hostIP.String() {
		// kind main.go:140-145: routes and iptables rules only matter in the node's network
		log.Printf("warning: POD_IP %q is not HOST_IP %s: kindnetd must run with hostNetwork", podIP, cfg.hostIP)
	}
	rc, err := rest.InClusterConfig()
	if err != nil {
		log.Fatalf("not in a pod: %v", err)
	}
	// kind main.go:82-84: protobuf, the cheaper encoding for the apiserver
	rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	// kind main.go:86-103: the Service IP in the in-cluster config needs
	// kube-proxy's rules, which may not be there yet: use the apiserver's
	// own address when it answers.
	if cfg.endpoint != "" && reachable(cfg.endpoint) {
		rc.Host = "https://" + cfg.endpoint
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		log.Fatalf("client for %s: %v", rc.Host, err)
	}
	log.Printf("%s: node %s, pod subnets %v, apiserver %s", version, cfg.hostIP, cfg.podSubnets, rc.Host)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	factory := informers.NewSharedInformerFactory(client, 0)
	nodes := factory.Core().V1().Nodes()
	changed := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case changed <- struct{}{}:
		default: // a pass is due already: it sees this change too
		}
	}
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: poke, UpdateFunc: func(_, n any) { poke(n) }, DeleteFunc: poke,
	}); err != nil {
		log.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), nodes.Informer().HasSynced) {
		log.Fatal("stopped before the first list of Nodes")
	}

	cni := cniWriter{path: cniConfigPath, mtu: eth0MTU()}
	// kind main.go:246-287 and masq.go:56-79: a pass every 10 s, the
	// masquerade rules every 60 s; kind gives up after 5 failed tries in a
	// row, so the kubelet restarts it and the pod shows it.
	tick, masqTick := time.NewTicker(10*time.Second), time.NewTicker(60*time.Second)
	defer tick.Stop()
	defer masqTick.Stop()
	failures, masqDue := 0, true
	for {
		err := func() error {
			if masqDue {
				if err := syncAllMasq(cfg.podSubnets); err != nil {
					return err
				}
				masqDue = false
			}
			list, err := nodes.Lister().List(labels.Everything())
			if err != nil {
				return err
			}
			return reconcile(list, cfg, &cni)
		}()
		switch {
		case err == nil:
			failures = 0
		case failures+1 >= 5:
			log.Fatalf("giving up after 5 failed passes in a row: %v", err)
		default:
			failures++
			log.Printf("error (pass %d of 5 before giving up): %v", failures, err)
		}
		select {
		case <-ctx.Done():
			log.Print("stopping: received a signal")
			return
		case <-masqTick.C:
			masqDue = true
		case <-tick.C:
		case <-changed:
		}
	}
}

// reachable mirrors kind main.go:86-103 and probeTCP (main.go:389-414):
// five tries, 1 s each, a growing pause in between.
func reachable(endpoint string) bool {
	for i := range 5 {
		c, err := net.DialTimeout("tcp", endpoint, time.Second)
		if err == nil {
			c.Close()
			return true
		}
		log.Printf("apiserver %s not reachable (try %d of 5): %v", endpoint, i+1, err)
		time.Sleep(time.Duration(i) * time.Second)
	}
	return false
}

// reconcile is one pass over the Nodes (kind main.go:290-359): this node's
// CNI config, then the routes to every other node's pods.
func reconcile(nodes []*corev1.Node, cfg config, cni *cniWriter) error {
	self := slices.IndexFunc(nodes, func(n *corev1.Node) bool { return slices.Contains(internalIPs(n), cfg.hostIP) })
	switch {
	case self < 0:
		log.Printf("no Node has InternalIP %s (HOST_IP) yet: no CNI config written", cfg.hostIP)
	case len(podCIDRs(nodes[self])) == 0:
		log.Printf("node %s has no podCIDR yet: no CNI config written", nodes[self].Name)
	default:
		cidrs := podCIDRs(nodes[self])
		if wrote, err := cni.write(cidrs); err != nil {
			return fmt.Errorf("writing %s: %w", cni.path, err)
		} else if wrote {
			log.Printf("wrote %s: node %s, pod CIDRs %v, mtu %d", cni.path, nodes[self].Name, cidrs, cni.mtu)
		}
	}
	return syncRoutes(wantRoutes(nodes, cfg.hostIP), cfg.podSubnets)
}

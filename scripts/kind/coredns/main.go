//go:build ignore

// Command coredns is CoreDNS v1.14.2 with only the plugins a kubeadm
// cluster's Corefile names, for the kind node image of kubelet-labs.
//
// Why a main of our own: upstream's main (coredns.go) imports
// core/plugin, which links every plugin of plugin.cfg, and with them the
// AWS, Azure and Google Cloud SDKs (route53, azure, clouddns) that a
// cluster DNS never uses. Here, instead:
//
//   - the imports below link only the plugins of kubeadm's Corefile
//     (k8s.io/kubernetes v1.36.3 cmd/kubeadm/app/phases/addons/dns/manifests.go:163-195:
//     errors, health, ready, kubernetes, prometheus, forward, cache, loop,
//     reload, loadbalance) plus log, which kind's users add to debug DNS;
//   - directives sets dnsserver.Directives to them, in plugin.cfg order,
//     as the generated github.com/coredns/coredns@v1.14.2
//     core/dnsserver/zdirectives.go:12-72 does for all plugins. Caddy reads
//     that variable when it loads the Corefile (core/dnsserver/register.go:21),
//     so a directive not listed here is refused as unknown, and the order is
//     the order a query passes the plugins in;
//   - `coredns -plugins` lists four more: debug, dnstap, metadata and
//     transfer register themselves because the packages above import them
//     (forward: debug, dnstap; cache, log: metadata; kubernetes:
//     transfer). They are no directive, so a Corefile naming one is refused
//     ("Unknown directive 'dnstap'") like any plugin not linked at all;
//   - main runs coremain.Run, as upstream's coredns.go:11-13 does: flags
//     (-conf, -plugins, -version), Corefile loading and signals are
//     upstream's (coremain/run.go:41-84).
//
// The file carries `//go:build ignore` because it is no part of the
// course's Go module (its imports are not in the course's go.mod):
// scripts/kind/build-go.sh builds it, as root, in a module of its own
// that requires github.com/coredns/coredns at the pinned version, naming
// this file on the command line.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	// Each import registers one plugin with Caddy in its init. The
	// package of "prometheus" is plugin/metrics (plugin.cfg:42,
	// prometheus:metrics).
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// directives are the linked plugins in the order plugin.cfg (and so
// zdirectives.go) lists them: a plugin sees a query after every plugin
// above it.
var directives = []string{
	"reload",
	"ready",
	"health",
	"prometheus",
	"errors",
	"log",
	"loadbalance",
	"cache",
	"kubernetes",
	"loop",
	"forward",
}

func main() {
	dnsserver.Directives = directives
	coremain.Run()
}

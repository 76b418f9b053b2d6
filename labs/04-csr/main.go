// Lab 04 gets a node its own client certificate through the CSR API: an
// ECDSA key, a CertificateSigningRequest for CN=system:node:NAME,
// O=system:nodes posted with a bootstrap token, approval (by the
// controller-manager, by us as admin, or by you), the issued certificate,
// and a kubeconfig that logs in as system:node:NAME.
//
//	go run ./labs/04-csr                      # auto-approved
//	go run ./labs/04-csr --approve=manual     # you run kubectl certificate approve
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"time"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/labnames"
	"kubelet-labs/mycore/bootstrap"
)

type options struct {
	kubeconfig string
	nodeName   string
	token      string
	tokenFile  string
	approve    string
	timeout    time.Duration
	// expirationSeconds is spec.expirationSeconds (0: ask for nothing).
	expirationSeconds int
}

func main() {
	var o options
	labenv.Main(labenv.Lab{
		Name: "04-csr",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.kubeconfig, "kubeconfig", "", labenv.KubeconfigUsage)
			fs.StringVar(&o.nodeName, "node-name", labnames.Node04, "the node to get a certificate for (CN=system:node:NAME)")
			labenv.RegisterTokenFlags(fs, &o.token, &o.tokenFile, "bootstrap token to request with (default: make one; in the auto-approve group only for --approve=auto)")
			fs.StringVar(&o.approve, "approve", "auto", "who approves: auto (the controller-manager, for tokens in "+bootstrap.AutoApproveGroup+"), admin (we do, like kubectl certificate approve), manual (you do)")
			fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long to wait for the certificate")
			fs.IntVar(&o.expirationSeconds, "expiration-seconds", 0, "certificate lifetime to ask for (spec.expirationSeconds; at least 600); 0 asks for nothing, as the kubelet does, and gets the signer's maximum (--cluster-signing-duration, 1 year by default)")
		},
		Check: func() error { _, err := o.check(); return err },
		Run: func(ctx context.Context, out *labenv.Printer) error {
			_, err := run(ctx, o, out)
			return err
		},
	})
}

// check refuses flags that make no sense before the cluster is contacted,
// and returns who approves.
func (o options) check() (bootstrap.ApproveMode, error) {
	mode, err := bootstrap.ParseApproveMode(o.approve)
	if err != nil {
		return mode, err
	}
	if o.timeout <= 0 {
		return mode, fmt.Errorf("--timeout=%s: give a positive duration", o.timeout)
	}
	if o.expirationSeconds < 0 || o.expirationSeconds > math.MaxInt32 {
		return mode, fmt.Errorf("--expiration-seconds=%d: want 0 (ask for nothing) or a number of seconds, at least 600", o.expirationSeconds)
	}
	if _, err := labenv.ResolveToken(o.token, o.tokenFile); err != nil {
		return mode, err
	}
	// Before any folder is made from it: "../x" would escape nodes/.
	return mode, labenv.CheckNodeName(o.nodeName)
}

func run(ctx context.Context, o options, out *labenv.Printer) (*bootstrap.JoinResult, error) {
	mode, err := o.check()
	if err != nil {
		return nil, err
	}
	token, err := labenv.ResolveToken(o.token, o.tokenFile)
	if err != nil {
		return nil, err
	}
	cfg, err := labenv.RESTConfig(ctx, o.kubeconfig)
	if err != nil {
		return nil, err
	}
	dir, err := labenv.NodeDir(o.nodeName)
	if err != nil {
		return nil, err
	}
	out.Printf("CSR for node %s at %s (approve: %s)", o.nodeName, cfg.Host, mode)
	res, err := bootstrap.Join(ctx, bootstrap.JoinOptions{
		Admin: cfg, Token: token, NodeName: o.nodeName, Dir: dir,
		Approve: mode, Timeout: o.timeout, ExpirationSeconds: int32(o.expirationSeconds),
		Force: true, // this lab is about the CSR: always ask for a new certificate
		Log:   out.Indented(),
	})
	if err != nil {
		return nil, err
	}
	c := res.Creds
	out.Printf(`look at it:
  openssl x509 -noout -subject -issuer -dates -ext extendedKeyUsage -in %s
  kubectl get csr %s
  kubectl --kubeconfig %s auth whoami`, c.CertFile, res.CSR.Name, c.Kubeconfig)
	return res, nil
}

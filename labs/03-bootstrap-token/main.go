// Lab 03 makes what a new node needs to join: a bootstrap token (a Secret
// in kube-system that the apiserver accepts as a bearer token) and the RBAC
// that lets such a token post a CSR and get it approved — then proves the
// token authenticates, with a SelfSubjectReview.
//
//	go run ./labs/03-bootstrap-token                 # new token, 1h; also in bootstrap/token (0600)
//	go run ./labs/03-bootstrap-token --token-file .labs/bootstrap/token   # check a token
package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/state"
	"kubelet-labs/mycore/bootstrap"
)

type options struct {
	kubeconfig  string
	ttl         time.Duration
	autoApprove bool
	token       string // check this token instead of making one
	tokenFile   string // or the one in this file
	description string
	// bootstrapKubeconfig is where to write the kubelet's bootstrap
	// kubeconfig; "" = bootstrap/bootstrap-kubelet.kubeconfig in the state
	// folder (.labs/ or $LABS_STATE_DIR), "-" = nowhere.
	bootstrapKubeconfig string
	// writeTokenFile is where to write the token alone, for other labs'
	// --token-file; "" = "token" beside the bootstrap kubeconfig (so a
	// kubeconfig written elsewhere, as lab 04's by-hand part does, does
	// not replace the state folder's token), or bootstrap/token in the
	// state folder when none is written; "-" = nowhere.
	writeTokenFile string
}

func main() {
	var o options
	labenv.Main(labenv.Lab{
		Name: "03-bootstrap-token",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.kubeconfig, "kubeconfig", "", labenv.KubeconfigUsage)
			fs.DurationVar(&o.ttl, "ttl", bootstrap.DefaultTTL, "how long the token lives; the controller-manager's tokencleaner deletes it afterwards")
			fs.BoolVar(&o.autoApprove, "auto-approve", true, "put the token in group "+bootstrap.AutoApproveGroup+", whose node CSRs the controller-manager approves; false = a human must approve (lab 04 --approve=manual)")
			labenv.RegisterTokenFlags(fs, &o.token, &o.tokenFile, "do not make a token: check this one and say who it authenticates as, or why not")
			fs.StringVar(&o.description, "description", "kubelet-labs lab 03", "description stored in the token's Secret")
			fs.StringVar(&o.bootstrapKubeconfig, "bootstrap-kubeconfig", "", "write the kubelet's bootstrap kubeconfig (server, CA, token; 0600) here (default: bootstrap/bootstrap-kubelet.kubeconfig in the state folder; - = do not write)")
			fs.StringVar(&o.writeTokenFile, "write-token-file", "", "write the token alone (0600) here, for the other labs' --token-file (default: token beside the bootstrap kubeconfig, i.e. bootstrap/token in the state folder; - = do not write)")
		},
		Check: func() error { return o.check() },
		Run:   func(ctx context.Context, out *labenv.Printer) error { return run(ctx, o, out) },
	})
}

// check refuses flags that make no sense before the cluster is contacted.
func (o options) check() error {
	if o.ttl <= 0 {
		return fmt.Errorf("--ttl=%s: a bootstrap token needs a positive lifetime, like 1h", o.ttl)
	}
	_, err := labenv.ResolveToken(o.token, o.tokenFile)
	return err
}

// purpose says in a few words what each bound role is for.
var purpose = map[string]string{
	bootstrap.NodeBootstrapperRole: "post CSRs",
	bootstrap.NodeClientRole:       "first client certificate auto-approved",
	bootstrap.SelfNodeClientRole:   "renewals auto-approved",
}

func run(ctx context.Context, o options, out *labenv.Printer) error {
	if err := o.check(); err != nil {
		return err // before touching the cluster
	}
	cfg, err := labenv.RESTConfig(ctx, o.kubeconfig)
	if err != nil {
		return err
	}
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	caPEM, _, err := bootstrap.ClusterCA(ctx, cfg, admin)
	if err != nil {
		return err
	}
	// What a joining node has: the server, its CA, and the token. Nothing else.
	base := rest.AnonymousClientConfig(cfg)
	base.CAData, base.CAFile = caPEM, ""

	if check, err := labenv.ResolveToken(o.token, o.tokenFile); err != nil {
		return err
	} else if check != "" {
		tok, _ := bootstrap.ParseToken(check)
		return whoami(ctx, out, base, tok, admin)
	}

	tok, err := bootstrap.CreateToken(ctx, admin, tokenOptions(o))
	if err != nil {
		return err
	}
	out.Printf("bootstrap token   %s", tok)
	// The token is a password: whoever holds it may post CSRs until it
	// expires. It is printed here (not on a command line: other users
	// see those in ps), stored in the Secret (readable by whoever may read
	// Secrets in kube-system), in the 0600 bootstrap kubeconfig and in the
	// 0600 token file: nothing pretends it is shown once.
	out.Printf("  keep it secret: it works as a password until it expires at %s (in %s); the tokencleaner deletes it then",
		tok.Expires.Local().Format("15:04:05"), time.Until(tok.Expires).Round(time.Minute))
	out.Printf("  Secret          kube-system/%s (type bootstrap.kubernetes.io/token)", tok.SecretName())
	out.Printf("  usages          %s", strings.Join(tok.Usages, ", "))
	out.Printf("  groups          %s", strings.Join(tok.Groups, ", "))

	results, err := bootstrap.EnsureNodeBootstrapRBAC(ctx, admin)
	if err != nil {
		return err
	}
	out.Printf("RBAC for joining nodes (kubeadm: phases/bootstraptoken/node/tlsbootstrap.go)")
	for _, r := range results {
		b := r.Binding
		out.Printf("  %-8s ClusterRoleBinding %s\n           group %s → ClusterRole %s (%s)",
			r.Action, b.Name, b.Subjects[0].Name, b.RoleRef.Name, purpose[b.RoleRef.Name])
	}

	created, err := bootstrap.EnsureClusterInfo(ctx, admin, cfg.Host, caPEM)
	if err != nil {
		return err
	}
	ci := "exists"
	if created {
		ci = "created"
	}
	if err := bootstrap.WaitForClusterInfoSignature(ctx, admin, tok, 15*time.Second); err != nil {
		out.Printf("cluster-info      kube-public/cluster-info %s; not signed: %v", ci, err)
	} else {
		out.Printf("cluster-info      kube-public/cluster-info %s; the bootstrapsigner signed it with this token (jws-kubeconfig-%s verified)", ci, tok.ID)
	}

	if err := whoami(ctx, out, base, tok, admin); err != nil {
		return err
	}

	kubeconfigDir := ""
	if o.bootstrapKubeconfig != "-" {
		path := o.bootstrapKubeconfig
		if path == "" {
			dir, err := state.Ensure("bootstrap")
			if err != nil {
				return err
			}
			path = dir + "/bootstrap-kubelet.kubeconfig"
		}
		if err := bootstrap.WriteBootstrapKubeconfig(path, cfg.Host, caPEM, tok); err != nil {
			return err
		}
		out.Printf("bootstrap kubeconfig  %s (0600; what the kubelet's --bootstrap-kubeconfig holds)", path)
		kubeconfigDir = filepath.Dir(path)
	}
	if o.writeTokenFile == "-" {
		out.Printf("next: go run ./labs/04-csr --token-file FILE  (FILE: the token alone, mode 0600)")
		return nil
	}
	path := o.writeTokenFile
	if path == "" {
		if kubeconfigDir == "" {
			var err error
			if kubeconfigDir, err = state.Ensure("bootstrap"); err != nil {
				return err
			}
		}
		path = filepath.Join(kubeconfigDir, "token")
	}
	if err := bootstrap.WriteTokenFile(path, tok); err != nil {
		return err
	}
	out.Printf("token file        %s (0600; for --token-file: a token on the command line is visible to every user in ps)", path)
	out.Printf("next: go run ./labs/04-csr --token-file %s", path)
	return nil
}

func tokenOptions(o options) bootstrap.TokenOptions {
	opts := bootstrap.TokenOptions{TTL: o.ttl, Description: o.description}
	if o.autoApprove {
		opts.ExtraGroups = []string{bootstrap.AutoApproveGroup}
	}
	return opts
}

func whoami(ctx context.Context, out *labenv.Printer, base *rest.Config, tok bootstrap.Token, admin kubernetes.Interface) error {
	info, err := bootstrap.AuthenticateToken(ctx, base, tok, admin, 5*time.Second)
	if err != nil {
		return err
	}
	out.Printf("SelfSubjectReview with the token (kubectl auth whoami)")
	out.Printf("  username        %s", info.Username)
	out.Printf("  groups          %s", strings.Join(info.Groups, ", "))
	return nil
}

package bootstrap

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// JoinOptions configure a TLS bootstrap.
type JoinOptions struct {
	// Admin is the kubeconfig the lab runs with: it names the server and its
	// CA, and (being admin) makes a token when Token is empty and approves
	// CSRs when Approve is ApproveAdmin. A real node has only a bootstrap
	// kubeconfig (server, CA, token); the admin part is the lab's shortcut
	// for making that token.
	Admin *rest.Config
	// Token "ID.SECRET" to bootstrap with; empty makes a new one.
	Token    string
	TokenTTL time.Duration // for a token we make; default 10m
	NodeName string
	Dir      string // credentials folder, e.g. .labs/nodes/NAME
	Approve  ApproveMode
	Timeout  time.Duration // for the certificate; default 2m
	// ExpirationSeconds is the certificate lifetime to ask for
	// (spec.expirationSeconds); 0 asks for none, as the kubelet does.
	ExpirationSeconds int32
	// Force requests a new certificate even if valid credentials exist.
	Force bool
	// Log receives one human line per step (nil: silent).
	Log func(format string, args ...any)
}

// JoinResult is what a TLS bootstrap produced.
type JoinResult struct {
	Creds    Credentials
	Cert     *x509.Certificate
	CASource string
	// Skipped: valid credentials existed, no CSR was made (the kubelet
	// skips bootstrap the same way).
	Skipped      bool
	Token        Token
	TokenCreated bool
	// TokenDeleted: the token Join made was deleted when the join ended.
	TokenDeleted bool
	tokenDropped bool // dropToken ran
	CSR          *CSRResult
	// Node is who the node's kubeconfig authenticates as.
	Node    authenticationv1.UserInfo
	Elapsed time.Duration
}

// ValidateNodeName accepts what the apiserver accepts as a Node name (a
// lowercase DNS-1123 subdomain). Labs call it before they make the node's
// state folder: a name like "../x" would otherwise name a folder outside
// nodes/.
func ValidateNodeName(name string) error {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("%q is not a valid Node name: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// Join turns a bootstrap token into node credentials: what the kubelet does
// with --bootstrap-kubeconfig before it starts (LoadClientCert in
// pkg/kubelet/certificate/bootstrap/bootstrap.go, v1.36.3).
func Join(ctx context.Context, o JoinOptions) (*JoinResult, error) {
	start := time.Now()
	logf := o.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if o.Approve == "" {
		o.Approve = ApproveAuto
	}
	if err := ValidateNodeName(o.NodeName); err != nil {
		return nil, err
	}
	if o.TokenTTL == 0 {
		o.TokenTTL = 10 * time.Minute
	}
	admin, err := kubernetes.NewForConfig(o.Admin)
	if err != nil {
		return nil, err
	}
	caPEM, caSource, err := ClusterCA(ctx, o.Admin, admin)
	if err != nil {
		return nil, err
	}
	res := &JoinResult{Creds: CredentialsIn(o.Dir), CASource: caSource}
	server := o.Admin.Host

	if !o.Force {
		cert, err := res.Creds.Check(o.NodeName, server, caPEM)
		if err == nil {
			logf("credentials %s valid until %s: no TLS bootstrap needed (the kubelet skips it too)", res.Creds.Kubeconfig, cert.NotAfter.Format(time.RFC3339))
			res.Cert, res.Skipped = cert, true
			return finish(ctx, res, start, logf)
		}
		if !errors.Is(err, ErrNoCredentials) {
			return nil, err
		}
		if err != ErrNoCredentials { // wrapped: Check says why they are not usable
			logf("credentials %s not usable (%v): bootstrapping again", res.Creds.Dir, err)
		}
	}

	// 1. the bootstrap token
	if o.Token != "" {
		if res.Token, err = ParseToken(o.Token); err != nil {
			return nil, err
		}
		if t, err := LookupToken(ctx, admin, res.Token); err == nil {
			res.Token = t
		}
	} else {
		if _, err := EnsureNodeBootstrapRBAC(ctx, admin); err != nil {
			return nil, err
		}
		opts := TokenOptions{TTL: o.TokenTTL, Description: "kubelet-labs: TLS bootstrap of node " + o.NodeName}
		if o.Approve == ApproveAuto {
			opts.ExtraGroups = []string{AutoApproveGroup}
		}
		if res.Token, err = CreateToken(ctx, admin, opts); err != nil {
			return nil, err
		}
		res.TokenCreated = true
		logf("token       created %s (expires %s, in %s)", res.Token.Redacted(), res.Token.Expires.Local().Format("15:04:05"), o.TokenTTL)
		// A token we made is ours alone (only its ID is printed) and only
		// the CSR needs it: once the join is over, with credentials or
		// without, it is deleted rather than left working until it expires.
		// A token we were given (lab 03's) is not ours to delete; kubeadm
		// keeps its tokens too, for more nodes to join with.
		defer dropToken(ctx, admin, res, logf)
	}
	base := rest.AnonymousClientConfig(o.Admin)
	base.CAData, base.CAFile = caPEM, ""
	who, err := AuthenticateToken(ctx, base, res.Token, admin, 5*time.Second)
	if err != nil {
		return nil, err
	}
	logf("token       authenticates as %s %v", who.Username, who.Groups)
	bootClient, err := kubernetes.NewForConfig(TokenConfig(base, res.Token.String()))
	if err != nil {
		return nil, err
	}

	// 2. the key: reused while its CSR is pending, as the kubelet does
	keyPEM, generated, err := keyutil.LoadOrGenerateKeyFile(res.Creds.PendingKeyFile)
	if err != nil {
		return nil, fmt.Errorf("node key: %w", err)
	}
	if generated {
		logf("key         new ECDSA P-256 key %s (0600)", res.Creds.PendingKeyFile)
	} else {
		logf("key         reusing %s from an earlier attempt", res.Creds.PendingKeyFile)
	}

	// 3. the CSR
	req := CSRRequest{Client: bootClient, KeyPEM: keyPEM, NodeName: o.NodeName, Timeout: o.Timeout, ExpirationSeconds: o.ExpirationSeconds}
	req.OnCreated = func(name string, reused bool) {
		if reused {
			logf("csr         %s found: posted by an earlier attempt with this key (the name is a hash of key, subject and usages)", name)
		} else {
			logf("csr         %s created by %s, signer kubernetes.io/kube-apiserver-client-kubelet", name, who.Username)
		}
		switch o.Approve {
		case ApproveManual:
			logf("csr         waiting for you, in another terminal:  kubectl certificate approve %s", name)
		case ApproveAuto:
			logf("csr         waiting for the controller-manager's csrapproving controller...")
		}
	}
	if o.Approve == ApproveAdmin {
		req.Approve = AdminApprover(admin)
	}
	res.CSR, err = RequestNodeCertificate(ctx, req)
	var denied *DeniedError
	if errors.As(err, &denied) {
		os.Remove(res.Creds.PendingKeyFile)
		return nil, fmt.Errorf("%w; a denied CSR stays denied: its key was discarded, so the next run makes a new key and a new CSR", err)
	}
	var timeout *TimeoutError
	if errors.As(err, &timeout) {
		switch {
		case o.Approve == ApproveAuto && !hasGroup(res.Token.Groups, AutoApproveGroup):
			return nil, fmt.Errorf("%w; the token is not in group %s, so the controller-manager does not approve its CSRs: approve it with `kubectl certificate approve %s`, or join with a token in that group", err, AutoApproveGroup, timeout.Name)
		case o.Approve == ApproveAuto:
			return nil, fmt.Errorf("%w; the token may be auto-approved, so is the controller-manager running (its csrapproving controller)?", err)
		default:
			return nil, fmt.Errorf("%w; approve it (kubectl certificate approve %s) and run again: the key in %s is kept, so the next run finds this CSR", err, timeout.Name, res.Creds.PendingKeyFile)
		}
	}
	if err != nil {
		return nil, err
	}
	logf("approved    %s", res.CSR.Approval)
	certs, err := certutil.ParseCertsPEM(res.CSR.CertPEM)
	if err != nil {
		return nil, fmt.Errorf("issued certificate: %w", err)
	}
	res.Cert = certs[0]
	if err := VerifyClientCert(res.Cert, caPEM); err != nil {
		return nil, fmt.Errorf("the issued certificate does not verify against the cluster CA: %w", err)
	}
	logf("certificate issued %s after the CSR was posted: CN=%s O=%s, valid until %s, issuer %s",
		res.CSR.Elapsed.Round(10*time.Millisecond), res.Cert.Subject.CommonName, strings.Join(res.Cert.Subject.Organization, ","),
		res.Cert.NotAfter.Format(time.RFC3339), res.Cert.Issuer.CommonName)
	logf("lifetime    %s", Lifetime(o.ExpirationSeconds, res.Cert, time.Now()))

	// 4. credentials on disk
	if err := res.Creds.Write(server, caPEM, res.CSR.CertPEM, keyPEM); err != nil {
		return nil, err
	}
	os.Remove(res.Creds.PendingKeyFile)
	logf("kubeconfig  %s (0600; verifies the server with the CA from %s)", res.Creds.Kubeconfig, caSource)
	dropToken(ctx, admin, res, logf) // before the identity line: the node needs no token from here on
	return finish(ctx, res, start, logf)
}

// dropToken deletes the bootstrap token Secret Join made, once: after the
// credentials are written, or when the join fails. It runs even if ctx
// was cancelled (Ctrl-C), for a few seconds at most; failing to delete is
// reported, not fatal: the tokencleaner deletes the token when it expires.
func dropToken(ctx context.Context, admin kubernetes.Interface, res *JoinResult, logf func(string, ...any)) {
	if !res.TokenCreated || res.tokenDropped {
		return
	}
	res.tokenDropped = true
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := admin.CoreV1().Secrets(metav1.NamespaceSystem).Delete(dctx, res.Token.SecretName(), metav1.DeleteOptions{})
	switch {
	case err == nil || apierrors.IsNotFound(err):
		res.TokenDeleted = true
		logf("token       deleted %s/%s: the join is over, nothing needs the token any more", metav1.NamespaceSystem, res.Token.SecretName())
	default:
		logf("token       could not delete %s/%s (%v); it works until %s, when the tokencleaner deletes it", metav1.NamespaceSystem, res.Token.SecretName(), err, res.Token.Expires.Local().Format("15:04:05"))
	}
}

// Lifetime explains a certificate's validity against what was asked for:
// the signer back-dates notBefore by 5 minutes for clock skew, gives
// min(requested, --cluster-signing-duration) and, for lifetimes of 8 hours
// or more, ends 5 minutes early too (pkg/controller/certificates/signer/
// signer.go, duration; authority/policies.go, apply; v1.36.3).
func Lifetime(requestedSeconds int32, cert *x509.Certificate, issued time.Time) string {
	asked := "nothing requested (the kubelet asks for nothing): the signer's maximum, --cluster-signing-duration"
	if requestedSeconds != 0 {
		asked = fmt.Sprintf("requested %s (spec.expirationSeconds=%d)", HumanDuration(time.Duration(requestedSeconds)*time.Second), requestedSeconds)
	}
	return fmt.Sprintf("%s; issued: notBefore %s (back-dated %s for clock skew), notAfter %s, %s from now",
		asked, cert.NotBefore.Local().Format("15:04:05"), issued.Sub(cert.NotBefore).Round(time.Minute),
		cert.NotAfter.Local().Format("2006-01-02 15:04:05"), HumanDuration(cert.NotAfter.Sub(issued).Round(time.Minute)))
}

// humanDuration writes long durations in days: 8759h55m0s is 364d23h55m.
func HumanDuration(d time.Duration) string {
	if d < 48*time.Hour {
		return d.String()
	}
	days := d / (24 * time.Hour)
	rest := (d - days*24*time.Hour).Round(time.Minute)
	if rest == 0 {
		return fmt.Sprintf("%dd", days)
	}
	return fmt.Sprintf("%dd%s", days, strings.TrimSuffix(rest.String(), "0s"))
}

func finish(ctx context.Context, res *JoinResult, start time.Time, logf func(string, ...any)) (*JoinResult, error) {
	cfg, err := res.Creds.RESTConfig()
	if err != nil {
		return nil, err
	}
	if res.Node, err = WhoAmI(ctx, cfg); err != nil {
		return nil, fmt.Errorf("the new node credentials do not work: %w", err)
	}
	logf("identity    %s %v", res.Node.Username, res.Node.Groups)
	res.Elapsed = time.Since(start)
	return res, nil
}

func hasGroup(groups []string, g string) bool {
	for _, x := range groups {
		if x == g {
			return true
		}
	}
	return false
}

package bootstrap

import (
	"context"
	"crypto"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/client-go/util/retry"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/klog/v2"
)

// ApproveMode says who approves a node's CSR.
type ApproveMode string

const (
	// ApproveAuto leaves it to the controller-manager's csrapproving
	// controller: it approves when the requester may create
	// certificatesigningrequests/nodeclient (our AutoApproveGroup).
	ApproveAuto ApproveMode = "auto"
	// ApproveAdmin approves with an admin client, as `kubectl certificate
	// approve NAME` does.
	ApproveAdmin ApproveMode = "admin"
	// ApproveManual waits for a human to run `kubectl certificate approve`.
	ApproveManual ApproveMode = "manual"
)

// ParseApproveMode accepts auto, admin or manual.
func ParseApproveMode(s string) (ApproveMode, error) {
	switch m := ApproveMode(s); m {
	case ApproveAuto, ApproveAdmin, ApproveManual:
		return m, nil
	}
	return "", fmt.Errorf("--approve=%q: want auto (the controller-manager approves), admin (we approve as admin) or manual (you run kubectl certificate approve)", s)
}

// CSRRequest is one node client certificate request.
type CSRRequest struct {
	// Client is the requester: the bootstrap token's identity for a first
	// certificate. CSR.spec.username records who it is, and that is what
	// the auto-approver checks.
	Client   kubernetes.Interface
	KeyPEM   []byte
	NodeName string
	// Approve, if set, is called once the CSR exists (e.g. AdminApprover).
	Approve func(ctx context.Context, name string) error
	// OnCreated is told the CSR's name, and whether an earlier CSR of the
	// same key was found and reused.
	OnCreated func(name string, reused bool)
	// Timeout for the certificate to be issued (default 2m).
	Timeout time.Duration
	// ExpirationSeconds, if not 0, is spec.expirationSeconds: the lifetime
	// asked for. The apiserver refuses less than 600; the signer gives at
	// most its --cluster-signing-duration (1 year by default). The kubelet
	// asks for nothing and gets that maximum.
	ExpirationSeconds int32
}

// CSRResult is an issued certificate.
type CSRResult struct {
	Name    string
	CertPEM []byte
	Reused  bool
	// Approval is the Approved condition's reason and message, e.g.
	// "AutoApproved: Auto approving kubelet client certificate after SubjectAccessReview."
	Approval  string
	Requester string // spec.username
	Elapsed   time.Duration
}

// DeniedError: someone denied the CSR.
type DeniedError struct{ Name, Reason, Message string }

func (e *DeniedError) Error() string {
	return fmt.Sprintf("CSR %s was denied: %s (%s)", e.Name, e.Reason, e.Message)
}

// FailedError: the signer could not issue the certificate.
type FailedError struct{ Name, Reason, Message string }

func (e *FailedError) Error() string {
	return fmt.Sprintf("CSR %s failed: %s (%s)", e.Name, e.Reason, e.Message)
}

// TimeoutError: no certificate in time.
type TimeoutError struct {
	Name   string
	Waited time.Duration
	State  string // "Pending" or "Approved, not yet issued"
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("CSR %s was not issued within %s: it is still %s", e.Name, e.Waited, e.State)
}

// RequestNodeCertificate posts a CSR for system:node:NAME with signer
// kubernetes.io/kube-apiserver-client-kubelet, lets it be approved, and
// waits for the certificate, as the kubelet's requestNodeCertificate does
// (pkg/kubelet/certificate/bootstrap/bootstrap.go:317-361, v1.36.3): the
// CSR is newNodeCSR's, posted (or found again) by client-go's
// csr.RequestCertificateWithContext, and waitForCertificate watches it
// with csrIssued deciding each state (csr_request.go).
func RequestNodeCertificate(ctx context.Context, r CSRRequest) (*CSRResult, error) {
	start := time.Now()
	if r.Timeout == 0 {
		r.Timeout = 2 * time.Minute
	}
	key, err := keyutil.ParsePrivateKeyPEM(r.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("node key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("node key of type %T cannot sign", key)
	}
	req, err := newNodeCSR(signer, r.NodeName, r.ExpirationSeconds)
	if err != nil {
		return nil, err
	}
	if req == nil || req.Name == "" || len(req.Spec.Request) == 0 {
		return nil, fmt.Errorf("newNodeCSR(%s) built no CSR with a name and a request", r.NodeName)
	}
	name := req.Name
	csrs := r.Client.CertificatesV1().CertificateSigningRequests()
	_, getErr := csrs.Get(ctx, name, metav1.GetOptions{})
	reused := getErr == nil

	// client-go's csr package logs "csr for this node already exists,
	// reusing" through the context's logger; we say it ourselves (OnCreated).
	quiet := klog.NewContext(ctx, logr.Discard())
	var lifetime *time.Duration
	if req.Spec.ExpirationSeconds != nil {
		d := csr.ExpirationSecondsToDuration(*req.Spec.ExpirationSeconds)
		lifetime = &d
	}
	reqName, uid, err := csr.RequestCertificateWithContext(quiet, r.Client, req.Spec.Request, name,
		req.Spec.SignerName, lifetime, req.Spec.Usages, key)
	if err != nil {
		if apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("%w; the requester may not create CSRs: bind ClusterRole %s to it, or to group %s, which every bootstrap token is in", err, NodeBootstrapperRole, bootstrapapi.BootstrapDefaultGroup)
		}
		return nil, err
	}
	if r.OnCreated != nil {
		r.OnCreated(reqName, reused)
	}
	if r.Approve != nil {
		if err := r.Approve(ctx, reqName); err != nil {
			return nil, err
		}
	}

	wctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	certPEM, waitErr := waitForCertificate(wctx, r.Client, reqName, uid)

	// Read the final state once, to explain a failure or show the approval.
	gctx, gcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer gcancel()
	obj, getErr := csrs.Get(gctx, reqName, metav1.GetOptions{})
	if waitErr != nil {
		if getErr == nil {
			for _, c := range obj.Status.Conditions {
				switch c.Type {
				case certificatesv1.CertificateDenied:
					return nil, &DeniedError{Name: reqName, Reason: c.Reason, Message: c.Message}
				case certificatesv1.CertificateFailed:
					return nil, &FailedError{Name: reqName, Reason: c.Reason, Message: c.Message}
				}
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if wctx.Err() != nil {
			state := "Pending (nobody approved it)"
			if getErr == nil && approved(obj) {
				state = "Approved but not issued (is the controller-manager's csrsigning controller running with --cluster-signing-cert-file?)"
			}
			return nil, &TimeoutError{Name: reqName, Waited: r.Timeout, State: state}
		}
		return nil, fmt.Errorf("wait for CSR %s: %w", reqName, waitErr)
	}
	res := &CSRResult{Name: reqName, CertPEM: certPEM, Reused: reused, Elapsed: time.Since(start)}
	if getErr == nil {
		res.Requester = obj.Spec.Username
		for _, c := range obj.Status.Conditions {
			if c.Type == certificatesv1.CertificateApproved {
				res.Approval = c.Reason + ": " + c.Message
			}
		}
	}
	return res, nil
}

// waitForCertificate watches the CSR until csrIssued says the wait is over,
// as client-go's WaitForCertificate does (k8s.io/client-go v0.36.3
// util/certificate/csr/csr.go:179-319) for the certificates/v1 API, the
// only one a v1.36 apiserver serves (v1beta1 CSRs went in v1.22). Its
// decision on each state is csrIssued, the stage's function.
func waitForCertificate(ctx context.Context, client kubernetes.Interface, name string, uid types.UID) ([]byte, error) {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	csrs := client.CertificatesV1().CertificateSigningRequests()
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return csrs.List(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return csrs.Watch(ctx, o)
		},
	}, client)
	var cert []byte
	// The informer logs "context deadline exceeded" on a timeout; our
	// caller's error says more.
	quiet := klog.NewContext(ctx, logr.Discard())
	_, err := watchtools.UntilWithSync(quiet, lw, &certificatesv1.CertificateSigningRequest{}, nil, func(ev watch.Event) (bool, error) {
		switch ev.Type {
		case watch.Added, watch.Modified:
		case watch.Deleted:
			return false, fmt.Errorf("csr %q was deleted", name)
		default:
			return false, nil
		}
		obj, ok := ev.Object.(*certificatesv1.CertificateSigningRequest)
		if !ok {
			return false, fmt.Errorf("unexpected type received: %T", ev.Object)
		}
		c, done, err := csrIssued(obj, uid)
		if done {
			cert = c
		}
		return done, err
	})
	if err != nil {
		return nil, err
	}
	return cert, nil
}

func approved(c *certificatesv1.CertificateSigningRequest) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == certificatesv1.CertificateApproved && cond.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// AdminApprover approves CSRs with admin, like `kubectl certificate approve`.
func AdminApprover(admin kubernetes.Interface) func(context.Context, string) error {
	return func(ctx context.Context, name string) error {
		return SetApproval(ctx, admin, name, true, "KubeletLabsApprove", "approved by kubelet-labs with the admin client (as kubectl certificate approve does)")
	}
}

// SetApproval adds an Approved (approve=true) or Denied condition through
// the approval subresource — what `kubectl certificate approve|deny` does
// (staging/src/k8s.io/kubectl/pkg/cmd/certificates/certificates.go).
// A CSR that already has a decision is left as it is.
func SetApproval(ctx context.Context, admin kubernetes.Interface, name string, approve bool, reason, message string) error {
	csrs := admin.CertificatesV1().CertificateSigningRequests()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := csrs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range obj.Status.Conditions {
			if c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied {
				return nil
			}
		}
		t := certificatesv1.CertificateApproved
		if !approve {
			t = certificatesv1.CertificateDenied
		}
		obj.Status.Conditions = append(obj.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: message, LastUpdateTime: metav1.Now(),
		})
		_, err = csrs.UpdateApproval(ctx, name, obj, metav1.UpdateOptions{})
		return err
	})
}

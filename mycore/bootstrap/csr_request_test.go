package bootstrap

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/keyutil"
)

// The csr-request stage's grader. Upstream: bootstrap.go is
// pkg/kubelet/certificate/bootstrap/bootstrap.go (v1.36.3), csr.go is
// k8s.io/client-go v0.36.3 util/certificate/csr/csr.go. No apiserver: a
// fake clientset plays it, and the test plays the approver and signer.

// TestNodeCSR: the object newNodeCSR builds, field by field, for an ECDSA
// and an RSA key.
func TestNodeCSR(t *testing.T) {
	ec := fixedKey(t)
	rs, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		key       crypto.Signer
		node      string
		expire    int32
		usages    []certificatesv1.KeyUsage
		wantName  string // "" = only its prefix is known
		wantExpir bool
	}{
		{name: "ECDSA key", key: ec, node: "csr-name-node", wantName: fixedKeyCSRName,
			usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}},
		{name: "RSA key asks for key encipherment too", key: rs, node: "rsa-node", expire: 3600, wantExpir: true,
			usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth, certificatesv1.UsageKeyEncipherment}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj, err := newNodeCSR(tc.key, tc.node, tc.expire)
			if err != nil || obj == nil {
				t.Fatalf("newNodeCSR(%s) = %v, %v: want the CertificateSigningRequest the kubelet posts (bootstrap.go:317-351)", tc.node, obj, err)
			}
			if obj.Spec.SignerName != "kubernetes.io/kube-apiserver-client-kubelet" {
				t.Errorf("spec.signerName = %q, want kubernetes.io/kube-apiserver-client-kubelet: the kubelet asks that signer for its client certificate (bootstrap.go:351), the one the csrapproving controller auto-approves", obj.Spec.SignerName)
			}
			if !slices.Equal(obj.Spec.Usages, tc.usages) {
				t.Errorf("spec.usages = %v, want %v: digital signature and client auth, plus key encipherment for an RSA key only (bootstrap.go:332-338)", obj.Spec.Usages, tc.usages)
			}
			block, _ := pem.Decode(obj.Spec.Request)
			if block == nil || block.Type != "CERTIFICATE REQUEST" {
				t.Fatalf("spec.request is not a PEM CERTIFICATE REQUEST (%.40q): make it with certutil.MakeCSR (bootstrap.go:327); client-go's parseCSR refuses anything else (csr.go:372-378)", obj.Spec.Request)
			}
			req, err := x509.ParseCertificateRequest(block.Bytes)
			if err != nil {
				t.Fatalf("spec.request does not parse: %v", err)
			}
			if err := req.CheckSignature(); err != nil {
				t.Errorf("spec.request signature: %v: the request is signed by the node's key (certutil.MakeCSR)", err)
			}
			if cn, o := req.Subject.CommonName, req.Subject.Organization; cn != "system:node:"+tc.node || !slices.Equal(o, []string{"system:nodes"}) {
				t.Errorf("request subject CN=%q O=%v, want CN=system:node:%s O=[system:nodes]: the Node authorizer reads the node from CN, O makes it a member of system:nodes (bootstrap.go:318-321)", cn, o, tc.node)
			}
			pub, _ := x509.MarshalPKIXPublicKey(tc.key.Public())
			if got, _ := x509.MarshalPKIXPublicKey(req.PublicKey); string(got) != string(pub) {
				t.Errorf("the request's public key is not the node's: sign it with the key given")
			}
			want := tc.wantName
			if want == "" {
				want, _ = NodeCSRName(tc.key.Public(), NodeSubject(tc.node), tc.usages)
			}
			if obj.Name != want || !strings.HasPrefix(obj.Name, "node-csr-") {
				t.Errorf("metadata.name = %q, want %q: the kubelet names the CSR with digestedName of the public key, subject and usages (bootstrap.go:346,368-398), so a restarted kubelet finds its own CSR again", obj.Name, want)
			}
			switch {
			case tc.wantExpir && (obj.Spec.ExpirationSeconds == nil || *obj.Spec.ExpirationSeconds != tc.expire):
				t.Errorf("spec.expirationSeconds = %v, want %d: a requested lifetime becomes spec.expirationSeconds (csr.go:77-79)", obj.Spec.ExpirationSeconds, tc.expire)
			case !tc.wantExpir && obj.Spec.ExpirationSeconds != nil:
				t.Errorf("spec.expirationSeconds = %d, want unset: the kubelet asks for no lifetime (bootstrap.go:351 passes nil) and gets the signer's maximum", *obj.Spec.ExpirationSeconds)
			}
			if obj.Spec.Username != "" || len(obj.Spec.Groups) > 0 {
				t.Errorf("spec.username/groups = %q/%v, want empty: the apiserver fills them with the requester's identity (csr.go:63)", obj.Spec.Username, obj.Spec.Groups)
			}
		})
	}
}

func cond(t certificatesv1.RequestConditionType, reason string) certificatesv1.CertificateSigningRequestCondition {
	return certificatesv1.CertificateSigningRequestCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: reason + " by the test"}
}

// TestCSRIssued: the wait's decision on each state of the CSR.
func TestCSRIssued(t *testing.T) {
	const uid = types.UID("uid-1")
	certPEM := []byte("-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n")
	approved := cond(certificatesv1.CertificateApproved, "AutoApproved")
	for _, tc := range []struct {
		name    string
		uid     types.UID
		conds   []certificatesv1.CertificateSigningRequestCondition
		cert    []byte
		done    bool
		errWith string // "" = no error
		why     string
	}{
		{name: "pending: keep waiting", uid: uid,
			why: "with no condition the CSR waits for an approver (csr.go:258-278 returns false, nil)"},
		{name: "approved, not yet signed: keep waiting", uid: uid, conds: []certificatesv1.CertificateSigningRequestCondition{approved},
			why: "approved is not issued: the signer has not written status.certificate yet (csr.go:270-277)"},
		{name: "signed but not approved: keep waiting", uid: uid, cert: certPEM,
			why: "a certificate counts only on an Approved CSR (csr.go:270-271)"},
		{name: "approved and signed: done, with the certificate", uid: uid, conds: []certificatesv1.CertificateSigningRequestCondition{approved}, cert: certPEM, done: true,
			why: "Approved and status.certificate not empty ends the wait with that certificate (csr.go:270-274)"},
		{name: "denied: error with the reason", uid: uid, conds: []certificatesv1.CertificateSigningRequestCondition{cond(certificatesv1.CertificateDenied, "NotMyNode")}, errWith: "NotMyNode",
			why: "a Denied condition ends the wait with an error giving its reason and message (csr.go:260-261)"},
		{name: "failed: error with the reason", uid: uid, conds: []certificatesv1.CertificateSigningRequestCondition{approved, cond(certificatesv1.CertificateFailed, "SignerValidationFailure")}, errWith: "SignerValidationFailure",
			why: "a Failed condition (the signer refused) ends the wait with an error giving its reason (csr.go:263-264)"},
		{name: "another CSR of the same name: error", uid: "uid-2", conds: []certificatesv1.CertificateSigningRequestCondition{approved}, cert: certPEM, errWith: "UID",
			why: "a CSR with another UID is not ours — ours was deleted and someone posted a new one: error \"changed UIDs\" (csr.go:255-256)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &certificatesv1.CertificateSigningRequest{
				ObjectMeta: metav1.ObjectMeta{Name: "node-csr-x", UID: tc.uid},
				Status:     certificatesv1.CertificateSigningRequestStatus{Conditions: tc.conds, Certificate: tc.cert},
			}
			cert, done, err := csrIssued(obj, uid)
			if done != tc.done {
				t.Errorf("csrIssued: done = %v, want %v: %s", done, tc.done, tc.why)
			}
			if tc.done && string(cert) != string(certPEM) {
				t.Errorf("csrIssued: certificate = %q, want status.certificate: %s", cert, tc.why)
			}
			switch {
			case tc.errWith == "" && err != nil:
				t.Errorf("csrIssued: error %v, want none: %s", err, tc.why)
			case tc.errWith != "" && (err == nil || !strings.Contains(err.Error(), tc.errWith)):
				t.Errorf("csrIssued: error %v, want one that says %q: %s", err, tc.errWith, tc.why)
			}
		})
	}
}

// TestRequestNodeCertificateWatch: the whole request against a fake
// apiserver — the CSR is posted, approved, then signed while we watch.
func TestRequestNodeCertificateWatch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		deny   bool
		wantOK bool
	}{
		{name: "approved, then signed while watching", wantOK: true},
		{name: "denied while watching", deny: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
			if err != nil {
				t.Fatal(err)
			}
			client := fake.NewClientset()
			gvr := certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests")
			// The apiserver sets the UID and the requester on create.
			client.PrependReactor("create", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
				obj := a.(k8stesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest)
				obj.UID = "csr-uid"
				obj.Spec.Username = "system:bootstrap:abcdef"
				return false, nil, nil
			})
			certPEM := []byte("-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n")
			var posted *certificatesv1.CertificateSigningRequest
			// Once the wait's watch is open, the signer (or an admin) acts.
			client.PrependWatchReactor("certificatesigningrequests", func(a k8stesting.Action) (bool, watch.Interface, error) {
				w, err := client.Tracker().Watch(gvr, "")
				if err != nil {
					return true, nil, err
				}
				o, err := client.Tracker().Get(gvr, "", posted.Name)
				if err != nil {
					return true, nil, err
				}
				c := o.(*certificatesv1.CertificateSigningRequest).DeepCopy()
				if tc.deny {
					c.Status.Conditions = append(c.Status.Conditions, cond(certificatesv1.CertificateDenied, "NotMyNode"))
				} else {
					c.Status.Certificate = certPEM
				}
				if err := client.Tracker().Update(gvr, c, ""); err != nil {
					return true, nil, err
				}
				return true, w, nil
			})
			res, err := RequestNodeCertificate(context.Background(), CSRRequest{
				Client: client, KeyPEM: keyPEM, NodeName: "watch-node",
				// Not a measurement: the fake answers in milliseconds; this
				// only bounds a csrIssued that never ends the wait.
				Timeout: 30 * time.Second,
				Approve: func(ctx context.Context, name string) error {
					o, err := client.Tracker().Get(gvr, "", name)
					if err != nil {
						return err
					}
					posted = o.(*certificatesv1.CertificateSigningRequest)
					if tc.deny {
						return nil
					}
					return SetApproval(ctx, client, name, true, "AutoApproved", "approved by the test")
				},
			})
			if posted == nil {
				t.Fatalf("RequestNodeCertificate: %v; no CSR was posted: it posts newNodeCSR's object (bootstrap.go:351)", err)
			}
			if posted.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
				t.Errorf("posted CSR signer %q, want %s (bootstrap.go:351)", posted.Spec.SignerName, certificatesv1.KubeAPIServerClientKubeletSignerName)
			}
			if !tc.wantOK {
				var denied *DeniedError
				if !errors.As(err, &denied) || denied.Reason != "NotMyNode" {
					t.Errorf("RequestNodeCertificate on a CSR denied while watching = %v, %v; want a DeniedError with reason NotMyNode: a Denied condition ends the wait (csr.go:260-261)", res, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("RequestNodeCertificate = %v; want the certificate once the CSR is approved and signed (csr.go:270-274)", err)
			}
			if string(res.CertPEM) != string(certPEM) {
				t.Errorf("certificate = %q, want the CSR's status.certificate (csr.go:273)", res.CertPEM)
			}
			if res.Approval != "AutoApproved: approved by the test" {
				t.Errorf("Approval = %q, want the Approved condition's reason: message", res.Approval)
			}
		})
	}
}

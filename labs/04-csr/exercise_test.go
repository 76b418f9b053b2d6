package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kubelet-labs/internal/labenv"
	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/bootstrap"
)

// answer is your prediction (README, Exercise). Read digestedName and
// LoadClientCert in pkg/kubelet/certificate/bootstrap/bootstrap.go and
// RequestCertificate in k8s.io/client-go/util/certificate/csr/csr.go
// (v1.36.3), fill in every field, then run: make check LAB=04 EXERCISE=1.
// The test runs the lab against a real control plane, as you would, and
// compares what the apiserver holds with what you wrote.
var answer = struct {
	// The lab runs twice with --approve=manual --timeout=2s for one node,
	// and nobody approves. How many CSRs for that node exist after the
	// second run?
	CSRsAfterTwoRuns int
	// Then nodes/NAME/kubelet-client.key.tmp is deleted and the lab runs
	// a third time. How many CSRs for the node now?
	CSRsAfterThirdRun int
	// The first run's CSR is posted again (the same request: same key,
	// same subject) under another metadata.name, as hand-node-2 in the
	// README. Does the apiserver "accept" it or "refuse" it?
	SameKeyOtherName string
}{
	CSRsAfterTwoRuns:  0,
	CSRsAfterThirdRun: 0,
	SameKeyOtherName:  "",
}

func TestExercise(t *testing.T) {
	testenv.Exercise(t)
	if answer.CSRsAfterTwoRuns == 0 || answer.CSRsAfterThirdRun == 0 || answer.SameKeyOtherName == "" {
		t.Fatalf("fill in every field of answer at the top of labs/04-csr/exercise_test.go first (README, Exercise)")
	}
	ctx := context.Background()
	const node = "t04-exercise"
	o := opts(t, node, "manual")
	o.timeout = 2 * time.Second
	admin := testenv.AdminClient(t)

	first := runUnapproved(t, o, 1)
	second := runUnapproved(t, o, 2)
	afterTwo := nodeCSRs(t, admin, node)
	t.Logf("run 1 posted %s, run 2 waited for %s; CSRs of %s: %v", first, second, node, afterTwo)
	if answer.CSRsAfterTwoRuns != len(afterTwo) {
		t.Errorf("you predicted %d CSRs after two runs; the apiserver holds %d: %v. The second run kept the first one's key (kubelet-client.key.tmp), and the CSR's name is a hash of key, subject and usages, so it asked for the same name and found it",
			answer.CSRsAfterTwoRuns, len(afterTwo), afterTwo)
	}

	dir, err := labenv.NodeDir(node)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(bootstrap.CredentialsIn(dir).PendingKeyFile); err != nil {
		t.Fatalf("the pending key: %v", err)
	}
	third := runUnapproved(t, o, 3)
	afterThree := nodeCSRs(t, admin, node)
	t.Logf("run 3, with a new key, waited for %s; CSRs of %s: %v", third, node, afterThree)
	if answer.CSRsAfterThirdRun != len(afterThree) {
		t.Errorf("you predicted %d CSRs after the third run; the apiserver holds %d: %v. A new key is a new name",
			answer.CSRsAfterThirdRun, len(afterThree), afterThree)
	}

	orig, err := admin.CertificatesV1().CertificateSigningRequests().Get(ctx, first, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	copyOf := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-same-key"},
		Spec:       certificatesv1.CertificateSigningRequestSpec{Request: orig.Spec.Request, SignerName: orig.Spec.SignerName, Usages: orig.Spec.Usages},
	}
	_, err = admin.CertificatesV1().CertificateSigningRequests().Create(ctx, copyOf, metav1.CreateOptions{})
	saw := "accept"
	if err != nil {
		saw = "refuse"
		t.Logf("posting the same request as %s: %v", copyOf.Name, err)
	}
	if answer.SameKeyOtherName != saw {
		t.Errorf("you predicted the apiserver would %q the same request under another name; it did %q it: it does not compare keys, only names must be unique — it is the client that avoids duplicates, by naming the CSR after its key", answer.SameKeyOtherName, saw)
	}
}

// runUnapproved runs the lab once; nobody approves, so it must time out,
// and it returns the name of the CSR it waited for.
func runUnapproved(t *testing.T, o options, n int) string {
	t.Helper()
	var out bytes.Buffer
	_, err := run(context.Background(), o, labenv.NewPrinter(&out))
	var te *bootstrap.TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("run %d: %v, want a timeout (nobody approves)\n%s", n, err, out.String())
	}
	return te.Name
}

// nodeCSRs lists the names of the CSRs whose request is for node.
func nodeCSRs(t *testing.T, c kubernetes.Interface, node string) []string {
	t.Helper()
	list, err := c.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, csr := range list.Items {
		block, _ := pem.Decode(csr.Spec.Request)
		if block == nil {
			continue
		}
		req, err := x509.ParseCertificateRequest(block.Bytes)
		if err == nil && req.Subject.CommonName == "system:node:"+node {
			names = append(names, csr.Name)
		}
	}
	return names
}

package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"

	"kubelet-labs/internal/testenv"
	"kubelet-labs/mycore/bootstrap"
)

// answer is your prediction (README, Exercise). Read evalSecret in
// pkg/controller/bootstrap/tokencleaner.go and GetExpiration in
// k8s.io/cluster-bootstrap/util/secrets (v1.36.3), fill in every field, then
// run: make check LAB=03 EXERCISE=1. The test makes three tokens on a real
// control plane (its controller-manager runs the tokencleaner) and compares
// what happens with what you wrote.
var answer = struct {
	// A token made to expire 5 seconds from now. When is its Secret gone?
	// "seconds" (within seconds of its expiration), "minutes" (at some
	// later sweep) or "never" (the cleaner leaves it).
	Expiring string
	// A token whose Secret has no expiration at all: "deleted" or "kept"
	// (the test watches it as long as it watches the first one)?
	NoExpiration string
	// A token whose expiration is not a time: expiration=tomorrow.
	// "deleted" or "kept"?
	Unparseable string
	// Once the expiring token's Secret is gone, the lab checks it (go run
	// ./labs/03-bootstrap-token --token ...). Which reason does it give:
	// "expired" or "no such token"?
	LabSays string
	// And what HTTP status did the apiserver answer it with: 401 or 403?
	Status int
}{
	Expiring:     "",
	NoExpiration: "",
	Unparseable:  "",
	LabSays:      "",
	Status:       0,
}

func TestExercise(t *testing.T) {
	testenv.Exercise(t)
	if answer.Expiring == "" || answer.NoExpiration == "" || answer.Unparseable == "" || answer.LabSays == "" || answer.Status == 0 {
		t.Fatalf("fill in every field of answer at the top of labs/03-bootstrap-token/exercise_test.go first (README, Exercise)")
	}
	ctx := context.Background()
	cp := testenv.ControlPlane(t)
	cfg, err := cp.AdminConfig()
	if err != nil {
		t.Fatal(err)
	}
	admin := testenv.AdminClient(t)

	expiring, err := bootstrap.CreateToken(ctx, admin, bootstrap.TokenOptions{Expires: time.Now().Add(5 * time.Second), Description: "lab 03 exercise: expires in 5s"})
	if err != nil {
		t.Fatal(err)
	}
	forever := exerciseToken(t, admin, "")
	garbled := exerciseToken(t, admin, "tomorrow")
	made := time.Now()

	// Watch the three Secrets until 20 s after they were made, or 5 s
	// after the expiring one is gone.
	gone := map[string]time.Time{}
	for time.Since(made) < 20*time.Second {
		if at, ok := gone[expiring.SecretName()]; ok && time.Since(at) > 5*time.Second {
			break
		}
		for _, name := range []string{expiring.SecretName(), forever, garbled} {
			if _, seen := gone[name]; seen {
				continue
			}
			_, err := admin.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				gone[name] = time.Now()
			}
		}
		time.Sleep(100 * time.Millisecond)
	}

	var expiringSaw string
	if at, ok := gone[expiring.SecretName()]; ok {
		expiringSaw = "seconds"
		t.Logf("the token that expired at %s was deleted %s after (its Secret was made %s before its expiration)",
			expiring.Expires.Format("15:04:05"), at.Sub(expiring.Expires).Round(100*time.Millisecond), expiring.Expires.Sub(made).Round(time.Second))
	}
	switch {
	case expiringSaw == "" && answer.Expiring == "seconds":
		t.Errorf("you predicted the expiring token's Secret is gone within seconds; it was still there %s after its expiration", time.Since(expiring.Expires).Round(time.Second))
	case expiringSaw == "" && answer.Expiring != "seconds":
		t.Errorf("the expiring token's Secret was still there %s after its expiration, as you predicted (%q), but that is not what this test expects to see: the tokencleaner may be off — is the controller-manager running with --controllers=*,tokencleaner?", time.Since(expiring.Expires).Round(time.Second), answer.Expiring)
	case answer.Expiring != expiringSaw:
		t.Errorf("you predicted the expiring token's Secret goes %q; the tokencleaner deleted it %s after its expiration: evalSecret put it back in its queue with AddAfter(key, ttl), for that very moment",
			answer.Expiring, gone[expiring.SecretName()].Sub(expiring.Expires).Round(100*time.Millisecond))
	}
	compareFate(t, "a token with no expiration", answer.NoExpiration, gone, forever, "GetExpiration: a Secret without an expiration never expires")
	compareFate(t, "a token with expiration=tomorrow", answer.Unparseable, gone, garbled, "GetExpiration: an expiration that does not parse as RFC 3339 counts as expired")

	// The lab checks the expiring token now, as you would with --token.
	_, err = bootstrap.AuthenticateToken(ctx, cfg, expiring, admin, 0)
	var rejected *bootstrap.TokenRejectedError
	if !errors.As(err, &rejected) {
		t.Fatalf("the lab's check of the expired token: %v, want a refusal", err)
	}
	t.Logf("the lab says: %v", err)
	says := "no such token"
	if strings.Contains(rejected.Reason, "expired at") {
		says = "expired"
	}
	if answer.LabSays != says {
		t.Errorf("you predicted the lab says %q; it says %q: %s", answer.LabSays, says, rejected.Reason)
	}
	status := 403
	if errors.Is(err, bootstrap.ErrUnauthorized) {
		status = 401
	}
	if answer.Status != status {
		t.Errorf("you predicted HTTP %d; the apiserver answered %d: for an expired, deleted or unknown token its authenticator just says it does not know the token, so it is 401 (authentication), never 403 (authorization)", answer.Status, status)
	}
}

// exerciseToken stores a bootstrap token Secret by hand with the given
// expiration ("" = none) and returns the Secret's name; the test deletes
// it at the end if the tokencleaner did not.
func exerciseToken(t *testing.T, admin kubernetes.Interface, expiration string) string {
	t.Helper()
	raw, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := bootstrap.ParseToken(raw)
	if err != nil {
		t.Fatal(err)
	}
	data := map[string][]byte{
		bootstrapapi.BootstrapTokenIDKey:               []byte(tok.ID),
		bootstrapapi.BootstrapTokenSecretKey:           []byte(tok.Secret),
		bootstrapapi.BootstrapTokenUsageAuthentication: []byte("true"),
		bootstrapapi.BootstrapTokenDescriptionKey:      []byte(fmt.Sprintf("lab 03 exercise: expiration %q", expiration)),
	}
	if expiration != "" {
		data[bootstrapapi.BootstrapTokenExpirationKey] = []byte(expiration)
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: tok.SecretName(), Namespace: metav1.NamespaceSystem},
		Type:       bootstrapapi.SecretTypeBootstrapToken,
		Data:       data,
	}
	if _, err := admin.CoreV1().Secrets(metav1.NamespaceSystem).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().Secrets(metav1.NamespaceSystem).Delete(context.Background(), s.Name, metav1.DeleteOptions{})
	})
	return s.Name
}

// compareFate compares a prediction, "deleted" or "kept", with what
// happened to the Secret name.
func compareFate(t *testing.T, what, predicted string, gone map[string]time.Time, name, why string) {
	t.Helper()
	saw := "kept"
	if _, ok := gone[name]; ok {
		saw = "deleted"
	}
	if predicted != saw {
		t.Errorf("%s: you predicted %q; the tokencleaner %s it (watched as long as the first; %s)", what, predicted, saw, why)
	}
}

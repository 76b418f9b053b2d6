package bootstrap

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstrapsecrets "k8s.io/cluster-bootstrap/util/secrets"
)

// TokenConfig is base (same server, same trusted CA) with every credential
// removed and the bearer token put in: what a kubelet's bootstrap kubeconfig
// amounts to.
func TokenConfig(base *rest.Config, token string) *rest.Config {
	cfg := rest.AnonymousClientConfig(base)
	cfg.BearerToken = token
	return cfg
}

// WhoAmI asks the apiserver who cfg's credential is, with a
// SelfSubjectReview (`kubectl auth whoami`). A 401 comes back as an error
// that wraps ErrUnauthorized.
func WhoAmI(ctx context.Context, cfg *rest.Config) (authenticationv1.UserInfo, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return authenticationv1.UserInfo{}, err
	}
	r, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if apierrors.IsUnauthorized(err) {
		return authenticationv1.UserInfo{}, fmt.Errorf("%w: %v", ErrUnauthorized, err)
	}
	if err != nil {
		return authenticationv1.UserInfo{}, fmt.Errorf("SelfSubjectReview: %w", err)
	}
	return r.Status.UserInfo, nil
}

// ErrUnauthorized: the apiserver answered 401, it did not accept the
// credential at all (authentication failed; 403 would be authorization).
var ErrUnauthorized = errors.New("401 Unauthorized: the apiserver did not accept the credential")

// TokenRejectedError explains in words why the apiserver said 401 to a
// bootstrap token.
type TokenRejectedError struct {
	ID     string
	Reason string
}

func (e *TokenRejectedError) Error() string {
	return fmt.Sprintf("bootstrap token %s.**************** was refused with 401 Unauthorized (authentication failed: the apiserver does not accept it as anyone); why: %s", e.ID, e.Reason)
}

func (e *TokenRejectedError) Unwrap() error { return ErrUnauthorized }

// AuthenticateToken proves a token works: a SelfSubjectReview made with it
// must say system:bootstrap:ID. On a 401 it reads the token's Secret with
// admin (if not nil) to say why. The apiserver reads token Secrets through
// an informer, so a token created a moment ago may get 401 for a few
// hundred milliseconds; while the Secret says the token is good, it retries
// for up to wait.
func AuthenticateToken(ctx context.Context, base *rest.Config, tok Token, admin kubernetes.Interface, wait time.Duration) (authenticationv1.UserInfo, error) {
	cfg := TokenConfig(base, tok.String())
	deadline := time.Now().Add(wait)
	for {
		info, err := WhoAmI(ctx, cfg)
		if err == nil {
			if info.Username != tok.User() {
				return info, fmt.Errorf("the apiserver says the token is %q, expected %q", info.Username, tok.User())
			}
			return info, nil
		}
		if !errors.Is(err, ErrUnauthorized) {
			return info, err
		}
		if admin == nil {
			return info, &TokenRejectedError{ID: tok.ID, Reason: "it does not exist, its secret part is wrong, it has expired, or it is not marked usage-bootstrap-authentication=true (give an admin kubeconfig to find out which)"}
		}
		reason, valid := DiagnoseToken(ctx, admin, tok)
		if !valid || time.Now().After(deadline) {
			if valid {
				reason = "its Secret looks valid, yet the apiserver still refused it after " + wait.String() + "; is --enable-bootstrap-token-auth set on kube-apiserver?"
			}
			return info, &TokenRejectedError{ID: tok.ID, Reason: reason}
		}
		select {
		case <-ctx.Done():
			return info, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// DiagnoseToken checks a token against its Secret the way the apiserver's
// bootstrap token authenticator does
// (plugin/pkg/auth/authenticator/token/bootstrap/bootstrap.go, v1.36.3) and
// says what is wrong; valid is true when nothing is.
func DiagnoseToken(ctx context.Context, admin kubernetes.Interface, tok Token) (reason string, valid bool) {
	s, err := admin.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, tok.SecretName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("there is no Secret %s/%s: no token with ID %s exists here (never created in this cluster, or it expired and the controller-manager's tokencleaner deleted it)",
			metav1.NamespaceSystem, tok.SecretName(), tok.ID), false
	case err != nil:
		return fmt.Sprintf("it does not exist, its secret part is wrong or it has expired (reading its Secret to tell which failed: %v)", err), false
	}
	if s.DeletionTimestamp != nil {
		return "its Secret is being deleted", false
	}
	if s.Type != bootstrapapi.SecretTypeBootstrapToken {
		return fmt.Sprintf("Secret %s has type %q, not %q", s.Name, s.Type, bootstrapapi.SecretTypeBootstrapToken), false
	}
	if subtle.ConstantTimeCompare([]byte(bootstrapsecrets.GetData(s, bootstrapapi.BootstrapTokenSecretKey)), []byte(tok.Secret)) != 1 {
		return fmt.Sprintf("a token with ID %s exists, but its secret part (the 16 characters after the dot) is wrong", tok.ID), false
	}
	if exp := bootstrapsecrets.GetData(s, bootstrapapi.BootstrapTokenExpirationKey); bootstrapsecrets.HasExpired(s, time.Now()) {
		at, _ := time.Parse(time.RFC3339, exp)
		return fmt.Sprintf("it expired at %s (%s ago); make a new one",
			exp, time.Since(at).Round(time.Second)), false
	}
	if bootstrapsecrets.GetData(s, bootstrapapi.BootstrapTokenUsageAuthentication) != "true" {
		return fmt.Sprintf("its Secret does not say %s=true, so it may not be used to log in", bootstrapapi.BootstrapTokenUsageAuthentication), false
	}
	if _, err := bootstrapsecrets.GetGroups(s); err != nil {
		return fmt.Sprintf("its %s are invalid: %v", bootstrapapi.BootstrapTokenExtraGroupsKey, err), false
	}
	return "", true
}

// LookupToken fills Groups, Usages and Expires of tok from its Secret.
func LookupToken(ctx context.Context, admin kubernetes.Interface, tok Token) (Token, error) {
	s, err := admin.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, tok.SecretName(), metav1.GetOptions{})
	if err != nil {
		return tok, err
	}
	if tok.Groups, err = bootstrapsecrets.GetGroups(s); err != nil {
		return tok, err
	}
	if exp := bootstrapsecrets.GetData(s, bootstrapapi.BootstrapTokenExpirationKey); exp != "" {
		tok.Expires, _ = time.Parse(time.RFC3339, exp)
	}
	for k, v := range s.Data {
		if u, ok := strings.CutPrefix(k, bootstrapapi.BootstrapTokenUsagePrefix); ok && string(v) == "true" {
			tok.Usages = append(tok.Usages, u)
		}
	}
	sort.Strings(tok.Usages)
	return tok, nil
}

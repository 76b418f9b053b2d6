package volumes

import (
	"context"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Tokens is the kubelet's service account token manager
// (pkg/kubelet/token/token_manager.go) in a compact form: a token per
// (service account, audiences, expiration, bound pod), asked for with the
// TokenRequest API as the node, kept until 80% of its life has passed
// (or 24 h), then asked for again — the rotation a pod sees at the
// volume's next sync. Upstream's NewManager cannot be imported as it is:
// it starts a goroutine that never stops (:80, wait.Forever of its
// cleanup), one per node for the life of the process; here a pod's
// tokens are forgotten when its volumes are torn down, and expired ones
// at each request.
type Tokens struct {
	client kubernetes.Interface
	now    func() time.Time

	mu    sync.Mutex
	cache map[string]*authenticationv1.TokenRequest
}

// NewTokens returns a token cache that asks c, which should act as the
// node (the Node authorizer lets it ask only for pods bound to it).
func NewTokens(c kubernetes.Interface) *Tokens {
	return &Tokens{client: c, now: time.Now, cache: map[string]*authenticationv1.TokenRequest{}}
}

// GetServiceAccountToken is token_manager.go:104: the cached token unless
// it needs a refresh; a refresh that fails hands back the old token while
// it is still valid.
func (t *Tokens) GetServiceAccountToken(namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	key := tokenKey(namespace, name, tr)
	t.mu.Lock()
	old, ok := t.cache[key]
	t.mu.Unlock()
	if ok && !t.needsRefresh(old) {
		return old, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := t.client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, tr, metav1.CreateOptions{})
	if err != nil {
		if ok && t.now().Before(old.Status.ExpirationTimestamp.Time) {
			return old, nil
		}
		return nil, fmt.Errorf("failed to fetch token: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, v := range t.cache { // cleanup (:145), without its goroutine
		if t.now().After(v.Status.ExpirationTimestamp.Time) {
			delete(t.cache, k)
		}
	}
	t.cache[key] = got
	return got, nil
}

// DeleteServiceAccountToken forgets the tokens bound to the pod (:135).
func (t *Tokens) DeleteServiceAccountToken(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, v := range t.cache {
		if ref := v.Spec.BoundObjectRef; ref != nil && ref.UID == uid {
			delete(t.cache, k)
		}
	}
}

// needsRefresh is requiresRefresh (:174) without its jitter (which spreads
// the refreshes of thousands of pods): older than 24 h, or in the last
// 20% of its life.
func (t *Tokens) needsRefresh(tr *authenticationv1.TokenRequest) bool {
	if tr.Spec.ExpirationSeconds == nil {
		return false
	}
	exp := tr.Status.ExpirationTimestamp.Time
	ttl := time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	now := t.now()
	return now.After(exp.Add(-ttl).Add(24*time.Hour)) || now.After(exp.Add(-ttl/5))
}

// tokenKey is keyFunc (:198): what makes two requests the same token.
func tokenKey(namespace, name string, tr *authenticationv1.TokenRequest) string {
	var exp int64
	if tr.Spec.ExpirationSeconds != nil {
		exp = *tr.Spec.ExpirationSeconds
	}
	var ref authenticationv1.BoundObjectReference
	if tr.Spec.BoundObjectRef != nil {
		ref = *tr.Spec.BoundObjectRef
	}
	return fmt.Sprintf("%q/%q/%#v/%#v/%#v", name, namespace, tr.Spec.Audiences, exp, ref)
}

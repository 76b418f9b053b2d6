package bootstrap

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
)

const (
	// AutoApproveGroup is the extra group our node tokens carry. Lab 03 binds
	// certificatesigningrequests/nodeclient to it, so the controller-manager
	// auto-approves the first client certificate of a node that joins with
	// such a token. kubeadm does the same with its own group,
	// system:bootstrappers:kubeadm:default-node-token.
	//
	// Why not bind it to all of system:bootstrappers? Then every bootstrap
	// token — and any admin, who may do everything — gets its node CSRs
	// approved within a second, and there is no way left to watch a CSR wait
	// for a human (lab 04 --approve=manual). A token without this group can
	// still post CSRs; someone must approve them.
	AutoApproveGroup = "system:bootstrappers:kubelet-labs:auto-approve"

	// DefaultTTL is how long a token made by lab 03 lives. kubeadm's default
	// is 24h; a lab needs minutes. The controller-manager's tokencleaner
	// deletes the Secret when it expires.
	DefaultTTL = time.Hour
)

// DefaultUsages: authenticate to the apiserver, and sign the cluster-info
// ConfigMap (the bootstrapsigner adds a JWS made with the token).
var DefaultUsages = []string{"authentication", "signing"}

// Token is a bootstrap token: ID.SECRET. The ID is public (it names the
// Secret bootstrap-token-ID in kube-system); the secret part is the password.
type Token struct {
	ID, Secret string
	Expires    time.Time // zero: never
	// Groups the apiserver puts the token's user in (system:bootstrappers
	// plus the extra groups), as written in the Secret.
	Groups []string
	Usages []string
}

// String is the bearer token, "ID.SECRET". Print it once; never commit it.
func (t Token) String() string { return bootstraputil.TokenFromIDAndSecret(t.ID, t.Secret) }

// Redacted shows the ID only, for logs.
func (t Token) Redacted() string { return t.ID + ".****************" }

// SecretName is the Secret in kube-system that backs the token.
func (t Token) SecretName() string { return bootstraputil.BootstrapTokenSecretName(t.ID) }

// User is the user name the apiserver gives the token.
func (t Token) User() string { return bootstrapapi.BootstrapUserPrefix + t.ID }

// ParseToken checks the shape of a bootstrap token, "[a-z0-9]{6}.[a-z0-9]{16}".
func ParseToken(s string) (Token, error) {
	m := bootstraputil.BootstrapTokenRegexp.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		// No example token in the message: one that reads well gets copied
		// into a cluster, and then everybody who read it holds a password.
		return Token{}, fmt.Errorf("%q is not a bootstrap token: it must be ID.SECRET, 6 + 16 characters of [a-z0-9] joined by a dot", s)
	}
	return Token{ID: m[1], Secret: m[2]}, nil
}

// ReadTokenFile reads a bootstrap token ("ID.SECRET", surrounding
// whitespace ignored) from a file that only its owner may read and write
// (0600 or stricter). A token on the command line is seen by every user
// of the machine (ps, /proc/PID/cmdline) and stays in shell history; a
// file readable by group or others is no better, so it is refused. The
// mode is that of the file opened (a symlink's target), checked on the
// open file, not on the path. The file's content is never echoed in an
// error: a wrong token may still be someone's secret.
func ReadTokenFile(path string) (Token, error) {
	f, err := os.Open(path)
	if err != nil {
		return Token{}, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return Token{}, fmt.Errorf("token file: %w", err)
	case !fi.Mode().IsRegular():
		return Token{}, fmt.Errorf("token file %s is not a regular file", path)
	case fi.Mode().Perm()&0o077 != 0:
		return Token{}, fmt.Errorf("token file %s is mode %04o: group or others may read it, and a token is a password; chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return Token{}, fmt.Errorf("token file: %w", err)
	}
	tok, err := ParseToken(string(b))
	if err != nil {
		return Token{}, fmt.Errorf("token file %s does not hold a bootstrap token: it must hold ID.SECRET, 6 + 16 characters of [a-z0-9] joined by a dot", path)
	}
	return tok, nil
}

// WriteTokenFile writes the token alone, "ID.SECRET\n", to path with
// mode 0600 (what ReadTokenFile accepts), through a temporary file and a
// rename: a reader never sees half a token, and an existing file of
// another mode is replaced rather than kept with its mode.
func WriteTokenFile(path string, tok Token) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".token-*") // mode 0600
	if err != nil {
		return err
	}
	_, err = f.WriteString(tok.String() + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write token file %s: %w", path, err)
	}
	return nil
}

// TokenOptions say what kind of token CreateToken makes.
type TokenOptions struct {
	// TTL is the lifetime (default DefaultTTL). Expires, when set, wins: a
	// time in the past makes an already expired token (for tests).
	TTL     time.Duration
	Expires time.Time
	// Description lands in the Secret, for `kubectl get secret -o yaml`.
	Description string
	// ExtraGroups besides system:bootstrappers, each matching
	// system:bootstrappers:[a-z0-9:-]*.
	ExtraGroups []string
	// Usages, default DefaultUsages ("authentication", "signing").
	Usages []string
}

// CreateToken generates a random token with k8s.io/cluster-bootstrap and
// stores it as a bootstrap token Secret, as `kubeadm token create` does.
// It needs a client that may create Secrets in kube-system (an admin).
func CreateToken(ctx context.Context, admin kubernetes.Interface, opts TokenOptions) (Token, error) {
	usages := opts.Usages
	if usages == nil {
		usages = DefaultUsages
	}
	if err := bootstraputil.ValidateUsages(usages); err != nil {
		return Token{}, err
	}
	for _, g := range opts.ExtraGroups {
		if err := bootstraputil.ValidateBootstrapGroupName(g); err != nil {
			return Token{}, err
		}
	}
	expires := opts.Expires
	if expires.IsZero() {
		ttl := opts.TTL
		if ttl == 0 {
			ttl = DefaultTTL
		}
		if ttl < 0 {
			return Token{}, fmt.Errorf("token TTL %s is negative; give a positive duration like 1h", ttl)
		}
		expires = time.Now().Add(ttl)
	}
	expires = expires.UTC().Truncate(time.Second) // the Secret holds RFC 3339 seconds

	// A clash of random IDs is unlikely (36^6), but an existing Secret must
	// never be overwritten: that would hand out someone else's token.
	for attempt := 0; attempt < 3; attempt++ {
		raw, err := bootstraputil.GenerateBootstrapToken()
		if err != nil {
			return Token{}, err
		}
		tok, err := ParseToken(raw)
		if err != nil {
			return Token{}, err
		}
		tok.Expires = expires
		tok.Usages = usages
		tok.Groups = append([]string{bootstrapapi.BootstrapDefaultGroup}, opts.ExtraGroups...)

		data := map[string][]byte{
			bootstrapapi.BootstrapTokenIDKey:         []byte(tok.ID),
			bootstrapapi.BootstrapTokenSecretKey:     []byte(tok.Secret),
			bootstrapapi.BootstrapTokenExpirationKey: []byte(expires.Format(time.RFC3339)),
		}
		if opts.Description != "" {
			data[bootstrapapi.BootstrapTokenDescriptionKey] = []byte(opts.Description)
		}
		for _, u := range usages {
			data[bootstrapapi.BootstrapTokenUsagePrefix+u] = []byte("true")
		}
		if len(opts.ExtraGroups) > 0 {
			data[bootstrapapi.BootstrapTokenExtraGroupsKey] = []byte(strings.Join(opts.ExtraGroups, ","))
		}
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: tok.SecretName(), Namespace: metav1.NamespaceSystem},
			Type:       bootstrapapi.SecretTypeBootstrapToken,
			Data:       data,
		}
		_, err = admin.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, secret, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return Token{}, fmt.Errorf("create bootstrap token secret %s/%s: %w", metav1.NamespaceSystem, tok.SecretName(), err)
		}
		return tok, nil
	}
	return Token{}, fmt.Errorf("could not find a free bootstrap token ID after 3 tries")
}

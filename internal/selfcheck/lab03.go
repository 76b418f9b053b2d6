package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstrapsecrets "k8s.io/cluster-bootstrap/util/secrets"

	"kubelet-labs/mycore/bootstrap"
)

func init() {
	register("03", labCheck{Title: "a bootstrap token and the RBAC a joining node needs", Check: checkLab03})
}

// lab03Run is the hint for everything the lab's first command makes.
const lab03Run = "run go run ./labs/03-bootstrap-token (README, Run it)"

func checkLab03(ctx context.Context, e *Env) []Result {
	kube, err := e.Kube(ctx)
	if err != nil {
		return NoCluster(err)
	}
	tok, tokenResult := lab03Token(ctx, kube, e.StatePath("bootstrap", "token"))
	results := []Result{tokenResult, lab03Bindings(ctx, kube)}
	results = append(results, lab03ClusterInfo(ctx, kube, tok))
	results = append(results, lab03LogsIn(ctx, e.StatePath("bootstrap", "bootstrap-kubelet.kubeconfig"), "bootstrap/bootstrap-kubelet.kubeconfig", lab03Run, false))
	// The README suggests deleting the hand-made token afterwards: a
	// by-hand kubeconfig whose token is gone was still made by hand.
	results = append(results, lab03LogsIn(ctx, e.StatePath("bootstrap", "by-hand.kubeconfig"), "bootstrap/by-hand.kubeconfig", "run the README's block in The same by hand (it ends with a Forbidden on purpose)", true))
	return results
}

// lab03Token: the token file the lab wrote, and its Secret still there and
// not expired (the tokencleaner deletes it at its expiration).
func lab03Token(ctx context.Context, kube kubernetes.Interface, path string) (*bootstrap.Token, Result) {
	tok, err := bootstrap.ReadTokenFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, NotYet("no token file bootstrap/token in the state folder", lab03Run)
	}
	if err != nil {
		return nil, NotYet("the token file bootstrap/token: "+err.Error(), lab03Run)
	}
	s, err := kube.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, tok.SecretName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, NotYet(fmt.Sprintf("token %s (bootstrap/token) has no Secret kube-system/%s any more: it expired and the tokencleaner deleted it", tok.ID, tok.SecretName()),
			lab03Run+" again for a new token")
	}
	if err != nil {
		return nil, NotYet(fmt.Sprintf("read Secret kube-system/%s: %v", tok.SecretName(), err), lab03Run)
	}
	if s.Type != bootstrapapi.SecretTypeBootstrapToken {
		return nil, NotYet(fmt.Sprintf("Secret kube-system/%s has type %q, not %s", s.Name, s.Type, bootstrapapi.SecretTypeBootstrapToken), lab03Run)
	}
	if bootstrapsecrets.HasExpired(s, time.Now()) {
		return nil, NotYet(fmt.Sprintf("token %s expired at %s (the tokencleaner deletes it any moment)", tok.ID, s.Data[bootstrapapi.BootstrapTokenExpirationKey]), lab03Run+" again for a new token")
	}
	if t, err := bootstrap.LookupToken(ctx, kube, tok); err == nil {
		tok = t
	}
	expires := "never expires"
	if !tok.Expires.IsZero() {
		expires = fmt.Sprintf("expires %s, in %s", tok.Expires.Local().Format("15:04:05"), time.Until(tok.Expires).Round(time.Minute))
	}
	return &tok, Done("token %s: Secret kube-system/%s of type %s (%s), in bootstrap/token", tok.ID, tok.SecretName(), bootstrapapi.SecretTypeBootstrapToken, expires)
}

// lab03Bindings: the three ClusterRoleBindings, each binding the right
// role to the right group.
func lab03Bindings(ctx context.Context, kube kubernetes.Interface) Result {
	var missing []string
	for _, want := range bootstrap.NodeBootstrapBindings() {
		b, err := kube.RbacV1().ClusterRoleBindings().Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil || b.RoleRef.Name != want.RoleRef.Name || len(b.Subjects) != 1 || b.Subjects[0].Name != want.Subjects[0].Name {
			missing = append(missing, want.Name)
		}
	}
	if len(missing) > 0 {
		return NotYet("ClusterRoleBinding missing or changed: "+strings.Join(missing, ", "), lab03Run+": it creates them")
	}
	return Done("RBAC: the 3 ClusterRoleBindings kubelet-labs:* (post CSRs; first certificate and renewals auto-approved)")
}

// lab03ClusterInfo: the bootstrapsigner signed cluster-info with the token.
func lab03ClusterInfo(ctx context.Context, kube kubernetes.Interface, tok *bootstrap.Token) Result {
	cm, err := kube.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
	if err != nil {
		return NotYet("no ConfigMap kube-public/cluster-info: "+err.Error(), lab03Run+": it creates it")
	}
	if tok == nil {
		return NotYet("kube-public/cluster-info exists, but there is no live token to see it signed with", lab03Run)
	}
	key := bootstrapapi.JWSSignatureKeyPrefix + tok.ID
	if _, ok := cm.Data[key]; !ok {
		return NotYet("kube-public/cluster-info has no "+key, "is the controller-manager's bootstrapsigner on? lab 00 turns it on; "+lab03Run)
	}
	return Done("cluster-info: kube-public/cluster-info signed with the token by the bootstrapsigner (%s)", key)
}

// lab03LogsIn: a bootstrap kubeconfig in the state folder logs in as
// system:bootstrap:ID, in group system:bootstrappers (a SelfSubjectReview,
// what kubectl auth whoami asks).
// cleanedUpIsDone: a 401 means the token was deleted after it was used.
func lab03LogsIn(ctx context.Context, path, shown, hint string, cleanedUpIsDone bool) Result {
	if _, err := os.Stat(path); err != nil {
		return NotYet("no "+shown+" in the state folder", hint)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return NotYet(shown+": "+err.Error(), hint)
	}
	cfg.Timeout = 10 * time.Second
	who, err := bootstrap.WhoAmI(ctx, cfg)
	if errors.Is(err, bootstrap.ErrUnauthorized) && cleanedUpIsDone {
		return Done("%s made; its token no longer logs in (you deleted it, or it expired)", shown)
	}
	if errors.Is(err, bootstrap.ErrUnauthorized) {
		return NotYet(shown+" is refused (401): its token expired or was deleted", hint+" again")
	}
	if err != nil {
		return NotYet(shown+": "+err.Error(), hint)
	}
	if !strings.HasPrefix(who.Username, bootstrapapi.BootstrapUserPrefix) || !slices.Contains(who.Groups, bootstrapapi.BootstrapDefaultGroup) {
		return NotYet(fmt.Sprintf("%s logs in as %s %v, not as a bootstrap token", shown, who.Username, who.Groups), hint)
	}
	return Done("%s logs in as %s %v", shown, who.Username, who.Groups)
}

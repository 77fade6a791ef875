package testenv

// ServiceAccount tokens for the authorization tests (server.authorization: kubernetes) of both
// Go suites: a real ServiceAccount with a real Role, and its token from the TokenRequest API.

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AuthzAudience is the audience informerd accepts by default (server.authorization.audiences).
const AuthzAudience = "informerd"

// PodReaderToken creates the ServiceAccount sa in ns with a Role that may get, list and watch
// pods there (and nothing else), and writes its token for informerd's audience, from the
// TokenRequest API, to a file whose path it returns, as a projected token would be.
func (e *Env) PodReaderToken(t *testing.T, ns, sa string) string {
	t.Helper()
	ctx := context.Background()
	_, err := e.Kube.CoreV1().ServiceAccounts(ns).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ServiceAccount %s/%s: %v", ns, sa, err)
	}
	_, err = e.Kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: sa},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Role %s/%s: %v", ns, sa, err)
	}
	_, err = e.Kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: sa},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create RoleBinding %s/%s: %v", ns, sa, err)
	}
	expiry := int64(3600)
	tr, err := e.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{Audiences: []string{AuthzAudience}, ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", ns, sa, err)
	}
	if tr.Status.Token == "" {
		t.Fatalf("TokenRequest for %s/%s returned no token", ns, sa)
	}
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(tr.Status.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

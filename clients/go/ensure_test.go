package informerd_test

import (
	"context"
	"sort"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	informerd "informerd.io/clients/go"
)

// TestEnsureCachesAKindOnDemand: a kind the configuration does not list (ConfigMaps) is
// ensured within the onDemand bounds, then listed by the name Ensure returned; a kind outside
// the bounds (Secrets) is refused with PERMISSION_DENIED/Forbidden naming the bound.
func TestEnsureCachesAKindOnDemand(t *testing.T) {
	e := setup(t)
	ns := e.Namespace(t, "ensure")
	for _, name := range []string{"cm-a", "cm-b"} {
		_, err := e.Kube.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Data:       map[string]string{"k": name},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create configmap %s/%s: %v", ns, name, err)
		}
	}
	s := e.StartSidecar(t, func(sock string) string {
		return podsConfig(sock, []string{ns}, "") +
			"onDemand:\n  allow: [{group: \"\", kinds: [ConfigMap]}]\n  namespaces: [" + ns + "]\n"
	})
	c := s.Client()

	ctx := callCtx(t)
	name, err := c.Ensure(ctx, "v1", "ConfigMap", ns)
	if err != nil {
		t.Fatalf("Ensure ConfigMaps in %s: %v", ns, err)
	}
	if want := "configmaps/" + ns; name != want {
		t.Errorf("Ensure returned %q, want %q", name, want)
	}
	listed, err := c.List(ctx, name, informerd.InNamespace(ns))
	if err != nil {
		t.Fatalf("List %s: %v", name, err)
	}
	var names []string
	for _, item := range listed.Items {
		names = append(names, item.GetName())
	}
	// What the apiserver holds: the two created, and the namespace's kube-root-ca.crt.
	want, err := e.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var wantNames []string
	for _, cm := range want.Items {
		wantNames = append(wantNames, cm.Name)
	}
	sort.Strings(names)
	sort.Strings(wantNames)
	if got, want := strings.Join(names, ","), strings.Join(wantNames, ","); got != want || !strings.Contains(got, "cm-a,cm-b") {
		t.Errorf("listed %q from %s, want the apiserver's %q", got, name, want)
	}

	_, err = c.Ensure(ctx, "v1", "Secret", ns)
	checkErr(t, "Ensure of Secrets", err, codes.PermissionDenied, informerd.ReasonForbidden)
	if err != nil && !strings.Contains(err.Error(), "onDemand.allowSecrets") {
		t.Errorf("the refusal does not name the bound onDemand.allowSecrets: %v", err)
	}
}

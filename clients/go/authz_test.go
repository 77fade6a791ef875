package informerd_test

// Per-client authorization end to end: a real sidecar with `server.authorization: kubernetes`,
// a ServiceAccount whose Role reads pods in namespace A only, and its token from the
// TokenRequest API (audience "informerd") in a file, as a projected token would be.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	informerd "informerd.io/clients/go"
	"informerd.io/clients/go/internal/testenv"
)

// TestAuthzTokenFileReadsOnlyWhatRBACAllows: a client WithTokenFile lists exactly the pods of
// the namespace its Role covers, is refused PERMISSION_DENIED/Forbidden for another cached
// namespace and for all namespaces (never a silent subset), and a client without a token is
// refused UNAUTHENTICATED/Unauthenticated.
func TestAuthzTokenFileReadsOnlyWhatRBACAllows(t *testing.T) {
	e := setup(t)
	a, b := e.Namespace(t, "authz-a"), e.Namespace(t, "authz-b")
	for _, ns := range []string{a, b} {
		for i := range 2 {
			e.createPod(t, ns, fmt.Sprintf("p%d", i), nil)
		}
	}
	socket, reader := e.authzSidecar(t, []string{a, b}, e.PodReaderToken(t, a, "reader-a"))

	// Until the sidecar has synced and the apiserver's RBAC serves the new binding.
	var got map[string]string
	var err error
	eventually(t, syncTimeout, "the reader lists namespace A", func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got, _, err = sidecarPods(ctx, reader, "pods", informerd.InNamespace(a))
		if err != nil {
			return err.Error()
		}
		return ""
	})
	if d := diff("the apiserver", e.apiserverPods(t, "", a), "informerd", got); d != "" {
		t.Errorf("pods of %s listed with the reader's token differ from the apiserver's:\n%s", a, d)
	}
	if len(got) != 2 {
		t.Errorf("listed %d pods in %s, want the 2 created there: %v", len(got), a, got)
	}

	ctx := callCtx(t)
	_, _, err = sidecarPods(ctx, reader, "pods", informerd.InNamespace(b))
	checkAuthzErr(t, "the reader's List of namespace B", err, codes.PermissionDenied, informerd.ReasonForbidden, informerd.ErrForbidden)
	_, _, err = sidecarPods(ctx, reader, "pods")
	checkAuthzErr(t, "the reader's List of all namespaces", err, codes.PermissionDenied, informerd.ReasonForbidden, informerd.ErrForbidden)

	anonymous := testenv.DialTarget(t, "unix://"+socket)
	_, _, err = sidecarPods(ctx, anonymous, "pods", informerd.InNamespace(a))
	checkAuthzErr(t, "a List of namespace A without a token", err, codes.Unauthenticated, informerd.ReasonUnauthenticated, informerd.ErrUnauthenticated)
}

// TestAuthzInformerServesOnceRBACAllows: an Informer whose ServiceAccount may not read the
// namespace it follows keeps asking (each PERMISSION_DENIED/Forbidden given to OnError as a
// "resume", Run still running), and holds exactly the apiserver's pods of that namespace once a
// RoleBinding grants the read: RBAC applied with the workload that needs it, and seen late,
// does not leave a pod's Informer empty for the rest of its life.
func TestAuthzInformerServesOnceRBACAllows(t *testing.T) {
	e := setup(t)
	a, b := e.Namespace(t, "authz-inf-a"), e.Namespace(t, "authz-inf-b")
	for i := range 2 {
		e.createPod(t, b, fmt.Sprintf("p%d", i), nil)
	}
	_, reader := e.authzSidecar(t, []string{a, b}, e.PodReaderToken(t, a, "reader"))

	rec := newRecorder()
	inf := informerd.NewInformer[corev1.Pod](reader, "pods", rec.handler(), informerd.InNamespace(b))
	refused := make(chan string, 1)
	inf.OnError = func(err error, decision string) {
		if informerd.Reason(err) == informerd.ReasonForbidden {
			select {
			case refused <- decision:
			default:
			}
		}
	}
	alive := runInformer(t, inf)
	select {
	case decision := <-refused:
		if decision != "resume" {
			t.Fatalf("a Forbidden watch: the Informer decided %q, want it to ask again (\"resume\")", decision)
		}
	case <-time.After(syncTimeout): // only so as not to hang
		t.Fatalf("no Forbidden watch after %s; the Informer's stats: %+v", syncTimeout, inf.Stats())
	}

	ctx := context.Background()
	if _, err := e.Kube.RbacV1().Roles(b).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Kube.RbacV1().RoleBindings(b).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "reader", Namespace: a}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := e.apiserverPods(t, "", b)
	eventually(t, syncTimeout, "the Informer holds namespace B's pods once the RoleBinding is seen", func() string {
		if err := alive(); err != nil {
			return err.Error()
		}
		if !inf.HasSynced() {
			return fmt.Sprintf("HasSynced() = false; stats %+v", inf.Stats())
		}
		return diff("the apiserver", want, "the Informer's handler", rec.snapshot())
	})
	if len(want) != 2 {
		t.Errorf("the apiserver has %d pods in %s, want the 2 created there", len(want), b)
	}
	rec.check(t)
}

// TestAuthzWorkQueueAsksAgainAfterRevocation: a WorkQueue whose read is revoked while it runs
// (the sidecar's re-check ends its stream with PERMISSION_DENIED) does not shut down: it reports
// the refusal in Err, asks again, and hands out the key of a pod created once the RoleBinding is
// back. A grant removed and re-applied must not end a controller's loop for good.
func TestAuthzWorkQueueAsksAgainAfterRevocation(t *testing.T) {
	e := setup(t)
	ns := e.Namespace(t, "authz-wq")
	e.createPod(t, ns, "p0", nil)
	token := e.PodReaderToken(t, ns, "reader")
	_, reader := e.authzSidecar(t, []string{ns}, token, "    recheckInterval: 1s\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q, err := informerd.NewWorkQueue(ctx, reader, "pods", informerd.WorkQueueConfig{}, informerd.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer q.ShutDown()
	keys := make(chan informerd.QueueKey, 64)
	go func() {
		defer close(keys)
		for {
			key, shutdown := q.Get()
			if shutdown {
				return
			}
			q.Done(key)
			keys <- key
		}
	}()
	waitForKey := func(name string) {
		t.Helper()
		timeout := time.After(syncTimeout) // only so as not to hang
		for {
			select {
			case key, ok := <-keys:
				if !ok {
					t.Fatalf("the queue shut down before %s/%s came: Err() = %v", ns, name, q.Err())
				}
				if key.Namespace == ns && key.Name == name {
					return
				}
			case <-timeout:
				t.Fatalf("no key %s/%s after %s; Err() = %v", ns, name, syncTimeout, q.Err())
			}
		}
	}
	waitForKey("p0")

	rbac := e.Kube.RbacV1().RoleBindings(ns)
	binding, err := rbac.Get(ctx, "reader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rbac.Delete(ctx, "reader", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, syncTimeout, "the queue reports the revoked read", func() string {
		if err := q.Err(); informerd.Reason(err) != informerd.ReasonForbidden {
			return fmt.Sprintf("Err() = %v, want a Forbidden refusal", err)
		}
		return ""
	})
	if q.ShuttingDown() {
		t.Fatalf("the queue shut down on a refusal: Err() = %v", q.Err())
	}

	binding.ResourceVersion = ""
	if _, err := rbac.Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.createPod(t, ns, "p1", nil)
	waitForKey("p1")
	if err := q.Err(); err != nil {
		t.Errorf("Err() = %v after a subscription was accepted again, want nil", err)
	}
}

// authzSidecar starts a sidecar caching the pods of namespaces with per-client authorization
// (its settings beside `mode`: extra, indented under `authorization`), and returns its socket and
// a client that sends the token of tokenFile. deniedTTL is 1s: a denial given before RBAC's
// caches saw a new RoleBinding must not stick.
func (e *env) authzSidecar(t *testing.T, namespaces []string, tokenFile string, extra ...string) (string, *informerd.Client) {
	t.Helper()
	s := e.NewSidecar(t, func(sock string) string {
		return podsConfig(sock, namespaces, "  authorization:\n    mode: kubernetes\n    deniedTTL: 1s\n"+strings.Join(extra, ""))
	})
	s.Start()
	reader, err := informerd.Dial("unix://"+s.Socket, informerd.WithTokenFile(tokenFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reader.Close() })
	return s.Socket, reader
}

// checkAuthzErr fails unless err is an *informerd.Error with the code and reason, matching the
// sentinel with errors.Is.
func checkAuthzErr(t *testing.T, what string, err error, code codes.Code, reason string, sentinel error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s succeeded, want %s (%s)", what, code, reason)
		return
	}
	if informerd.Code(err) != code || informerd.Reason(err) != reason {
		t.Errorf("%s: %v, want code %s reason %s", what, err, code, reason)
	}
	if !errors.Is(err, sentinel) {
		t.Errorf("%s: errors.Is(%v, %v) is false", what, err, sentinel)
	}
}

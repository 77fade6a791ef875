package informerd_test

// Per-client authorization end to end: a real sidecar with `server.authorization: kubernetes`,
// a ServiceAccount whose Role reads pods in namespace A only, and its token from the
// TokenRequest API (audience "informerd") in a file, as a projected token would be.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

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
	tokenFile := e.PodReaderToken(t, a, "reader-a")

	// deniedTTL 1s: a denial given before RBAC's caches saw the new RoleBinding must not stick.
	s := e.NewSidecar(t, func(sock string) string {
		return podsConfig(sock, []string{a, b}, "  authorization:\n    mode: kubernetes\n    deniedTTL: 1s\n")
	})
	s.Start()
	reader, err := informerd.Dial("unix://"+s.Socket, informerd.WithTokenFile(tokenFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reader.Close() })

	// Until the sidecar has synced and the apiserver's RBAC serves the new binding.
	var got map[string]string
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

	anonymous := testenv.DialTarget(t, "unix://"+s.Socket)
	_, _, err = sidecarPods(ctx, anonymous, "pods", informerd.InNamespace(a))
	checkAuthzErr(t, "a List of namespace A without a token", err, codes.Unauthenticated, informerd.ReasonUnauthenticated, informerd.ErrUnauthenticated)
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

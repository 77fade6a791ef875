package informerd_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	informerd "informerd.io/clients/go"
	"informerd.io/clients/go/informerdv1"
)

// TestReasonTrailerIsTheGeneratedName: the informerd-reason trailer of a NOT_FOUND Get is the
// generated name of the proto's Reason value, so that it parses to the enum without a table,
// and the package's Reason constants are those names.
func TestReasonTrailerIsTheGeneratedName(t *testing.T) {
	e := setup(t)
	ns := e.Namespace(t, "reason-enum")
	s := e.StartSidecar(t, func(sock string) string { return podsConfig(sock, []string{ns}, "") })
	c := s.Client()
	ctx := callCtx(t)

	var trailer metadata.MD
	_, err := c.Raw().Get(ctx, &informerdv1.GetRequest{Resource: "pods", Namespace: ns, Name: "no-such-pod"}, grpc.Trailer(&trailer))
	if status.Code(err) != codes.NotFound {
		t.Fatalf("Get of a missing pod: %v, want NOT_FOUND", err)
	}
	sent := informerd.ReasonFromMetadata(trailer, nil)
	value, ok := informerdv1.Reason_value[sent]
	if !ok || informerdv1.Reason(value) != informerdv1.Reason_NotFound {
		t.Errorf("trailer %s: %q parses to %v (known: %v), want %v", informerd.ReasonKey, sent, informerdv1.Reason(value), ok, informerdv1.Reason_NotFound)
	}
	if sent != informerd.ReasonNotFound {
		t.Errorf("trailer %s: %q, want informerd.ReasonNotFound %q", informerd.ReasonKey, sent, informerd.ReasonNotFound)
	}
}

// TestReasonConstantsCoverTheProto: every reason the proto defines has its constant here, so a
// reason added to cache.proto without one (as Unauthenticated and Forbidden once were) fails.
func TestReasonConstantsCoverTheProto(t *testing.T) {
	constants := map[string]bool{}
	for _, r := range []string{
		informerd.ReasonExpired, informerd.ReasonEpochChanged, informerd.ReasonFellBehind,
		informerd.ReasonNotSynced, informerd.ReasonNotFound, informerd.ReasonNotCaughtUp,
		informerd.ReasonInvalid, informerd.ReasonShuttingDown, informerd.ReasonUnauthenticated,
		informerd.ReasonForbidden, informerd.ReasonTooManyWatchers, informerd.ReasonTooManyLists,
		informerd.ReasonOverMemoryLimit, informerd.ReasonRequestTooLarge,
	} {
		constants[r] = true
	}
	for value, name := range informerdv1.Reason_name {
		if informerdv1.Reason(value) == informerdv1.Reason_REASON_UNSPECIFIED {
			continue
		}
		if !constants[name] {
			t.Errorf("proto Reason %s (%d) has no Reason constant in errors.go", name, value)
		}
	}
	if len(constants) != len(informerdv1.Reason_name)-1 {
		t.Errorf("%d distinct Reason constants, the proto defines %d reasons", len(constants), len(informerdv1.Reason_name)-1)
	}
}

// TestLimitRefusalsNameTheirLimit: a Watch beyond limits.maxWatchers and a request over
// limits.maxRequestSize are RESOURCE_EXHAUSTED, like FellBehind, but their reasons say which
// limit refused them, so that a client backs off (IsOverLimit) instead of resuming at once.
func TestLimitRefusalsNameTheirLimit(t *testing.T) {
	e := setup(t)
	ns := e.Namespace(t, "reason-limits")
	s := e.StartSidecar(t, func(sock string) string {
		return podsConfig(sock, []string{ns}, "limits:\n  maxWatchers: 1\n  maxRequestSize: 1Ki\n")
	})
	c := s.Client()
	ctx := callCtx(t)

	held, err := c.Watch(ctx, "pods", informerd.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := held.Next(); err != nil {
		t.Fatalf("the first watch: %v", err)
	}
	second, err := c.Watch(ctx, "pods", informerd.InNamespace(ns))
	if err == nil {
		defer second.Close()
		_, err = second.Next()
	}
	checkLimit(t, "a second Watch with maxWatchers: 1", err, informerd.ReasonTooManyWatchers, informerd.ErrTooManyWatchers)

	selector := "app in (" + strings.Repeat("x,", 600) + "x)"
	_, err = c.List(ctx, "pods", informerd.InNamespace(ns), informerd.WithLabelSelector(selector))
	checkLimit(t, "a List over maxRequestSize", err, informerd.ReasonRequestTooLarge, informerd.ErrRequestTooLarge)
}

func checkLimit(t *testing.T, what string, err error, reason string, sentinel error) {
	t.Helper()
	switch {
	case informerd.Code(err) != codes.ResourceExhausted || informerd.Reason(err) != reason:
		t.Errorf("%s: %v, want RESOURCE_EXHAUSTED %s", what, err, reason)
	case !errors.Is(err, sentinel) || !informerd.IsOverLimit(err):
		t.Errorf("%s: %v: errors.Is(sentinel) %v, IsOverLimit %v, want both", what, err, errors.Is(err, sentinel), informerd.IsOverLimit(err))
	case informerd.IsOverLimit(informerd.ErrFellBehind):
		t.Errorf("FellBehind counts as a limit")
	}
}

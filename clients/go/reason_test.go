package informerd_test

import (
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
		informerd.ReasonForbidden,
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

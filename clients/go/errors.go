package informerd

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"informerd.io/clients/go/informerdv1"
)

// ReasonKey is the gRPC trailer in which informerd names the reason of an error.
const ReasonKey = "informerd-reason"

// The reasons informerd gives in the informerd-reason trailer, with the gRPC code each comes
// with and what a client does about it. The trailer carries the name of a value of the proto's
// enum Reason as it is, so these are the generated names (informerdv1.Reason_name); to switch
// on the enum, look the trailer up in informerdv1.Reason_value.
var (
	// ReasonExpired (OUT_OF_RANGE): the revision is older than the change log: relist.
	ReasonExpired = informerdv1.Reason_Expired.String()
	// ReasonEpochChanged (OUT_OF_RANGE): the token comes from another run of the sidecar: relist.
	ReasonEpochChanged = informerdv1.Reason_EpochChanged.String()
	// ReasonFellBehind (RESOURCE_EXHAUSTED): the watcher did not read fast enough: resume from
	// the revision of the last event received.
	ReasonFellBehind = informerdv1.Reason_FellBehind.String()
	// ReasonNotSynced (UNAVAILABLE): the cache has not finished its initial list: retry.
	ReasonNotSynced = informerdv1.Reason_NotSynced.String()
	// ReasonNotFound (NOT_FOUND): no such object (Get) or no such resource.
	ReasonNotFound = informerdv1.Reason_NotFound.String()
	// ReasonNotCaughtUp (DEADLINE_EXCEEDED): a Get's or List's min_resource_version was not seen in time.
	ReasonNotCaughtUp = informerdv1.Reason_NotCaughtUp.String()
	// ReasonInvalid (INVALID_ARGUMENT): a bad selector, index, field mask or CEL expression.
	ReasonInvalid = informerdv1.Reason_Invalid.String()
	// ReasonShuttingDown (UNAVAILABLE): the sidecar is stopping: reconnect, resume.
	ReasonShuttingDown = informerdv1.Reason_ShuttingDown.String()
	// ReasonUnauthenticated (UNAUTHENTICATED): server.authorization is on and the call carried
	// no valid token (missing, expired, forged, or for another audience): send a fresh projected
	// token for the audience "informerd" (WithTokenFile).
	ReasonUnauthenticated = informerdv1.Reason_Unauthenticated.String()
	// ReasonForbidden (PERMISSION_DENIED): the caller's RBAC does not allow the read; the
	// message names the verb, resource and namespace to grant. A Watch also ends with it when
	// access is revoked.
	ReasonForbidden = informerdv1.Reason_Forbidden.String()
	// ReasonTooManyWatchers (RESOURCE_EXHAUSTED): limits.maxWatchers Watch calls are open in
	// the sidecar: close the watches you no longer need; retry with backoff.
	ReasonTooManyWatchers = informerdv1.Reason_TooManyWatchers.String()
	// ReasonTooManyLists (RESOURCE_EXHAUSTED): limits.maxConcurrentLists List calls are in
	// progress: retry with backoff.
	ReasonTooManyLists = informerdv1.Reason_TooManyLists.String()
	// ReasonOverMemoryLimit (RESOURCE_EXHAUSTED): the sidecar's allocated memory is above
	// limits.maxMemory; new List and Watch calls are refused until it is back under (Get
	// serves): retry with backoff.
	ReasonOverMemoryLimit = informerdv1.Reason_OverMemoryLimit.String()
	// ReasonRequestTooLarge (RESOURCE_EXHAUSTED): the request is over limits.maxRequestSize:
	// send a smaller one (the same request fails again).
	ReasonRequestTooLarge = informerdv1.Reason_RequestTooLarge.String()
)

// Error is an error returned by the informerd API: the gRPC status and the informerd-reason
// trailer. Every error the Client returns for a failed call is an *Error (or wraps one), and it
// keeps its gRPC status: status.Code(err) works on it.
type Error struct {
	// Code is the gRPC status code.
	Code codes.Code
	// Reason is the informerd-reason trailer, empty if the server sent none (for example when
	// the connection broke, or the error came from the gRPC library itself).
	Reason string
	// Message is the status message, which says what to do.
	Message string
	st      *status.Status
}

func (e *Error) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("informerd: %s (%s): %s", e.Reason, e.Code, e.Message)
	}
	return fmt.Sprintf("informerd: %s: %s", e.Code, e.Message)
}

// GRPCStatus makes status.FromError and status.Code see the original gRPC status.
func (e *Error) GRPCStatus() *status.Status { return e.st }

// Is matches another *Error with the same code and reason, so that errors.Is(err, ErrExpired)
// and the like work.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	return t.Code == e.Code && t.Reason == e.Reason && t.Message == "" && t.st == nil
}

// Sentinels for errors.Is: errors.Is(err, informerd.ErrExpired).
var (
	ErrExpired      = &Error{Code: codes.OutOfRange, Reason: ReasonExpired}
	ErrEpochChanged = &Error{Code: codes.OutOfRange, Reason: ReasonEpochChanged}
	ErrFellBehind   = &Error{Code: codes.ResourceExhausted, Reason: ReasonFellBehind}
	ErrNotSynced    = &Error{Code: codes.Unavailable, Reason: ReasonNotSynced}
	ErrNotFound     = &Error{Code: codes.NotFound, Reason: ReasonNotFound}
	ErrNotCaughtUp  = &Error{Code: codes.DeadlineExceeded, Reason: ReasonNotCaughtUp}
	ErrInvalid      = &Error{Code: codes.InvalidArgument, Reason: ReasonInvalid}
	ErrShuttingDown = &Error{Code: codes.Unavailable, Reason: ReasonShuttingDown}

	ErrUnauthenticated = &Error{Code: codes.Unauthenticated, Reason: ReasonUnauthenticated}
	ErrForbidden       = &Error{Code: codes.PermissionDenied, Reason: ReasonForbidden}

	ErrTooManyWatchers = &Error{Code: codes.ResourceExhausted, Reason: ReasonTooManyWatchers}
	ErrTooManyLists    = &Error{Code: codes.ResourceExhausted, Reason: ReasonTooManyLists}
	ErrOverMemoryLimit = &Error{Code: codes.ResourceExhausted, Reason: ReasonOverMemoryLimit}
	ErrRequestTooLarge = &Error{Code: codes.ResourceExhausted, Reason: ReasonRequestTooLarge}
)

// Reason returns the informerd-reason of an error returned by this package ("" if none).
func Reason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// Code returns the gRPC code of an error (codes.OK for nil, codes.Unknown for an error that is
// not a gRPC status).
func Code(err error) codes.Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return status.Code(err)
}

// ReasonFromMetadata reads the informerd-reason from the trailer (or, failing that, the
// header) of a call made with the generated client directly.
func ReasonFromMetadata(trailer, header metadata.MD) string {
	for _, md := range []metadata.MD{trailer, header} {
		if v := md.Get(ReasonKey); len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// IsRelist reports whether the error means the resume token cannot be used any more and the
// caller must list again (OUT_OF_RANGE: Expired, EpochChanged).
func IsRelist(err error) bool { return Code(err) == codes.OutOfRange }

// IsOverLimit reports whether the sidecar refused the call for one of its limits
// (TooManyWatchers, TooManyLists, OverMemoryLimit, RequestTooLarge; the message names the
// configuration key): back off before retrying, unlike FellBehind, which resumes at once.
func IsOverLimit(err error) bool {
	switch Reason(err) {
	case ReasonTooManyWatchers, ReasonTooManyLists, ReasonOverMemoryLimit, ReasonRequestTooLarge:
		return true
	}
	return false
}

// IsNotFound reports whether the error is NOT_FOUND (no such object, or no such resource).
func IsNotFound(err error) bool { return Code(err) == codes.NotFound }

// wrapError turns an error from a gRPC call into an *Error carrying the reason from the call's
// metadata. nil stays nil; a non-status error is returned as it is.
func wrapError(err error, trailer, header metadata.MD) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	return &Error{Code: st.Code(), Reason: ReasonFromMetadata(trailer, header), Message: st.Message(), st: st}
}

"""Errors of the informerd API: a gRPC status code plus the `informerd-reason` trailer."""

from __future__ import annotations

import grpc

REASON_TRAILER = "informerd-reason"


class Reason:
    """The values of the `informerd-reason` trailer (see cache.proto)."""

    EXPIRED = "Expired"  # OUT_OF_RANGE: the revision is older than the change log: relist
    EPOCH_CHANGED = "EpochChanged"  # OUT_OF_RANGE: token from another run of the sidecar: relist
    FELL_BEHIND = "FellBehind"  # RESOURCE_EXHAUSTED: resume from the last revision received
    NOT_SYNCED = "NotSynced"  # UNAVAILABLE: the cache has not finished its initial list: retry
    NOT_FOUND = "NotFound"  # NOT_FOUND: no such object (Get) or no such resource
    NOT_CAUGHT_UP = "NotCaughtUp"  # DEADLINE_EXCEEDED: min_resource_version not seen in time
    INVALID = "Invalid"  # INVALID_ARGUMENT: bad selector, index, field mask or CEL expression
    SHUTTING_DOWN = "ShuttingDown"  # UNAVAILABLE: the sidecar is stopping: reconnect, resume


class InformerdError(Exception):
    """A failed informerd call.

    `code` is the gRPC status code (a `grpc.StatusCode`), `reason` the `informerd-reason`
    trailer (one of `Reason`'s values, or None when the server sent none, e.g. for a
    connection failure), `message` the server's message, which says what to do.
    """

    def __init__(self, code: grpc.StatusCode, reason: str | None, message: str):
        self.code = code
        self.reason = reason
        self.message = message
        name = code.name if isinstance(code, grpc.StatusCode) else str(code)
        super().__init__(f"{name}" + (f" ({reason})" if reason else "") + f": {message}")

    @property
    def needs_relist(self) -> bool:
        """The resume token can no longer be used (Expired, EpochChanged): list again."""
        return self.code == grpc.StatusCode.OUT_OF_RANGE

    @property
    def can_resume(self) -> bool:
        """Watching again `since` the last token received may succeed."""
        return self.code in (
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            grpc.StatusCode.UNAVAILABLE,
            grpc.StatusCode.CANCELLED,
            grpc.StatusCode.DEADLINE_EXCEEDED,
            grpc.StatusCode.INTERNAL,
            grpc.StatusCode.UNKNOWN,
            grpc.StatusCode.ABORTED,
        )


class NotFoundError(InformerdError):
    """NOT_FOUND: no such object, or no such resource in the sidecar's configuration."""


def from_rpc_error(err: grpc.RpcError) -> InformerdError:
    """Converts a grpc.RpcError (a failed call) into an InformerdError."""
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    message = err.details() if hasattr(err, "details") else str(err)
    reason = None
    trailers = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    for key, value in trailers or ():
        if key == REASON_TRAILER:
            reason = value.decode() if isinstance(value, bytes) else value
            break
    cls = NotFoundError if code == grpc.StatusCode.NOT_FOUND else InformerdError
    return cls(code, reason, message or "")

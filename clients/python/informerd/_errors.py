"""Errors of the informerd API: a gRPC status code plus the `informerd-reason` trailer."""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

import grpc

from .v1 import cache_pb2 as pb

REASON_TRAILER = "informerd-reason"


class Reason:
    """The values of the `informerd-reason` trailer (see cache.proto).

    The trailer carries the name of a value of the proto's enum `Reason` as it is, so these are
    the generated names (`cache_pb2.Reason.Name(...)`); `cache_pb2.Reason.Value(error.reason)`
    gives the enum.
    """

    # OUT_OF_RANGE: the revision is older than the change log: relist.
    EXPIRED = pb.Reason.Name(pb.Reason.Expired)
    # OUT_OF_RANGE: the token comes from another run of the sidecar: relist.
    EPOCH_CHANGED = pb.Reason.Name(pb.Reason.EpochChanged)
    # RESOURCE_EXHAUSTED: the watcher fell behind: resume from the last revision received.
    FELL_BEHIND = pb.Reason.Name(pb.Reason.FellBehind)
    # UNAVAILABLE: the cache has not finished its initial list: retry.
    NOT_SYNCED = pb.Reason.Name(pb.Reason.NotSynced)
    # NOT_FOUND: no such object (Get) or no such resource.
    NOT_FOUND = pb.Reason.Name(pb.Reason.NotFound)
    # DEADLINE_EXCEEDED: the min_resource_version of a Get or List was not seen in time.
    NOT_CAUGHT_UP = pb.Reason.Name(pb.Reason.NotCaughtUp)
    # INVALID_ARGUMENT: a bad selector, index, field mask or CEL expression.
    INVALID = pb.Reason.Name(pb.Reason.Invalid)
    # UNAVAILABLE: the sidecar is stopping: reconnect, resume.
    SHUTTING_DOWN = pb.Reason.Name(pb.Reason.ShuttingDown)
    # UNAUTHENTICATED: server.authorization is on and the call carried no valid token (missing,
    # expired, forged, or for another audience): send a fresh projected token (`token_file`).
    UNAUTHENTICATED = pb.Reason.Name(pb.Reason.Unauthenticated)
    # PERMISSION_DENIED: the caller's RBAC does not allow the read; the message names the verb,
    # resource and namespace to grant. A watch also ends with it when access is revoked.
    FORBIDDEN = pb.Reason.Name(pb.Reason.Forbidden)
    # RESOURCE_EXHAUSTED: limits.maxWatchers watches are open in the sidecar: close the ones
    # you no longer need; retry with backoff.
    TOO_MANY_WATCHERS = pb.Reason.Name(pb.Reason.TooManyWatchers)
    # RESOURCE_EXHAUSTED: limits.maxConcurrentLists lists are in progress: retry with backoff.
    TOO_MANY_LISTS = pb.Reason.Name(pb.Reason.TooManyLists)
    # RESOURCE_EXHAUSTED: the sidecar's allocated memory is above limits.maxMemory; new lists
    # and watches are refused until it is back under (get serves): retry with backoff.
    OVER_MEMORY_LIMIT = pb.Reason.Name(pb.Reason.OverMemoryLimit)
    # RESOURCE_EXHAUSTED: the request is over limits.maxRequestSize: send a smaller one (the
    # same request fails again).
    REQUEST_TOO_LARGE = pb.Reason.Name(pb.Reason.RequestTooLarge)

    # The sidecar's limits: back off before retrying, unlike FELL_BEHIND (resume at once).
    LIMITS = frozenset({TOO_MANY_WATCHERS, TOO_MANY_LISTS, OVER_MEMORY_LIMIT, REQUEST_TOO_LARGE})


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
    def over_limit(self) -> bool:
        """The sidecar refused the call for one of its limits (the message names the
        configuration key): back off before retrying."""
        return self.reason in Reason.LIMITS

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


def from_rpc_error(err: grpc.RpcError, hint: str = "") -> InformerdError:
    """Converts a grpc.RpcError (a failed call, of either grpc or grpc.aio) into an
    InformerdError. `hint` is added to the message of a failure to reach the sidecar
    (UNAVAILABLE without a reason): where the client's address came from."""
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    message = err.details() if hasattr(err, "details") else str(err)
    reason = None
    # grpc's stubs type RpcError's trailers as opaque _Metadatum items; at run time they are
    # (key, value) pairs, grpc's own MetadataType.
    trailers = cast(
        "Iterable[tuple[str, str | bytes]] | None",
        err.trailing_metadata() if hasattr(err, "trailing_metadata") else None,
    )
    for key, value in trailers or ():
        if key == REASON_TRAILER:
            reason = value.decode() if isinstance(value, bytes) else value
            break
    message = message or ""
    if hint and code == grpc.StatusCode.UNAVAILABLE and reason is None:
        message += hint
    cls = NotFoundError if code == grpc.StatusCode.NOT_FOUND else InformerdError
    return cls(code, reason, message)


def closed_channel(err: Exception) -> InformerdError:
    """What a call on a closed client raises."""
    return InformerdError(grpc.StatusCode.CANCELLED, None, str(err) or "the client is closed")

"""The informerd client: Get, List, Watch and Status over a gRPC channel. The values it
returns (_model), the requests it sends (_requests) and where it connects (_address) are shared
with the asyncio client, informerd.aio."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Self

import grpc

from ._address import DEFAULT_SOCKET, DEFAULT_TARGET, ConnectionTarget, grpc_target
from ._errors import InformerdError, closed_channel, from_rpc_error
from ._model import (
    Event,
    EventType,
    ListCollector,
    ListResult,
    ObjectRef,
    Predicate,
    ResumeToken,
    decode_object,
    event_from_pb,
    object_key,
)
from ._requests import (
    ensure_request,
    get_request,
    index_lookup,
    list_request,
    predicates,
    status_request,
    watch_request,
)
from ._token import BearerToken, token_source
from ._wait import SyncPoll
from .v1 import cache_pb2 as pb
from .v1 import cache_pb2_grpc as pb_grpc

__all__ = [
    "DEFAULT_SOCKET",
    "DEFAULT_TARGET",
    "Client",
    "Event",
    "EventType",
    "ListResult",
    "ObjectRef",
    "Predicate",
    "ResumeToken",
    "Watch",
    "object_key",
]

# The names these helpers had here before they were shared.
_target = grpc_target
_index = index_lookup
_predicates = predicates


class Watch:
    """An open Watch call: iterate it for Events; `cancel()` (from any thread) ends it.

    Iteration raises InformerdError when the call fails (not when it was cancelled with
    `cancel()`, which just ends the iteration). When the server ends the stream without an
    error, iteration ends too: resume with `since` the last token received.
    """

    def __init__(self, call: Any, hint: str = ""):
        self._call = call
        self._hint = hint
        self._cancelled = threading.Event()

    def __iter__(self) -> Iterator[Event]:
        try:
            for ev in self._call:
                event = event_from_pb(ev)
                if event is not None:
                    yield event
        except grpc.RpcError as err:
            if self._cancelled.is_set() and err.code() == grpc.StatusCode.CANCELLED:
                return
            raise from_rpc_error(err, self._hint) from None

    def cancel(self) -> None:
        if not self._cancelled.is_set():
            self._cancelled.set()
            self._call.cancel()

    @property
    def cancelled_by_user(self) -> bool:
        """cancel() was called (before the call ended by itself, or after)."""
        return self._cancelled.is_set()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


class Client:
    """A client of one informerd sidecar.

    `address` is `unix:///path/to.sock` (or just `/path/to.sock`), or `host:port`, e.g.
    `127.0.0.1:7070`; without one (or an empty one), the socket path in $INFORMERD_SOCKET, else
    DEFAULT_SOCKET. `timeout` is the default deadline in seconds of Get, List and Status
    (None: no deadline); Watch has none unless given one. `token` (fixed) or `token_file` (a
    projected ServiceAccount token, read again whenever the kubelet rotates it) is sent as
    `authorization: Bearer` on every call, for a sidecar with `server.authorization:
    kubernetes`; an unreadable `token_file` raises InformerdError (UNAUTHENTICATED).

        with Client() as c:
            pods = c.list("pods", namespace="default", label_selector="app=web")
            for pod in pods:
                print(pod["metadata"]["name"], pod["status"].get("phase"))
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        timeout: float | None = None,
        channel: grpc.Channel | None = None,
        options: Sequence[tuple[str, Any]] = (),
        token: str | None = None,
        token_file: str | os.PathLike[str] | None = None,
    ):
        where = ConnectionTarget.resolve(address)
        self.address = where.address
        self.timeout = timeout
        self._hint = where.hint
        self._own_channel = channel is None
        self._channel = channel or grpc.insecure_channel(where.target, options=where.channel_options(options))
        source = token_source(token, token_file)
        calls = self._channel if source is None else grpc.intercept_channel(self._channel, BearerToken(source))
        self._stub = pb_grpc.CacheStub(calls)
        self.closed = False

    @property
    def stub(self) -> pb_grpc.CacheStub:
        """The generated stub, for requests this wrapper does not cover."""
        return self._stub

    def close(self) -> None:
        self.closed = True
        if self._own_channel:
            self._channel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _timeout(self, timeout: float | None) -> float | None:
        return self.timeout if timeout is None else timeout

    def _error(self, err: grpc.RpcError) -> InformerdError:
        return from_rpc_error(err, self._hint)

    # --- Get -------------------------------------------------------------------------------

    def get(
        self,
        resource: str,
        name: str,
        namespace: str = "",
        *,
        cluster: str = "",
        min_resource_version: str = "",
        fields: Iterable[str] = (),
        wait_for_sync: bool = False,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """One object, as its decoded JSON. Raises NotFoundError when there is none.

        `min_resource_version`: read your own writes; the server waits (up to the deadline,
        30 s without one) until the cache holds this resourceVersion of the object or later,
        else fails with DEADLINE_EXCEEDED (NotCaughtUp).
        """
        return decode_object(
            self.get_response(
                resource,
                name,
                namespace,
                min_resource_version=min_resource_version,
                fields=fields,
                wait_for_sync=wait_for_sync,
                cluster=cluster,
                timeout=timeout,
            )
        )

    def get_response(
        self,
        resource: str,
        name: str,
        namespace: str = "",
        *,
        cluster: str = "",
        min_resource_version: str = "",
        fields: Iterable[str] = (),
        wait_for_sync: bool = False,
        timeout: float | None = None,
    ) -> pb.GetResponse:
        """Like get, but the raw GetResponse (object identity, epoch and revision)."""
        req = get_request(
            resource,
            name,
            namespace,
            cluster=cluster,
            min_resource_version=min_resource_version,
            fields=fields,
            wait_for_sync=wait_for_sync,
        )
        try:
            resp: pb.GetResponse = self._stub.Get(req, timeout=self._timeout(timeout))
            return resp
        except grpc.RpcError as err:
            raise self._error(err) from None

    # --- List ------------------------------------------------------------------------------

    def list(
        self,
        resource: str,
        *,
        cluster: str = "",
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
        index: pb.IndexLookup | tuple[str, str] | None = None,
        fields: Iterable[str] = (),
        wait_for_sync: bool = False,
        chunk_size: int = 0,
        min_resource_version: str = "",
        limit: int = 0,
        timeout: float | None = None,
    ) -> ListResult:
        """The matching objects (decoded JSON) and the (epoch, revision) they are all at.

        `index=("node", "node-1")` looks objects up by a secondary index of the sidecar's
        configuration. `min_resource_version`: read your own writes; the server waits (up to
        the deadline) until it holds an object of the namespace (of any, without one) at that
        resourceVersion or later: give the one of a write to an object of this resource that
        it keeps. `limit`: at most that many objects, the first in the list's order (0: all);
        there is no continue.
        """
        collected = ListCollector()
        for chunk in self.list_chunks(
            resource,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            index=index,
            fields=fields,
            wait_for_sync=wait_for_sync,
            chunk_size=chunk_size,
            min_resource_version=min_resource_version,
            limit=limit,
            cluster=cluster,
            timeout=timeout,
        ):
            result = collected.add(chunk)
            if result is not None:
                return result
        raise ListCollector.incomplete()

    def list_chunks(
        self,
        resource: str,
        *,
        cluster: str = "",
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
        index: pb.IndexLookup | tuple[str, str] | None = None,
        fields: Iterable[str] = (),
        wait_for_sync: bool = False,
        chunk_size: int = 0,
        min_resource_version: str = "",
        limit: int = 0,
        timeout: float | None = None,
    ) -> Iterator[pb.ListResponse]:
        """The raw ListResponse messages; the last one (`last`) has epoch, revision, synced."""
        req = list_request(
            resource,
            cluster=cluster,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            index=index,
            fields=fields,
            wait_for_sync=wait_for_sync,
            chunk_size=chunk_size,
            min_resource_version=min_resource_version,
            limit=limit,
        )
        call = self._stub.List(req, timeout=self._timeout(timeout))
        try:
            yield from call
        except grpc.RpcError as err:
            raise self._error(err) from None
        finally:
            call.cancel()

    # --- Watch -----------------------------------------------------------------------------

    def watch(
        self,
        resource: str,
        *,
        cluster: str = "",
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
        index: pb.IndexLookup | tuple[str, str] | None = None,
        fields: Iterable[str] = (),
        since: ResumeToken | None = None,
        send_initial_state: bool = False,
        predicates: Iterable[Predicate | int] = (),
        predicate_cel: str = "",
        bookmark_interval: int | None = None,
        wait_for_sync: bool = False,
        timeout: float | None = None,
        held: bytes | None = None,
    ) -> Watch:
        """Opens a watch: iterate the result for Events, `cancel()` it to stop.

        `since`: replay exactly the changes after this token, then follow (OUT_OF_RANGE when
        the token is too old or from another run of the sidecar: relist).
        `send_initial_state`: the current state as ADDED events, one SYNCED, then follow.
        `held`: a delta resume (what informerd.Informer does after the first list): the
        initial state less the objects held at their current resourceVersion, and SYNCED's
        `gone` names the held ones the watch no longer sees; build it with `held_entries`.
        Neither: follow from the current revision. `bookmark_interval` is in seconds.
        `cluster` (every call takes it): the sidecar's remote cluster (`clusters[].name`) to
        read; empty: the cluster it runs in. Tokens of one cluster's cache are refused by
        another's (OUT_OF_RANGE).
        """
        req = watch_request(
            resource,
            cluster=cluster,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            index=index,
            fields=fields,
            since=since,
            send_initial_state=send_initial_state,
            predicates_=predicates,
            predicate_cel=predicate_cel,
            bookmark_interval=bookmark_interval,
            wait_for_sync=wait_for_sync,
            held=held,
        )
        try:
            return Watch(self._stub.Watch(req, timeout=timeout), self._hint)
        except ValueError as err:  # the channel is closed
            raise closed_channel(err) from None

    # --- Ensure ----------------------------------------------------------------------------

    def ensure(
        self,
        api_version: str,
        kind: str,
        namespaces: Sequence[str] = (),
        *,
        cluster: str = "",
        timeout: float | None = None,
    ) -> str:
        """Asks the sidecar for a cache of `kind` (of `api_version`) in `namespaces` (none: every
        namespace), a kind its configuration does not list, within the operator's onDemand
        bounds; returns, once it has synced, the resource name to use with get, list and watch.
        Refusals are InformerdError PERMISSION_DENIED with reason Forbidden naming the bound
        (onDemand.allow, onDemand.namespaces, onDemand.maxCaches); NotCaughtUp when `timeout`
        passes before the sync (the cache keeps syncing: call again). The sidecar stops the
        cache after onDemand.idleTimeout without a client. `cluster`: the sidecar's remote
        cluster to cache from (read it with the same `cluster`); one that does not answer is
        UNAVAILABLE with reason NotSynced, naming it."""
        req = ensure_request(api_version, kind, namespaces, cluster=cluster)
        try:
            resource: str = self._stub.Ensure(req, timeout=self._timeout(timeout)).resource
            return resource
        except grpc.RpcError as err:
            raise self._error(err) from None

    # --- Status ----------------------------------------------------------------------------

    def status(self, resource: str = "", *, cluster: str = "", timeout: float | None = None) -> pb.StatusResponse:
        """What the sidecar caches and how it is doing (the raw StatusResponse); `cluster`:
        only that cluster's resources (and its entry of `clusters`)."""
        req = status_request(resource, cluster=cluster)
        try:
            st: pb.StatusResponse = self._stub.Status(req, timeout=self._timeout(timeout))
            return st
        except grpc.RpcError as err:
            raise self._error(err) from None

    def wait_for_sync(self, timeout: float = 60.0, *, resource: str = "") -> pb.StatusResponse:
        """Polls Status until the sidecar (or `resource`) reports synced; also waits for the
        sidecar to come up. Raises TimeoutError after `timeout` seconds."""
        poll = SyncPoll(self.address, timeout)
        while True:
            try:
                st = self.status(resource, timeout=poll.call_timeout())
                if poll.answered(st):
                    return st
            except InformerdError as err:
                poll.failed(err)  # raises unless it is to be waited through
            time.sleep(poll.INTERVAL)

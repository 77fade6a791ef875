"""The informerd client: Get, List, Watch and Status over a gRPC channel."""

from __future__ import annotations

import enum
import json
import os
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Self, cast

import grpc

from ._errors import InformerdError, from_rpc_error
from ._token import BearerToken, token_source
from .v1 import cache_pb2 as pb
from .v1 import cache_pb2_grpc as pb_grpc

DEFAULT_SOCKET = "/run/informerd/informerd.sock"
DEFAULT_TARGET = "unix://" + DEFAULT_SOCKET

# Objects travel as JSON; the server chunks lists at about 1 MiB, but one object may be larger.
_MAX_MESSAGE = 64 * 1024 * 1024
_CHANNEL_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.max_receive_message_length", _MAX_MESSAGE),
    # A restarted sidecar should be reached again within a second or two, not after gRPC's
    # default reconnect backoff (up to 120 s).
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
]


class EventType(str, enum.Enum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    BOOKMARK = "BOOKMARK"
    SYNCED = "SYNCED"


_EVENT_TYPES = {getattr(pb, t.value): t for t in EventType}


class Predicate(enum.IntEnum):
    """Which updates (MODIFIED) a watch delivers; ADDED and DELETED always are."""

    GENERATION_CHANGED = pb.GENERATION_CHANGED
    LABELS_CHANGED = pb.LABELS_CHANGED
    ANNOTATIONS_CHANGED = pb.ANNOTATIONS_CHANGED


@dataclass(frozen=True, order=True)
class ResumeToken:
    """(epoch, revision): `watch(since=token)` replays exactly the changes after it."""

    epoch: int
    revision: int


@dataclass(frozen=True)
class ObjectRef:
    """The identity and version of an object (what an Informer remembers of it)."""

    namespace: str
    name: str
    uid: str
    resource_version: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def object_key(namespace: str, name: str) -> str:
    """The cache key of an object: `namespace/name`, or `name` when cluster-scoped."""
    return f"{namespace}/{name}" if namespace else name


@dataclass
class Event:
    """A watch event. `object` (the decoded JSON) is None for BOOKMARK and SYNCED."""

    type: EventType
    epoch: int
    revision: int
    raw: pb.Object | None = field(default=None, repr=False)
    _decoded: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    @property
    def token(self) -> ResumeToken:
        return ResumeToken(self.epoch, self.revision)

    @property
    def object(self) -> dict[str, Any] | None:
        if self.raw is None:
            return None
        if self._decoded is None:
            self._decoded = json.loads(self.raw.json)
        return self._decoded

    @property
    def ref(self) -> ObjectRef | None:
        if self.raw is None:
            return None
        o = self.raw
        return ObjectRef(o.namespace, o.name, o.uid, o.resource_version)

    @property
    def key(self) -> str | None:
        return None if self.raw is None else object_key(self.raw.namespace, self.raw.name)

    def __repr__(self) -> str:
        what = f" {self.key}@{self.raw.resource_version}" if self.raw is not None else ""
        return f"Event({self.type.value}{what} epoch={self.epoch} revision={self.revision})"


@dataclass
class ListResult:
    """The objects of a List (decoded JSON), all at one (epoch, revision)."""

    items: list[dict[str, Any]]
    epoch: int
    revision: int
    synced: bool

    @property
    def token(self) -> ResumeToken:
        """Watch `since` this token to follow on from the list."""
        return ResumeToken(self.epoch, self.revision)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


def _target(address: str) -> str:
    if address.startswith("/"):
        return "unix://" + address
    return address


def _index(index: pb.IndexLookup | tuple[str, str] | None) -> pb.IndexLookup | None:
    if index is None or isinstance(index, pb.IndexLookup):
        return index
    name, value = index
    return pb.IndexLookup(name=name, value=value)


def _predicates(predicates: Iterable[Predicate | int]) -> list[pb.Predicate]:
    # The proto's enum values are ints at run time, which its stub calls pb.Predicate.
    return [cast(pb.Predicate, int(p)) for p in predicates]


class Watch:
    """An open Watch call: iterate it for Events; `cancel()` (from any thread) ends it.

    Iteration raises InformerdError when the call fails (not when it was cancelled with
    `cancel()`, which just ends the iteration). When the server ends the stream without an
    error, iteration ends too: resume with `since` the last token received.
    """

    def __init__(self, call: Any):
        self._call = call
        self._cancelled = threading.Event()

    def __iter__(self) -> Iterator[Event]:
        try:
            for ev in self._call:
                try:
                    kind = _EVENT_TYPES[ev.type]
                except KeyError:
                    continue  # an event type this client does not know (a newer server)
                obj = ev.object if ev.HasField("object") else None
                yield Event(kind, ev.epoch, ev.revision, obj)
        except grpc.RpcError as err:
            if self._cancelled.is_set() and err.code() == grpc.StatusCode.CANCELLED:
                return
            raise from_rpc_error(err) from None

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
    `127.0.0.1:7070`. `timeout` is the default deadline in seconds of Get, List and Status
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
        address: str = DEFAULT_TARGET,
        *,
        timeout: float | None = None,
        channel: grpc.Channel | None = None,
        options: Sequence[tuple[str, Any]] = (),
        token: str | None = None,
        token_file: str | os.PathLike[str] | None = None,
    ):
        self.address = address
        self.timeout = timeout
        self._own_channel = channel is None
        target = _target(address)
        opts = list(_CHANNEL_OPTIONS)
        if target.startswith("unix:"):
            # gRPC's C core sends the socket path as :authority, which is no valid authority:
            # the sidecar's HTTP/2 server (h2) resets such streams (PROTOCOL_ERROR). Kubernetes
            # and grpc-go use "localhost" for Unix sockets; so do we.
            opts.append(("grpc.default_authority", "localhost"))
        self._channel = channel or grpc.insecure_channel(target, options=opts + list(options))
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
        obj: dict[str, Any] = json.loads(
            self.get_response(
                resource,
                name,
                namespace,
                min_resource_version=min_resource_version,
                fields=fields,
                wait_for_sync=wait_for_sync,
                cluster=cluster,
                timeout=timeout,
            ).object.json
        )
        return obj

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
        req = pb.GetRequest(
            resource=resource,
            cluster=cluster,
            namespace=namespace,
            name=name,
            min_resource_version=min_resource_version,
            fields=list(fields),
            wait_for_sync=wait_for_sync,
        )
        try:
            resp: pb.GetResponse = self._stub.Get(req, timeout=self._timeout(timeout))
            return resp
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

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
        items: list[dict[str, Any]] = []
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
            items.extend(json.loads(o.json) for o in chunk.objects)
            if chunk.last:
                return ListResult(items, chunk.epoch, chunk.revision, chunk.synced)
        raise InformerdError(grpc.StatusCode.INTERNAL, None, "the List stream ended without its last message")

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
        req = pb.ListRequest(
            resource=resource,
            cluster=cluster,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            index=_index(index),
            fields=list(fields),
            wait_for_sync=wait_for_sync,
            chunk_size=chunk_size,
            min_resource_version=min_resource_version,
            limit=limit,
        )
        call = self._stub.List(req, timeout=self._timeout(timeout))
        try:
            yield from call
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None
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
    ) -> Watch:
        """Opens a watch: iterate the result for Events, `cancel()` it to stop.

        `since`: replay exactly the changes after this token, then follow (OUT_OF_RANGE when
        the token is too old or from another run of the sidecar: relist).
        `send_initial_state`: the current state as ADDED events, one SYNCED, then follow.
        Neither: follow from the current revision. `bookmark_interval` is in seconds.
        `cluster` (every call takes it): the sidecar's remote cluster (`clusters[].name`) to
        read; empty: the cluster it runs in. Tokens of one cluster's cache are refused by
        another's (OUT_OF_RANGE).
        """
        if since is not None and send_initial_state:
            raise ValueError("since and send_initial_state exclude each other")
        req = pb.WatchRequest(
            resource=resource,
            cluster=cluster,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            index=_index(index),
            fields=list(fields),
            predicates=_predicates(predicates),
            predicate_cel=predicate_cel,
            bookmark_interval_seconds=bookmark_interval or 0,
            wait_for_sync=wait_for_sync,
        )
        if since is not None:
            req.since.CopyFrom(pb.ResumeToken(epoch=since.epoch, revision=since.revision))
        elif send_initial_state:
            req.send_initial_state = True
        try:
            return Watch(self._stub.Watch(req, timeout=timeout))
        except ValueError as err:  # the channel is closed
            raise InformerdError(grpc.StatusCode.CANCELLED, None, str(err)) from None

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
        req = pb.EnsureRequest(api_version=api_version, kind=kind, namespaces=list(namespaces), cluster=cluster)
        try:
            resource: str = self._stub.Ensure(req, timeout=self._timeout(timeout)).resource
            return resource
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    # --- Status ----------------------------------------------------------------------------

    def status(self, resource: str = "", *, cluster: str = "", timeout: float | None = None) -> pb.StatusResponse:
        """What the sidecar caches and how it is doing (the raw StatusResponse); `cluster`:
        only that cluster's resources (and its entry of `clusters`)."""
        req = pb.StatusRequest(resource=resource, cluster=cluster)
        try:
            st: pb.StatusResponse = self._stub.Status(req, timeout=self._timeout(timeout))
            return st
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    def wait_for_sync(self, timeout: float = 60.0, *, resource: str = "") -> pb.StatusResponse:
        """Polls Status until the sidecar (or `resource`) reports synced; also waits for the
        sidecar to come up. Raises TimeoutError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while True:
            try:
                st = self.status(resource, timeout=max(0.5, min(5.0, deadline - time.monotonic())))
                if st.synced:
                    return st
                last = None
            except InformerdError as err:
                # Not up yet (no socket, connection refused), or NotSynced; anything else is
                # an answer.
                if err.code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise
                last = err
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"informerd at {self.address} not synced after {timeout:.0f}s"
                    + (f": {last}" if last else "")
                )
            time.sleep(0.2)

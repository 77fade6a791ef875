"""WatchKeys for Python: iterate a KeyWatch for the keys of changed objects, acknowledge each
with `ack(event)` when handled; the sidecar sends a key again only when it changes after that.
The queue's contract (coalescing, debounce, resync, resume) is in the proto, above
WatchKeysRequest.

    from informerd import Client, KeyEventType, watch_keys

    with watch_keys(Client(), "pods", namespace="web", debounce=0.5) as keys:
        for event in keys:
            if event.type is KeyEventType.KEY:
                reconcile(event.key)  # a Get of it says NOT_FOUND when event.deleted
                keys.ack(event)
"""

from __future__ import annotations

import enum
import queue
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple, Self

import grpc

from ._client import Client, Predicate, ResumeToken, _index, _predicates
from ._errors import InformerdError, from_rpc_error
from .v1 import cache_pb2 as pb


class KeyEventType(str, enum.Enum):
    KEY = "KEY"
    RESYNC_START = "RESYNC_START"
    RESYNC_END = "RESYNC_END"
    PROGRESS = "PROGRESS"


_KEY_EVENT_TYPES = {getattr(pb, t.value): t for t in KeyEventType}


class Key(NamedTuple):
    """The object to look at; `kind` is the resource's, or the owner mapping's."""

    kind: str
    namespace: str
    name: str


@dataclass(frozen=True)
class KeyEvent:
    type: KeyEventType
    key: Key | None
    # KEY: the revision of the key's last change this delivery covers (acknowledge with it).
    revision: int
    deleted: bool
    # Resume with watch_keys(since=token); None while a resync is not fully acknowledged.
    token: ResumeToken | None
    # What the sidecar keeps for this stream.
    pending: int
    in_flight: int
    queue_bytes: int


_DONE = object()


class KeyWatch:
    """An open WatchKeys stream: iterate for KeyEvents, `ack()` keys (from any thread),
    `cancel()` to stop. Iteration raises InformerdError when the call fails (a refused
    subscription: INVALID_ARGUMENT naming the field)."""

    def __init__(self, client: Client, subscription: pb.KeysSubscription, timeout: float | None):
        self._requests: queue.Queue[Any] = queue.Queue()
        self._requests.put(pb.WatchKeysRequest(subscribe=subscription))
        self._cancelled = threading.Event()
        try:
            self._call = client.stub.WatchKeys(self._request_iterator(), timeout=timeout)
        except ValueError as err:  # the channel is closed
            raise InformerdError(grpc.StatusCode.CANCELLED, None, str(err)) from None

    def _request_iterator(self) -> Iterator[pb.WatchKeysRequest]:
        while True:
            request = self._requests.get()
            if request is _DONE:
                return
            yield request

    def __iter__(self) -> Iterator[KeyEvent]:
        try:
            for ev in self._call:
                kind = _KEY_EVENT_TYPES.get(ev.type)
                if kind is None:
                    continue  # a type this client does not know (a newer server)
                yield KeyEvent(
                    type=kind,
                    key=Key(ev.key.kind, ev.key.namespace, ev.key.name) if ev.HasField("key") else None,
                    revision=ev.revision,
                    deleted=ev.deleted,
                    token=ResumeToken(ev.token.epoch, ev.token.revision) if ev.HasField("token") else None,
                    pending=ev.pending,
                    in_flight=ev.in_flight,
                    queue_bytes=ev.queue_bytes,
                )
        except grpc.RpcError as err:
            if self._cancelled.is_set() and err.code() == grpc.StatusCode.CANCELLED:
                return
            raise from_rpc_error(err) from None

    def ack(self, event: KeyEvent | Key, revision: int | None = None) -> None:
        """Acknowledges a KEY event (or a key with the revision it was sent with)."""
        if isinstance(event, KeyEvent):
            if event.key is None:
                return
            key, revision = event.key, event.revision
        else:
            key = event
        if revision is None:
            raise ValueError("ack(key, revision): the revision the key was sent with is required")
        self.ack_all([(key, revision)])

    def ack_all(self, keys: Iterable[tuple[Key, int]]) -> None:
        """Acknowledges several keys in one message."""
        acks = [pb.KeyAck(key=pb.Key(kind=k.kind, namespace=k.namespace, name=k.name), revision=r) for k, r in keys]
        if acks:
            self._requests.put(pb.WatchKeysRequest(ack=pb.KeyAcks(acks=acks)))

    def cancel(self) -> None:
        if not self._cancelled.is_set():
            self._cancelled.set()
            self._requests.put(_DONE)
            self._call.cancel()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


def watch_keys(
    client: Client,
    resource: str,
    *,
    namespace: str = "",
    cluster: str = "",
    label_selector: str = "",
    field_selector: str = "",
    index: pb.IndexLookup | tuple[str, str] | None = None,
    predicates: Iterable[Predicate | int] = (),
    predicate_cel: str = "",
    since: ResumeToken | None = None,
    debounce: float = 0.0,
    max_delay: float = 0.0,
    owner_kind: str = "",
    owner_api_version: str = "",
    owner_and_self: bool = False,
    wait_for_sync: bool = False,
    timeout: float | None = None,
) -> KeyWatch:
    """Subscribes to the keys of a resource. `debounce` and `max_delay` are in seconds (a key
    comes once quiet for `debounce`, at the latest `max_delay` after its first change; 0: ten
    debounces). `owner_kind` sends the key of each object's controller owner of that kind
    instead of (with `owner_and_self`, as well as) its own. Without `since`, or with a token the
    sidecar cannot resume from, the stream starts with a resync of every key. `cluster`: the
    sidecar's remote cluster (`clusters[].name`); empty: the cluster it runs in."""
    sub = pb.KeysSubscription(
        resource=resource,
        cluster=cluster,
        namespace=namespace,
        label_selector=label_selector,
        field_selector=field_selector,
        index=_index(index),
        predicates=_predicates(predicates),
        predicate_cel=predicate_cel,
        debounce_millis=round(debounce * 1000),
        max_delay_millis=round(max_delay * 1000),
        wait_for_sync=wait_for_sync,
    )
    if since is not None:
        sub.since.CopyFrom(pb.ResumeToken(epoch=since.epoch, revision=since.revision))
    if owner_kind:
        mode = pb.OWNER_AND_SELF if owner_and_self else pb.OWNER_ONLY
        sub.owner.CopyFrom(pb.OwnerMapping(kind=owner_kind, api_version=owner_api_version, mode=mode))
    return KeyWatch(client, sub, timeout)

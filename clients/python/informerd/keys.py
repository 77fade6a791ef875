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

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import Any, Self

import grpc

from ._client import Client, Predicate, ResumeToken
from ._errors import closed_channel, from_rpc_error
from ._keys_model import Key, KeyEvent, KeyEventType, ack_of, key_event_from_pb
from ._requests import acks_request, coalesce_acks, keys_subscription
from .v1 import cache_pb2 as pb

__all__ = ["Key", "KeyEvent", "KeyEventType", "KeyWatch", "watch_keys"]

_DONE = object()


class KeyWatch:
    """An open WatchKeys stream: iterate for KeyEvents, `ack()` keys (from any thread),
    `cancel()` to stop. Iteration raises InformerdError when the call fails (a refused
    subscription: INVALID_ARGUMENT naming the field)."""

    def __init__(self, client: Client, subscription: pb.KeysSubscription, timeout: float | None):
        self._requests: queue.Queue[Any] = queue.Queue()
        self._requests.put(pb.WatchKeysRequest(subscribe=subscription))
        self._cancelled = threading.Event()
        self._hint = client._hint
        try:
            self._call = client.stub.WatchKeys(self._request_iterator(), timeout=timeout)
        except ValueError as err:  # the channel is closed
            raise closed_channel(err) from None

    def _request_iterator(self) -> Iterator[pb.WatchKeysRequest]:
        while True:
            # What is queued goes at once, its acks in one message (`coalesce_acks`).
            batch = [self._requests.get()]
            while True:
                try:
                    batch.append(self._requests.get_nowait())
                except queue.Empty:
                    break
            done = next((i for i, r in enumerate(batch) if r is _DONE), None)
            yield from coalesce_acks(batch[:done])
            if done is not None:
                return

    def __iter__(self) -> Iterator[KeyEvent]:
        try:
            for ev in self._call:
                event = key_event_from_pb(ev)
                if event is not None:
                    yield event
        except grpc.RpcError as err:
            if self._cancelled.is_set() and err.code() == grpc.StatusCode.CANCELLED:
                return
            raise from_rpc_error(err, self._hint) from None

    def ack(self, event: KeyEvent | Key, revision: int | None = None) -> None:
        """Acknowledges a KEY event (or a key with the revision it was sent with)."""
        ack = ack_of(event, revision)
        if ack is not None:
            self.ack_all([ack])

    def ack_all(self, keys: Iterable[tuple[Key, int]]) -> None:
        """Acknowledges several keys in one message."""
        request = acks_request(keys)
        if request is not None:
            self._requests.put(request)

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
    send_objects: bool = False,
    fields: Iterable[str] = (),
    timeout: float | None = None,
) -> KeyWatch:
    """Subscribes to the keys of a resource. `debounce` and `max_delay` are in seconds (a key
    comes once quiet for `debounce`, at the latest `max_delay` after its first change; 0: ten
    debounces). `owner_kind` sends the key of each object's controller owner of that kind
    instead of (with `owner_and_self`, as well as) its own. Without `since`, or with a token the
    sidecar cannot resume from, the stream starts with a resync of every key. `cluster`: the
    sidecar's remote cluster (`clusters[].name`); empty: the cluster it runs in.
    `send_objects`: each key of an object comes with the object (`KeyEvent.object`, only
    `fields` of it if given), so reading it needs no Get."""
    sub = keys_subscription(
        resource,
        namespace=namespace,
        cluster=cluster,
        label_selector=label_selector,
        field_selector=field_selector,
        index=index,
        predicates_=predicates,
        predicate_cel=predicate_cel,
        since=since,
        debounce=debounce,
        max_delay=max_delay,
        owner_kind=owner_kind,
        owner_api_version=owner_api_version,
        owner_and_self=owner_and_self,
        wait_for_sync=wait_for_sync,
        send_objects=send_objects,
        fields=fields,
    )
    return KeyWatch(client, sub, timeout)

"""WatchKeys for asyncio: `async for` a KeyWatch for the keys of changed objects, acknowledge
each with `ack(event)` when handled; the sidecar sends a key again only when it changes after
that. The messages and their decoding are informerd._keys_model's and _requests', shared with
informerd.keys.

    from informerd.aio import Client, KeyEventType, watch_keys

    async with watch_keys(Client(), "pods", namespace="web", debounce=0.5) as keys:
        async for event in keys:
            if event.type is KeyEventType.KEY:
                await reconcile(event.key)
                keys.ack(event)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import Self

import grpc
import grpc.aio

from .._errors import closed_channel, from_rpc_error
from .._keys_model import Key, KeyEvent, KeyEventType, ack_of, key_event_from_pb
from .._model import Predicate, ResumeToken
from .._requests import acks_request, coalesce_acks, keys_subscription
from ..v1 import cache_pb2 as pb
from ._client import Client, _cancelled_by

__all__ = ["Key", "KeyEvent", "KeyEventType", "KeyWatch", "watch_keys"]


class KeyWatch:
    """An open WatchKeys stream: `async for` KeyEvents, `ack()` keys (plain calls, on the event
    loop's thread), `cancel()` to stop. Iteration raises InformerdError when the call fails (a
    refused subscription: INVALID_ARGUMENT naming the field)."""

    def __init__(self, client: Client, subscription: pb.KeysSubscription, timeout: float | None):
        # None ends the requests (cancel()).
        self._requests: asyncio.Queue[pb.WatchKeysRequest | None] = asyncio.Queue()
        self._requests.put_nowait(pb.WatchKeysRequest(subscribe=subscription))
        self._cancelled = False
        self._hint = client._hint
        metadata = client.metadata()
        try:
            self._call = client.stub.WatchKeys(self._request_iterator(), timeout=timeout, metadata=metadata)
        except grpc.aio.UsageError as err:  # the channel is closed
            raise closed_channel(err) from None

    async def _request_iterator(self) -> AsyncIterator[pb.WatchKeysRequest]:
        while True:
            # What is queued goes at once, its acks in one message (`coalesce_acks`).
            batch = [await self._requests.get()]
            while not self._requests.empty():
                batch.append(self._requests.get_nowait())
            done = next((i for i, r in enumerate(batch) if r is None), None)
            for request in coalesce_acks([r for r in batch[:done] if r is not None]):
                yield request
            if done is not None:
                return

    def __aiter__(self) -> AsyncIterator[KeyEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[KeyEvent]:
        try:
            async for ev in self._call:
                event = key_event_from_pb(ev)
                if event is not None:
                    yield event
        except asyncio.CancelledError:
            if _cancelled_by(self._cancelled):
                return
            raise
        except grpc.RpcError as err:
            if self._cancelled and err.code() == grpc.StatusCode.CANCELLED:
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
            self._requests.put_nowait(request)

    def cancel(self) -> None:
        if not self._cancelled:
            self._cancelled = True
            self._requests.put_nowait(None)
            self._call.cancel()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
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
    """Subscribes to the keys of a resource (the arguments of informerd.watch_keys). Not a
    coroutine: the stream starts at once; iterate it with `async for`."""
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

"""The asyncio client of informerd: Get, List, Watch, Ensure and Status over a grpc.aio
channel, with the synchronous client's API as coroutines and async iterators. Requests,
decoding, errors and the address are the shared modules' (informerd._requests, _model,
_errors, _address), so both clients send and return the same for the same arguments."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Sequence
from typing import Any, Self

import grpc
import grpc.aio

from .._address import ConnectionTarget
from .._errors import InformerdError, closed_channel, from_rpc_error
from .._model import Event, ListCollector, ListResult, Predicate, ResumeToken, decode_object, event_from_pb
from .._requests import ensure_request, get_request, list_request, status_request, watch_request
from .._token import bearer, token_source
from .._wait import SyncPoll
from ..v1 import cache_pb2 as pb
from ..v1 import cache_pb2_grpc as pb_grpc

Metadata = tuple[tuple[str, str], ...]


def _cancelled_by(cancelled: bool) -> bool:
    """A CancelledError out of a grpc.aio call is the call's cancel() (ours, when `cancelled`),
    unless the task reading it is itself being cancelled, which must go on."""
    task = asyncio.current_task()
    return cancelled and (task is None or task.cancelling() == 0)


class Watch:
    """An open Watch call: `async for event in watch`; `cancel()` ends it.

    Iteration raises InformerdError when the call fails (not when it was cancelled with
    `cancel()`, which just ends the iteration). When the server ends the stream without an
    error, iteration ends too: resume with `since` the last token received. Cancelling the task
    that iterates cancels the call too.
    """

    def __init__(self, call: Any, hint: str = ""):
        self._call = call
        self._hint = hint
        self._cancelled = False

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events()

    async def _events(self) -> AsyncIterator[Event]:
        try:
            async for ev in self._call:
                event = event_from_pb(ev)
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

    def cancel(self) -> None:
        """Ends the call (call it on the event loop's thread)."""
        if not self._cancelled:
            self._cancelled = True
            self._call.cancel()

    @property
    def cancelled_by_user(self) -> bool:
        """cancel() was called (before the call ended by itself, or after)."""
        return self._cancelled

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()


class Client:
    """An asyncio client of one informerd sidecar; make it inside a running event loop.

    The arguments are the synchronous informerd.Client's: `address` (else $INFORMERD_SOCKET,
    else DEFAULT_SOCKET), `timeout` (the default deadline of Get, List, Ensure and Status),
    `channel` (a grpc.aio.Channel of your own), `options`, `token` or `token_file`.

        async with Client() as c:
            pods = await c.list("pods", namespace="default", label_selector="app=web")
            async with c.watch("pods", since=pods.token) as w:
                async for event in w:
                    ...
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        timeout: float | None = None,
        channel: grpc.aio.Channel | None = None,
        options: Sequence[tuple[str, Any]] = (),
        token: str | None = None,
        token_file: str | os.PathLike[str] | None = None,
    ):
        where = ConnectionTarget.resolve(address)
        self.address = where.address
        self.timeout = timeout
        self._hint = where.hint
        self._token = token_source(token, token_file)
        self._own_channel = channel is None
        self._channel = channel or grpc.aio.insecure_channel(where.target, options=where.channel_options(options))
        self._stub = pb_grpc.CacheStub(self._channel)
        self.closed = False

    @property
    def stub(self) -> pb_grpc.CacheStub:
        """The generated stub over the grpc.aio channel, for requests this wrapper does not
        cover. Its calls carry the token only when given `metadata=client.metadata()`."""
        return self._stub

    def metadata(self) -> Metadata:
        """The metadata of a call: the `authorization` of `token`/`token_file`, if any. Raises
        InformerdError (UNAUTHENTICATED) naming a token file that cannot be read."""
        return () if self._token is None else (bearer(self._token),)

    async def close(self) -> None:
        self.closed = True
        if self._own_channel:
            await self._channel.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _timeout(self, timeout: float | None) -> float | None:
        return self.timeout if timeout is None else timeout

    def _error(self, err: grpc.RpcError) -> InformerdError:
        return from_rpc_error(err, self._hint)

    async def _unary(self, method: Any, request: Any, timeout: float | None) -> Any:
        """One unary call; its failure as an InformerdError."""
        metadata = self.metadata()
        try:
            return await method(request, timeout=self._timeout(timeout), metadata=metadata)
        except grpc.RpcError as err:
            raise self._error(err) from None
        except grpc.aio.UsageError as err:  # the channel is closed
            raise closed_channel(err) from None

    # --- Get -------------------------------------------------------------------------------

    async def get(
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
        """One object, as its decoded JSON (see informerd.Client.get). Raises NotFoundError
        when there is none."""
        return decode_object(
            await self.get_response(
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

    async def get_response(
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
        resp: pb.GetResponse = await self._unary(self._stub.Get, req, timeout)
        return resp

    # --- List ------------------------------------------------------------------------------

    async def list(
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
        """The matching objects (decoded JSON) and the (epoch, revision) they are all at (see
        informerd.Client.list)."""
        collected = ListCollector()
        chunks = self.list_chunks(
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
        )
        try:
            async for chunk in chunks:
                result = collected.add(chunk)
                if result is not None:
                    return result
        finally:
            await chunks.aclose()
        raise ListCollector.incomplete()

    async def list_chunks(
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
    ) -> AsyncGenerator[pb.ListResponse, None]:
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
        metadata = self.metadata()
        try:
            call = self._stub.List(req, timeout=self._timeout(timeout), metadata=metadata)
        except grpc.aio.UsageError as err:
            raise closed_channel(err) from None
        try:
            async for chunk in call:
                yield chunk
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
        """Opens a watch (see informerd.Client.watch): `async for` the result for Events,
        `cancel()` it to stop. Not a coroutine: the call starts at once."""
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
        metadata = self.metadata()
        try:
            return Watch(self._stub.Watch(req, timeout=timeout, metadata=metadata), self._hint)
        except grpc.aio.UsageError as err:  # the channel is closed
            raise closed_channel(err) from None

    # --- Ensure ----------------------------------------------------------------------------

    async def ensure(
        self,
        api_version: str,
        kind: str,
        namespaces: Sequence[str] = (),
        *,
        cluster: str = "",
        timeout: float | None = None,
    ) -> str:
        """A cache of `kind` in `namespaces`, made on demand; returns the resource name to read
        it by once it has synced (see informerd.Client.ensure)."""
        req = ensure_request(api_version, kind, namespaces, cluster=cluster)
        resp = await self._unary(self._stub.Ensure, req, timeout)
        resource: str = resp.resource
        return resource

    # --- Status ----------------------------------------------------------------------------

    async def status(
        self, resource: str = "", *, cluster: str = "", timeout: float | None = None
    ) -> pb.StatusResponse:
        """What the sidecar caches and how it is doing (the raw StatusResponse)."""
        st: pb.StatusResponse = await self._unary(self._stub.Status, status_request(resource, cluster=cluster), timeout)
        return st

    async def wait_for_sync(self, timeout: float = 60.0, *, resource: str = "") -> pb.StatusResponse:
        """Polls Status until the sidecar (or `resource`) reports synced; also waits for the
        sidecar to come up. Raises TimeoutError after `timeout` seconds."""
        poll = SyncPoll(self.address, timeout)
        while True:
            try:
                st = await self.status(resource, timeout=poll.call_timeout())
                if poll.answered(st):
                    return st
            except InformerdError as err:
                poll.failed(err)  # raises unless it is to be waited through
            await asyncio.sleep(poll.INTERVAL)

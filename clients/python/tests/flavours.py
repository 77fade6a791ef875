"""The two flavours every scenario runs in: the synchronous client (informerd) and the asyncio
one (informerd.aio). The tests are written against the synchronous API, with threads where
they need them; for the asyncio flavour a thin adapter gives them that API over informerd.aio:
an event loop runs in a thread of its own, each call runs there as a coroutine and is waited
for, each iteration step is one `__anext__` there. What runs is informerd.aio's own code (its
channel, calls, cancellation, informer task and key stream); the adapter only carries calls
and results across the thread boundary, so both flavours are held to the same assertions.

Decision: the handlers the tests give an aio Informer run in a worker thread
(`asyncio.to_thread`, awaited before the next change, which also exercises coroutine
handlers): they are the synchronous tests' handlers, and one of them blocks on purpose (a
stalled consumer), which on the loop itself would stall every other call of the test too.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterable, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Self

import informerd
import informerd.aio


@dataclass(frozen=True)
class Flavour:
    """What a test makes clients, informers and key streams with."""

    name: str
    Client: Callable[..., Any]
    Informer: Callable[..., Any]
    watch_keys: Callable[..., Any]


SYNC = Flavour("sync", informerd.Client, informerd.Informer, informerd.watch_keys)


class LoopThread:
    """An asyncio event loop running in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="aio-flavour", daemon=True)
        self.thread.start()

    def run(self, awaitable: Awaitable[Any]) -> Any:
        """Runs a coroutine (or awaits an awaitable) on the loop; its result or exception."""

        async def wrapped() -> Any:
            return await awaitable

        return asyncio.run_coroutine_threadsafe(wrapped(), self.loop).result()

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Calls a plain function on the loop's thread (grpc.aio needs its running loop)."""

        async def wrapped() -> Any:
            return fn(*args, **kwargs)

        return self.run(wrapped())

    def iterate(self, iterable: AsyncIterable[Any]) -> Iterator[Any]:
        """An async iterable as an iterator: each step one `__anext__` on the loop."""
        it = self.call(iterable.__aiter__)
        while True:
            try:
                yield self.run(it.__anext__())
            except StopAsyncIteration:
                return

    def close(self) -> None:
        async def finish() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.loop.shutdown_asyncgens()

        try:
            asyncio.run_coroutine_threadsafe(finish(), self.loop).result(30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(30)
            self.loop.close()


def _sync(name: str) -> Callable[..., Any]:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self._loop.run(getattr(self.aio, name)(*args, **kwargs))

    method.__name__ = name
    return method


class _Proxy:
    """Reads the attributes the adapter does not wrap (counters, addresses, ...) from the aio
    object."""

    aio: Any
    _loop: LoopThread

    def __getattr__(self, name: str) -> Any:
        if name in ("aio", "_loop"):  # not set: __init__ failed
            raise AttributeError(name)
        return getattr(self.aio, name)


class AioWatch(_Proxy):
    def __init__(self, loop: LoopThread, watch: informerd.aio.Watch):
        self._loop, self.aio = loop, watch

    def __iter__(self) -> Iterator[informerd.Event]:
        return self._loop.iterate(self.aio)

    def cancel(self) -> None:
        self._loop.call(self.aio.cancel)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


class AioClient(_Proxy):
    def __init__(self, loop: LoopThread, *args: Any, **kwargs: Any):
        self._loop = loop
        self.aio = loop.call(informerd.aio.Client, *args, **kwargs)

    get = _sync("get")
    get_response = _sync("get_response")
    list = _sync("list")
    ensure = _sync("ensure")
    status = _sync("status")
    wait_for_sync = _sync("wait_for_sync")
    close = _sync("close")

    def list_chunks(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        return self._loop.iterate(self.aio.list_chunks(*args, **kwargs))

    def watch(self, *args: Any, **kwargs: Any) -> AioWatch:
        return AioWatch(self._loop, self._loop.call(self.aio.watch, *args, **kwargs))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _in_thread(handler: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    async def run(*args: Any) -> Any:
        return await asyncio.to_thread(handler, *args)

    return run


class AioInformer(_Proxy):
    HANDLERS = ("on_add", "on_update", "on_delete", "on_synced")

    def __init__(self, client: AioClient, resource: str, **kwargs: Any):
        self._loop = client._loop
        for name in self.HANDLERS:
            if kwargs.get(name) is not None:
                kwargs[name] = _in_thread(kwargs[name])
        self.aio = self._loop.call(informerd.aio.Informer, client.aio, resource, **kwargs)

    run = _sync("run")
    stop = _sync("stop")
    wait_for_sync = _sync("wait_for_sync")

    def start(self) -> asyncio.Task[None]:
        return self._loop.call(self.aio.start)

    def reconnect(self) -> None:
        self._loop.call(self.aio.reconnect)

    def deltas(self) -> Iterator[informerd.Delta]:
        return self._loop.iterate(self.aio.deltas())


class AioKeyWatch(_Proxy):
    def __init__(self, loop: LoopThread, keys: informerd.aio.KeyWatch):
        self._loop, self.aio = loop, keys

    def __iter__(self) -> Iterator[informerd.KeyEvent]:
        return self._loop.iterate(self.aio)

    def ack(self, *args: Any) -> None:
        self._loop.call(self.aio.ack, *args)

    def ack_all(self, keys: Any) -> None:
        self._loop.call(self.aio.ack_all, list(keys))

    def cancel(self) -> None:
        self._loop.call(self.aio.cancel)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


def aio_watch_keys(client: AioClient, resource: str, **kwargs: Any) -> AioKeyWatch:
    return AioKeyWatch(client._loop, client._loop.call(informerd.aio.watch_keys, client.aio, resource, **kwargs))


def aio_flavour(loop: LoopThread) -> Flavour:
    return Flavour(
        "aio",
        lambda *args, **kwargs: AioClient(loop, *args, **kwargs),
        AioInformer,
        aio_watch_keys,
    )

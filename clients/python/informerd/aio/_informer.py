"""The asyncio Informer: handlers (plain functions or coroutines) for adds, updates and deletes,
kept exact across broken connections, slow reads and sidecar restarts, without an object
cache. The state machine is informerd._informer_core's, shared with the synchronous Informer;
this runs it in a task around informerd.aio's Watch."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import AsyncGenerator, Callable, Iterable
from typing import Any

from .._errors import InformerdError
from .._informer_core import DeletedFinalStateUnknown, Delta, DeltaType, InformerCore, Outcome
from .._model import ObjectRef, Predicate
from ..v1 import cache_pb2 as pb
from ._client import Client, Watch

log = logging.getLogger("informerd")


class Informer(InformerCore):
    """Follows one resource of the sidecar and tells handlers what changed, as
    informerd.Informer does (the same arguments, counters and guarantees), in a task:

        informer = Informer(client, "pods", namespace="default",
                            on_add=on_add, on_update=on_update, on_delete=on_delete)
        informer.start()              # a task; or `await informer.run()`, or
                                      # `async for delta in informer.deltas()`
        await informer.wait_for_sync(60)
        ...
        await informer.stop()

    A handler may be a plain function or a coroutine function (it is awaited before the next
    change is delivered); a handler that blocks blocks the event loop. An exception in a
    handler ends run() with it (after start(), it is kept in `error`).
    """

    def __init__(
        self,
        client: Client,
        resource: str,
        *,
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
        index: pb.IndexLookup | tuple[str, str] | None = None,
        fields: Iterable[str] = (),
        predicates: Iterable[Predicate | int] = (),
        predicate_cel: str = "",
        bookmark_interval: int | None = None,
        on_add: Callable[[dict[str, Any]], Any] | None = None,
        on_update: Callable[[ObjectRef, dict[str, Any]], Any] | None = None,
        on_delete: Callable[[dict[str, Any] | DeletedFinalStateUnknown], Any] | None = None,
        on_synced: Callable[[], Any] | None = None,
        backoff_initial: float = 0.1,
        backoff_max: float = 5.0,
    ):
        super().__init__(
            resource,
            self.watch_args(
                namespace, label_selector, field_selector, index, fields, predicates, predicate_cel, bookmark_interval
            ),
            (on_add, on_update, on_delete, on_synced),
            backoff_initial,
            backoff_max,
        )
        self.client = client
        self._synced = asyncio.Event()
        self._stop = asyncio.Event()
        self._watch: Watch | None = None
        self._task: asyncio.Task[None] | None = None
        self._running = False

    # --- observing -------------------------------------------------------------------------

    def has_synced(self) -> bool:
        """The handlers have been given the whole initial state."""
        return self._synced.is_set()

    async def wait_for_sync(self, timeout: float | None = None) -> bool:
        """True once the handlers have the whole initial state; False after `timeout` seconds."""
        try:
            await asyncio.wait_for(self._synced.wait(), timeout)
        except TimeoutError:
            return False
        return True

    @property
    def running(self) -> bool:
        """run() or deltas() is going on."""
        return self._running

    # --- running ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Delivers changes to the handlers until stop()."""
        async with contextlib.aclosing(self.deltas()) as deltas:
            async for d in deltas:
                call = self._handler_call(d)
                if call is not None:
                    handler, args = call
                    result = handler(*args)
                    if inspect.isawaitable(result):
                        await result

    def start(self) -> asyncio.Task[None]:
        """Runs run() in a task; a handler's exception is kept in `error`."""

        async def target() -> None:
            try:
                await self.run()
            except asyncio.CancelledError:
                raise
            except BaseException as err:  # kept for the owner to see (and logged)
                self.error = err
                log.exception("informer for %s stopped", self.resource)

        self._task = asyncio.get_running_loop().create_task(target(), name=f"informer-{self.resource}")
        return self._task

    async def stop(self, timeout: float | None = None) -> None:
        """Stops run()/deltas() and, after start(), waits (up to `timeout` seconds) for its
        task; called from a handler, it does not wait for the task it runs in."""
        self._stop.set()
        if self._watch is not None:
            self._watch.cancel()
        task = self._task
        if task is not None and task is not asyncio.current_task() and not task.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), timeout)

    def reconnect(self) -> None:
        """Drops the current watch call; the informer resumes from its last token (as after a
        broken connection)."""
        if self._watch is not None:
            self._watch.cancel()

    # --- the loop --------------------------------------------------------------------------

    def _open(self) -> Watch:
        w = self.client.watch(self.resource, **self._next_watch())
        self._watch = w
        if self._stop.is_set():
            w.cancel()
        return w

    async def deltas(self) -> AsyncGenerator[Delta, None]:
        """The changes, as an async generator (what run() dispatches to the handlers). Ends
        after stop(); raises InformerdError on an error that retrying cannot fix (e.g.
        NotFound, Invalid). Close it (contextlib.aclosing) when leaving it early: that ends
        the watch call."""
        if self._running:
            raise RuntimeError("an Informer runs once at a time")
        self._running = True
        backoff = self.backoff_initial
        try:
            while not self._stop.is_set():
                received = False
                w: Watch | None = None
                try:
                    w = self._open()
                    async for ev in w:
                        received = True
                        for d in self._on_event(ev):
                            if d.type is DeltaType.SYNCED:
                                self._synced.set()
                            yield d
                        self._delivered()
                        backoff = self.backoff_initial
                except InformerdError as err:
                    if self._stop.is_set() or self.client.closed:
                        break
                    if self._on_error(err) is Outcome.RELIST:
                        continue
                finally:
                    # reconnect() cancelled the call: resume at once, no backoff.
                    interrupted = w is not None and w.cancelled_by_user
                    # Also when the consumer of deltas() stops iterating: end the call.
                    if w is not None:
                        w.cancel()
                    self._watch = None
                if self._stop.is_set():
                    break
                if not received and not interrupted:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stop.wait(), backoff)
                    backoff = self._next_backoff(backoff)
        finally:
            self._running = False


__all__ = ["DeletedFinalStateUnknown", "Delta", "DeltaType", "Informer"]

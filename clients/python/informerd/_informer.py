"""An informer over informerd's Watch: handlers for adds, updates and deletes, kept exact
across broken connections, slow reads and sidecar restarts, without an object cache. The state
machine is _informer_core's, shared with informerd.aio.Informer; this is its thread."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ._client import Client, ObjectRef, Predicate, Watch
from ._errors import InformerdError
from ._informer_core import DeletedFinalStateUnknown, Delta, DeltaType, InformerCore, Outcome
from .v1 import cache_pb2 as pb

__all__ = ["DeletedFinalStateUnknown", "Delta", "DeltaType", "Informer"]

log = logging.getLogger("informerd")


class Informer(InformerCore):
    """Follows one resource of the sidecar and tells handlers what changed.

        informer = Informer(client, "pods", namespace="default",
                            on_add=lambda pod: ...,
                            on_update=lambda old_ref, pod: ...,
                            on_delete=lambda pod_or_tombstone: ...)
        informer.start()              # or informer.run() to block, or iterate informer.deltas()
        informer.wait_for_sync(60)
        ...
        informer.stop()

    It starts with the current state (`send_initial_state`) and then follows the changes.
    When the connection breaks, or the sidecar ends the watch because it fell behind, it
    resumes `since` the last (epoch, revision) it received, so no change is missed or repeated.
    When the token can no longer be used (OUT_OF_RANGE: Expired, or EpochChanged after a
    sidecar restart), it lists again and delivers the differences against what the handlers
    had: adds, updates, and deletes (as DeletedFinalStateUnknown). For that it remembers
    only each object's key, uid and resourceVersion. Once it knows objects, that list is a
    delta resume (`held`: the hashes of the keys and resourceVersions it has): the sidecar
    sends only the objects that changed and names the ones that are gone, and the handlers
    get the same adds, updates and deletes as from a full list. A sidecar that refuses or
    ignores `held` (older than the delta resume) gets a full list from then on. A refused
    token or read (UNAUTHENTICATED, PERMISSION_DENIED) is asked again after the backoff, as
    client-go's reflector does: it serves once the grant is seen.

    Handlers run on the thread of run(); an exception in a handler ends run() with it.
    `predicates` and `predicate_cel` filter updates as the Watch does; after a relist, an
    object whose resourceVersion changed is delivered as an update whatever the predicates.

    Counters for observers and tests: `relists` (full lists after the first one, including a
    list started again because it was interrupted), `delta_resumes` (lists made as a delta
    resume), `resumes` (watches reopened `since` a token),
    `errors` (failed watch calls), `error_counts` (them by reason, e.g. `FellBehind`,
    `EpochChanged`), `last_error`.
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
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._watch: Watch | None = None
        self._thread: threading.Thread | None = None
        self._running = False

    # --- observing -------------------------------------------------------------------------

    def has_synced(self) -> bool:
        """The handlers have been given the whole initial state."""
        return self._synced.is_set()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    @property
    def running(self) -> bool:
        """run() or deltas() is going on."""
        return self._running

    # --- running ---------------------------------------------------------------------------

    def run(self) -> None:
        """Delivers changes to the handlers until stop(). Blocks."""
        for d in self.deltas():
            call = self._handler_call(d)
            if call is not None:
                handler, args = call
                handler(*args)

    def start(self) -> threading.Thread:
        """Runs run() in a daemon thread; a handler's exception is kept in `error`."""

        def target() -> None:
            try:
                self.run()
            except BaseException as err:  # kept for the owner to see (and logged)
                self.error = err
                log.exception("informer for %s stopped", self.resource)

        self._thread = threading.Thread(target=target, name=f"informer-{self.resource}", daemon=True)
        self._thread.start()
        return self._thread

    def stop(self, timeout: float | None = None) -> None:
        """Stops run()/deltas() (from any thread) and, after start(), waits for the thread."""
        self._stop.set()
        with self._lock:
            if self._watch is not None:
                self._watch.cancel()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def reconnect(self) -> None:
        """Drops the current watch call; the informer resumes from its last token (as after a
        broken connection)."""
        with self._lock:
            if self._watch is not None:
                self._watch.cancel()

    # --- the loop --------------------------------------------------------------------------

    def _open(self) -> Watch:
        w = self.client.watch(self.resource, **self._next_watch())
        with self._lock:
            self._watch = w
            if self._stop.is_set():
                w.cancel()
        return w

    def deltas(self) -> Iterator[Delta]:
        """The changes, as a generator (what run() dispatches to the handlers). Ends after
        stop(); raises InformerdError on an error that retrying cannot fix (e.g. NotFound,
        Invalid)."""
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
                    for ev in w:
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
                    with self._lock:
                        self._watch = None
                if self._stop.is_set():
                    break
                if not received and not interrupted:
                    self._stop.wait(backoff)
                    backoff = self._next_backoff(backoff)
        finally:
            self._running = False

"""An informer over informerd's Watch: handlers for adds, updates and deletes, kept exact
across broken connections, slow reads and sidecar restarts, without an object cache."""

from __future__ import annotations

import enum
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypedDict, cast

from ._client import (
    Client,
    Event,
    EventType,
    ObjectRef,
    Predicate,
    ResumeToken,
    Watch,
    object_key,
)
from ._errors import InformerdError
from .v1 import cache_pb2 as pb

log = logging.getLogger("informerd")


class _WatchArgs(TypedDict):
    """What every watch call of an Informer passes to Client.watch besides its start."""

    namespace: str
    label_selector: str
    field_selector: str
    index: pb.IndexLookup | tuple[str, str] | None
    fields: list[str]
    predicates: list[Predicate | int]
    predicate_cel: str
    bookmark_interval: int | None
    wait_for_sync: bool


@dataclass(frozen=True)
class DeletedFinalStateUnknown:
    """Given to on_delete for an object that went away (deleted, or stopped matching the
    filters) while the informer could not watch it: a relist no longer had it. Its last state
    is unknown; `ref` is the version the handlers saw last."""

    ref: ObjectRef

    @property
    def key(self) -> str:
        return self.ref.key


class DeltaType(str, enum.Enum):
    ADDED = "ADDED"
    UPDATED = "UPDATED"
    DELETED = "DELETED"
    # The handlers have seen the whole initial state (once, at the first sync).
    SYNCED = "SYNCED"


@dataclass(frozen=True)
class Delta:
    """A change to what the handlers see.

    ADDED: `object` is the object. UPDATED: `object` is the new state, `old` the version seen
    before (its identity and resourceVersion: the informer keeps no objects). DELETED:
    `object` is the last state, or a DeletedFinalStateUnknown when the deletion was found by a
    relist. `relist` tells whether the delta came from comparing a relist with what the
    handlers had.
    """

    type: DeltaType
    object: dict[str, Any] | DeletedFinalStateUnknown | None = None
    old: ObjectRef | None = None
    relist: bool = False

    @property
    def key(self) -> str | None:
        if isinstance(self.object, DeletedFinalStateUnknown):
            return self.object.key
        if self.object is None:
            return None
        md = self.object.get("metadata", {})
        return object_key(md.get("namespace", ""), md.get("name", ""))


class Informer:
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
    only each object's key, uid and resourceVersion.

    Handlers run on the thread of run(); an exception in a handler ends run() with it.
    `predicates` and `predicate_cel` filter updates as the Watch does; after a relist, an
    object whose resourceVersion changed is delivered as an update whatever the predicates.

    Counters for observers and tests: `relists` (lists after the first one, including a list
    started again because it was interrupted), `resumes` (watches reopened `since` a token),
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
        self.client = client
        self.resource = resource
        self._watch_args: _WatchArgs = {
            "namespace": namespace,
            "label_selector": label_selector,
            "field_selector": field_selector,
            "index": index,
            "fields": list(fields),
            "predicates": list(predicates),
            "predicate_cel": predicate_cel,
            "bookmark_interval": bookmark_interval,
            "wait_for_sync": True,
        }
        self.on_add = on_add
        self.on_update = on_update
        self.on_delete = on_delete
        self.on_synced = on_synced
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max

        self.relists = 0
        self.resumes = 0
        self.errors = 0
        # Failed watch calls by reason (the informerd-reason trailer, else the code's name).
        self.error_counts: Counter[str] = Counter()
        self.last_error: Exception | None = None
        # What run() in start()'s thread ended with, if it raised.
        self.error: BaseException | None = None

        # key -> (uid, resourceVersion) of what the handlers have seen.
        self._known: dict[str, tuple[str, str]] = {}
        self._token: ResumeToken | None = None
        self._listed_once = False
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

    @property
    def token(self) -> ResumeToken | None:
        """The (epoch, revision) the informer has delivered everything up to."""
        return self._token

    def known(self) -> dict[str, str]:
        """key -> resourceVersion of every object the handlers currently have."""
        return {k: rv for k, (_, rv) in dict(self._known).items()}

    # --- running ---------------------------------------------------------------------------

    def run(self) -> None:
        """Delivers changes to the handlers until stop(). Blocks."""
        # deltas() gives ADDED and UPDATED the object, UPDATED also the old ref, and DELETED the
        # object or a tombstone: the casts say so to the type checker.
        for d in self.deltas():
            if d.type is DeltaType.ADDED:
                if self.on_add:
                    self.on_add(cast("dict[str, Any]", d.object))
            elif d.type is DeltaType.UPDATED:
                if self.on_update:
                    self.on_update(cast(ObjectRef, d.old), cast("dict[str, Any]", d.object))
            elif d.type is DeltaType.DELETED:
                if self.on_delete:
                    self.on_delete(cast("dict[str, Any] | DeletedFinalStateUnknown", d.object))
            elif d.type is DeltaType.SYNCED and self.on_synced:
                self.on_synced()

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
        if self._token is not None:
            self.resumes += 1
            w = self.client.watch(self.resource, since=self._token, **self._watch_args)
        else:
            if self._listed_once:
                self.relists += 1
            self._listed_once = True
            w = self.client.watch(self.resource, send_initial_state=True, **self._watch_args)
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
                    listing = self._token is None
                    seen: set[str] = set()
                    for ev in w:
                        received = True
                        if listing:
                            if ev.type is EventType.SYNCED:
                                yield from self._finish_list(seen)
                                self._token = ev.token
                                listing = False
                                if not self._synced.is_set():
                                    self._synced.set()
                                    yield Delta(DeltaType.SYNCED)
                            elif ev.type in (EventType.ADDED, EventType.MODIFIED):
                                seen.add(cast(str, ev.key))  # these events carry their object
                                yield from self._apply(ev, relist=self.relists > 0)
                            elif ev.type is EventType.DELETED:
                                seen.discard(ev.key)
                                yield from self._apply(ev, relist=False)
                            # A BOOKMARK before SYNCED is no resume point: ignore it.
                        else:
                            yield from self._apply(ev, relist=False)
                            self._token = ev.token
                        backoff = self.backoff_initial
                except InformerdError as err:
                    if self._stop.is_set() or self.client.closed:
                        break
                    self.errors += 1
                    self.error_counts[err.reason or err.code.name] += 1
                    self.last_error = err
                    if err.needs_relist:
                        log.info("informer %s: %s; listing again", self.resource, err)
                        self._token = None
                        continue
                    if not err.can_resume:
                        raise
                    log.info("informer %s: %s; resuming", self.resource, err)
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
                    backoff = min(backoff * 2, self.backoff_max)
        finally:
            self._running = False

    def _apply(self, ev: Event, *, relist: bool) -> Iterator[Delta]:
        if ev.type in (EventType.BOOKMARK, EventType.SYNCED):
            return
        # ADDED, MODIFIED and DELETED events carry their object (and so a key).
        raw = cast(pb.Object, ev.raw)
        key = cast(str, ev.key)
        prev = self._known.get(key)
        if ev.type is EventType.DELETED:
            if prev is not None:
                del self._known[key]
                yield Delta(DeltaType.DELETED, ev.object, relist=relist)
            return
        cur = (raw.uid, raw.resource_version)
        if prev == cur:
            return  # already delivered (the same version)
        self._known[key] = cur
        if prev is None:
            yield Delta(DeltaType.ADDED, ev.object, relist=relist)
        elif prev[0] != cur[0]:
            # Deleted and created again under the same name while we were not watching.
            gone = ObjectRef(raw.namespace, raw.name, prev[0], prev[1])
            yield Delta(DeltaType.DELETED, DeletedFinalStateUnknown(gone), relist=relist)
            yield Delta(DeltaType.ADDED, ev.object, relist=relist)
        else:
            old = ObjectRef(raw.namespace, raw.name, prev[0], prev[1])
            yield Delta(DeltaType.UPDATED, ev.object, old=old, relist=relist)

    def _finish_list(self, seen: set[str]) -> Iterator[Delta]:
        """After a (re)list: whatever the handlers have that the list did not is gone."""
        for key in [k for k in self._known if k not in seen]:
            uid, rv = self._known.pop(key)
            ns, _, name = key.rpartition("/")
            yield Delta(
                DeltaType.DELETED,
                DeletedFinalStateUnknown(ObjectRef(ns, name, uid, rv)),
                relist=True,
            )

"""The informer's state machine, without I/O: what a watch event changes in what the handlers
have seen (and which deltas that gives), where the next watch starts (since the last token, a
delta resume from what the handlers have, or a relist), and what a failed watch call leads to.
informerd.Informer (a thread) and informerd.aio.Informer (a task) run it around their own watch
calls, so both resume and relist exactly alike."""

from __future__ import annotations

import enum
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypedDict, cast

import grpc

from ._errors import InformerdError, Reason
from ._held import gone_hashes, held_entries, key_hash
from ._model import Event, EventType, ObjectRef, Predicate, ResumeToken, object_key
from .v1 import cache_pb2 as pb

log = logging.getLogger("informerd")


class WatchArgs(TypedDict):
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


class Outcome(enum.Enum):
    """What to do after a failed watch call."""

    RELIST = "relist"  # at once: the token cannot be used any more
    RESUME = "resume"  # since the last token (after a backoff when nothing was received)


Handler = Callable[..., Any]


class InformerCore:
    """The state an informer keeps and its transitions (see informerd.Informer for the
    behaviour); subclasses open the watches, feed their events to `_on_event` and their
    failures to `_on_error`, and deliver the deltas."""

    def __init__(
        self,
        resource: str,
        watch_args: WatchArgs,
        handlers: tuple[Handler | None, Handler | None, Handler | None, Handler | None],
        backoff_initial: float,
        backoff_max: float,
    ):
        self.resource = resource
        self._watch_args = watch_args
        self.on_add, self.on_update, self.on_delete, self.on_synced = handlers
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max

        self.relists = 0
        self.resumes = 0
        self.delta_resumes = 0
        self.errors = 0
        # Failed watch calls by reason (the informerd-reason trailer, else the code's name).
        self.error_counts: Counter[str] = Counter()
        self.last_error: Exception | None = None
        # What run() in start()'s thread or task ended with, if it raised.
        self.error: BaseException | None = None

        # key -> (uid, resourceVersion) of what the handlers have seen.
        self._known: dict[str, tuple[str, str]] = {}
        self._token: ResumeToken | None = None
        self._pending: ResumeToken | None = None  # the token of an event being delivered
        self._listed_once = False
        self._synced_once = False
        # The watch call under way: listing its initial state, and the keys listed so far.
        self._listing = False
        self._seen: set[str] = set()
        # The watch call under way is a delta resume: key hash -> key of what it said it held
        # (to resolve SYNCED's `gone`); None otherwise.
        self._held: dict[int, str] | None = None
        # Cleared when the sidecar refuses or ignores `held` (an informerd older than the delta
        # resume): from then on this informer relists in full.
        self._delta_ok = True

    @staticmethod
    def watch_args(
        namespace: str,
        label_selector: str,
        field_selector: str,
        index: pb.IndexLookup | tuple[str, str] | None,
        fields: Iterable[str],
        predicates: Iterable[Predicate | int],
        predicate_cel: str,
        bookmark_interval: int | None,
    ) -> WatchArgs:
        return {
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

    # --- observing -------------------------------------------------------------------------

    @property
    def token(self) -> ResumeToken | None:
        """The (epoch, revision) the informer has delivered everything up to."""
        return self._token

    def known(self) -> dict[str, str]:
        """key -> resourceVersion of every object the handlers currently have."""
        return {k: rv for k, (_, rv) in dict(self._known).items()}

    # --- transitions -----------------------------------------------------------------------

    def _next_watch(self) -> dict[str, Any]:
        """The keyword arguments of the next Client.watch call: since the last token, else the
        initial state: a delta resume (`held`) once the informer knows objects, a full list
        otherwise; counts resumes, delta resumes and relists."""
        self._seen = set()
        self._pending = None
        self._held = None
        if self._token is not None:
            self.resumes += 1
            self._listing = False
            return {"since": self._token, **self._watch_args}
        self._listing = True
        if self._listed_once and self._known and self._delta_ok:
            held = {key_hash(k): k for k in self._known}
            # Decision: two known keys with one hash (2^-64 a pair) make a full relist: the
            # sidecar sends such a key's object whatever its version, but could not say which
            # of the two is gone.
            if len(held) == len(self._known):
                self.delta_resumes += 1
                self._held = held
                entries = held_entries((k, rv) for k, (_, rv) in self._known.items())
                return {"held": entries, **self._watch_args}
        if self._listed_once:
            self.relists += 1
        self._listed_once = True
        return {"send_initial_state": True, **self._watch_args}

    def _on_event(self, ev: Event) -> list[Delta]:
        """The deltas an event of the current watch call gives; a SYNCED delta once, at the
        end of the first list. Call `_delivered()` once they are delivered."""
        if not self._listing:
            self._pending = ev.token
            return list(self._apply(ev, relist=False))
        if self._held is not None and ev.type not in (EventType.ADDED, EventType.SYNCED):
            # A delta resume's initial state is ADDED events then SYNCED; anything else first
            # is a sidecar that did not read `held` and follows from now instead.
            raise self._delta_refused(f"it sent {ev.type.value} before SYNCED")
        if ev.type is EventType.SYNCED:
            if self._held is not None:
                deltas = list(self._finish_delta(ev.gone, self._held))
                self._held = None
            else:
                deltas = list(self._finish_list(self._seen))
            self._pending = ev.token
            self._listing = False
            if not self._synced_once:
                self._synced_once = True
                deltas.append(Delta(DeltaType.SYNCED))
            return deltas
        if ev.type in (EventType.ADDED, EventType.MODIFIED):
            self._seen.add(cast(str, ev.key))  # these events carry their object
            return list(self._apply(ev, relist=self.relists > 0 or self._held is not None))
        if ev.type is EventType.DELETED:
            self._seen.discard(cast(str, ev.key))
            return list(self._apply(ev, relist=False))
        return []  # a BOOKMARK before SYNCED is no resume point: ignore it

    def _delivered(self) -> None:
        """The deltas of the last event are delivered: `token` moves to it (when it is a resume
        point: any event after the list's SYNCED, and that SYNCED)."""
        if self._pending is not None:
            self._token, self._pending = self._pending, None

    def _on_error(self, err: InformerdError) -> Outcome:
        """Counts a failed watch call; raises it when retrying cannot fix it (e.g. NotFound,
        Invalid)."""
        self.errors += 1
        self.error_counts[err.reason or err.code.name] += 1
        self.last_error = err
        # Decision: a delta resume the sidecar refuses (INVALID_ARGUMENT: it rejects `held`;
        # RequestTooLarge: 16 bytes an object is over its limits.maxRequestSize; OUT_OF_RANGE,
        # which a call without a token only gets for a message over gRPC's limit) or ignores
        # (UNIMPLEMENTED, from _delta_refused: it predates `held`) falls back to a full relist
        # at once, and this informer does not try `held` again: retrying would be refused the
        # same way, and a full relist diffs against what the handlers have, so whatever the
        # failed call delivered stays right. A request that is invalid for another reason
        # fails the full relist too, and raises.
        refused = err.reason == Reason.REQUEST_TOO_LARGE or err.code in (
            grpc.StatusCode.INVALID_ARGUMENT,
            grpc.StatusCode.OUT_OF_RANGE,
            grpc.StatusCode.UNIMPLEMENTED,
        )
        if self._held is not None and refused:
            log.warning("informer %s: delta resume failed (%s); listing again in full", self.resource, err)
            self._delta_ok = False
            self._token = None
            return Outcome.RELIST
        if err.needs_relist:
            log.info("informer %s: %s; listing again", self.resource, err)
            self._token = None
            return Outcome.RELIST
        # Decision: a refused token or read is asked again after the backoff, as client-go's
        # reflector retries a forbidden list, and not raised: RBAC is applied with the workload
        # that needs it, and the apiserver's authorizer, then the sidecar's cache of denials
        # (30 s by default), may refuse a pod's first calls. An informer that stopped then
        # would hold nothing for the rest of the pod's life; this one serves once the grant is
        # seen, and one never granted keeps logging why.
        if err.code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED):
            log.warning("informer %s: %s; asking again", self.resource, err)
            return Outcome.RESUME
        if not err.can_resume:
            raise err
        log.info("informer %s: %s; resuming", self.resource, err)
        return Outcome.RESUME

    def _next_backoff(self, backoff: float) -> float:
        return min(backoff * 2, self.backoff_max)

    def _handler_call(self, d: Delta) -> tuple[Handler, tuple[Any, ...]] | None:
        """The handler a delta goes to, and its arguments; None when there is no handler."""
        # Deltas give ADDED and UPDATED the object, UPDATED also the old ref, and DELETED the
        # object or a tombstone.
        if d.type is DeltaType.ADDED and self.on_add:
            return self.on_add, (d.object,)
        if d.type is DeltaType.UPDATED and self.on_update:
            return self.on_update, (d.old, d.object)
        if d.type is DeltaType.DELETED and self.on_delete:
            return self.on_delete, (d.object,)
        if d.type is DeltaType.SYNCED and self.on_synced:
            return self.on_synced, ()
        return None

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

    def _delta_refused(self, why: str) -> InformerdError:
        return InformerdError(
            grpc.StatusCode.UNIMPLEMENTED,
            None,
            f"the sidecar did not answer the delta resume of {self.resource} as one ({why}): "
            "informerd predates `held`; listing again in full",
        )

    def _finish_delta(self, gone: bytes, held: dict[int, str]) -> Iterator[Delta]:
        """After a delta resume's initial state: the held objects SYNCED says are gone are
        deleted, as a relist finds them; the others it did not send are unchanged."""
        try:
            hashes = list(gone_hashes(gone))
        except ValueError as err:
            raise self._delta_refused(str(err)) from None
        for h in hashes:
            key = held.get(h)
            if key is not None and key not in self._seen and key in self._known:
                yield self._forget(key)

    def _finish_list(self, seen: set[str]) -> Iterator[Delta]:
        """After a (re)list: whatever the handlers have that the list did not is gone."""
        for key in [k for k in self._known if k not in seen]:
            yield self._forget(key)

    def _forget(self, key: str) -> Delta:
        """The deletion of a known object a (re)list or a delta resume found gone."""
        uid, rv = self._known.pop(key)
        ns, _, name = key.rpartition("/")
        return Delta(DeltaType.DELETED, DeletedFinalStateUnknown(ObjectRef(ns, name, uid, rv)), relist=True)

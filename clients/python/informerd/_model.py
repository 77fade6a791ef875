"""What the informerd API returns, as Python values: watch events, list results, resume tokens,
object identities; and the decoding of the wire messages into them. No I/O: shared by the
synchronous client (informerd) and the asyncio one (informerd.aio)."""

from __future__ import annotations

import enum
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc

from ._errors import InformerdError
from .v1 import cache_pb2 as pb


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
    # On the SYNCED of a delta resume (`held`): the 8-byte little-endian key hashes of the held
    # objects the watch no longer sees (informerd's Informer deletes them). Empty otherwise.
    gone: bytes = field(default=b"", repr=False)
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


def event_from_pb(ev: pb.WatchEvent) -> Event | None:
    """The Event of a WatchEvent; None for an event type this client does not know (a newer
    server), which a watch skips."""
    kind = _EVENT_TYPES.get(ev.type)
    if kind is None:
        return None
    obj = ev.object if ev.HasField("object") else None
    return Event(kind, ev.epoch, ev.revision, obj, gone=ev.gone)


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


class ListCollector:
    """Gathers a List's chunks into a ListResult: `add(chunk)` returns it at the last chunk."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def add(self, chunk: pb.ListResponse) -> ListResult | None:
        self.items.extend(json.loads(o.json) for o in chunk.objects)
        if chunk.last:
            return ListResult(self.items, chunk.epoch, chunk.revision, chunk.synced)
        return None

    @staticmethod
    def incomplete() -> InformerdError:
        """What a List whose stream ended before its last chunk raises."""
        return InformerdError(grpc.StatusCode.INTERNAL, None, "the List stream ended without its last message")


def decode_object(response: pb.GetResponse) -> dict[str, Any]:
    """The decoded JSON of a Get's object."""
    obj: dict[str, Any] = json.loads(response.object.json)
    return obj

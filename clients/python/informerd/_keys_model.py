"""What a WatchKeys stream delivers, as Python values, and the decoding of its messages; the
acknowledgement's arguments. No I/O: shared by informerd.keys and informerd.aio.keys."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any, NamedTuple

from ._model import ResumeToken
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
    # KEY, with watch_keys(send_objects=True): the object as the key was sent (what a Get would
    # have returned then, masked by `fields`), decoded; None for a deletion, an owner's key, or
    # an object gone since.
    object: dict[str, Any] | None = None


def key_event_from_pb(ev: pb.KeyEvent) -> KeyEvent | None:
    """The KeyEvent of a message; None for a type this client does not know (a newer server),
    which the stream skips."""
    kind = _KEY_EVENT_TYPES.get(ev.type)
    if kind is None:
        return None
    return KeyEvent(
        type=kind,
        key=Key(ev.key.kind, ev.key.namespace, ev.key.name) if ev.HasField("key") else None,
        revision=ev.revision,
        deleted=ev.deleted,
        token=ResumeToken(ev.token.epoch, ev.token.revision) if ev.HasField("token") else None,
        pending=ev.pending,
        in_flight=ev.in_flight,
        queue_bytes=ev.queue_bytes,
        object=json.loads(ev.object.json) if ev.HasField("object") else None,
    )


def ack_of(event: KeyEvent | Key, revision: int | None) -> tuple[Key, int] | None:
    """What `ack(event)` or `ack(key, revision)` acknowledges; None for an event without a key."""
    if isinstance(event, KeyEvent):
        if event.key is None:
            return None
        return event.key, event.revision
    if revision is None:
        raise ValueError("ack(key, revision): the revision the key was sent with is required")
    return event, revision

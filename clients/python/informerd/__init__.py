"""Python client for informerd: read a shared, filtered, field-stripped cache of Kubernetes
objects from the sidecar beside you, and watch it change.

    from informerd import Client, Informer

    client = Client()  # $INFORMERD_SOCKET, else unix:///run/informerd/informerd.sock
    pods = client.list("pods", namespace="default")
    print(len(pods.items), pods.token)

Objects are plain dicts (the object's JSON, decoded), as with the Kubernetes dynamic client.
`informerd.aio` is the same API for asyncio (over grpc.aio).
"""

from ._client import (
    DEFAULT_SOCKET,
    DEFAULT_TARGET,
    Client,
    Event,
    EventType,
    ListResult,
    ObjectRef,
    Predicate,
    ResumeToken,
    Watch,
    object_key,
)
from ._errors import REASON_TRAILER, InformerdError, NotFoundError, Reason
from ._held import held_entries, key_hash
from ._informer import DeletedFinalStateUnknown, Delta, DeltaType, Informer
from .keys import Key, KeyEvent, KeyEventType, KeyWatch, watch_keys

__all__ = [
    "DEFAULT_SOCKET",
    "DEFAULT_TARGET",
    "REASON_TRAILER",
    "Client",
    "DeletedFinalStateUnknown",
    "Delta",
    "DeltaType",
    "Event",
    "EventType",
    "Informer",
    "InformerdError",
    "Key",
    "KeyEvent",
    "KeyEventType",
    "KeyWatch",
    "ListResult",
    "NotFoundError",
    "ObjectRef",
    "Predicate",
    "Reason",
    "ResumeToken",
    "Watch",
    "held_entries",
    "key_hash",
    "object_key",
    "watch_keys",
]

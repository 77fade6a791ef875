"""The asyncio client of informerd (over grpc.aio), beside the synchronous `informerd` the way
kubernetes_asyncio sits beside kubernetes: the same names and arguments, with coroutines and
async iterators, for async operators (kopf, ...).

    from informerd.aio import Client, Informer

    async with Client() as client:      # $INFORMERD_SOCKET, else the default socket
        pods = await client.list("pods", namespace="default")
        informer = Informer(client, "pods", namespace="default", on_add=on_add)
        informer.start()
        await informer.wait_for_sync(60)

The values, errors and tokens are the synchronous package's own (informerd.Event,
informerd.InformerdError, ...), re-exported here.
"""

from .._address import DEFAULT_SOCKET, DEFAULT_TARGET
from .._errors import REASON_TRAILER, InformerdError, NotFoundError, Reason
from .._held import held_entries, key_hash
from .._informer_core import DeletedFinalStateUnknown, Delta, DeltaType
from .._keys_model import Key, KeyEvent, KeyEventType
from .._model import Event, EventType, ListResult, ObjectRef, Predicate, ResumeToken, object_key
from ._client import Client, Watch
from ._informer import Informer
from .keys import KeyWatch, watch_keys

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

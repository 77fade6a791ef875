"""The request messages of the informerd API, built from the keyword arguments the clients
take. No I/O: the synchronous client (informerd) and the asyncio one (informerd.aio) send the
same requests for the same arguments."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import cast

from ._keys_model import Key
from ._model import Predicate, ResumeToken
from .v1 import cache_pb2 as pb


def index_lookup(index: pb.IndexLookup | tuple[str, str] | None) -> pb.IndexLookup | None:
    if index is None or isinstance(index, pb.IndexLookup):
        return index
    name, value = index
    return pb.IndexLookup(name=name, value=value)


def predicates(values: Iterable[Predicate | int]) -> list[pb.Predicate]:
    # The proto's enum values are ints at run time, which its stub calls pb.Predicate.
    return [cast(pb.Predicate, int(p)) for p in values]


def _token(since: ResumeToken) -> pb.ResumeToken:
    return pb.ResumeToken(epoch=since.epoch, revision=since.revision)


def get_request(
    resource: str,
    name: str,
    namespace: str,
    *,
    cluster: str,
    min_resource_version: str,
    fields: Iterable[str],
    wait_for_sync: bool,
) -> pb.GetRequest:
    return pb.GetRequest(
        resource=resource,
        cluster=cluster,
        namespace=namespace,
        name=name,
        min_resource_version=min_resource_version,
        fields=list(fields),
        wait_for_sync=wait_for_sync,
    )


def list_request(
    resource: str,
    *,
    cluster: str,
    namespace: str,
    label_selector: str,
    field_selector: str,
    index: pb.IndexLookup | tuple[str, str] | None,
    fields: Iterable[str],
    wait_for_sync: bool,
    chunk_size: int,
    min_resource_version: str,
    limit: int,
) -> pb.ListRequest:
    return pb.ListRequest(
        resource=resource,
        cluster=cluster,
        namespace=namespace,
        label_selector=label_selector,
        field_selector=field_selector,
        index=index_lookup(index),
        fields=list(fields),
        wait_for_sync=wait_for_sync,
        chunk_size=chunk_size,
        min_resource_version=min_resource_version,
        limit=limit,
    )


def watch_request(
    resource: str,
    *,
    cluster: str,
    namespace: str,
    label_selector: str,
    field_selector: str,
    index: pb.IndexLookup | tuple[str, str] | None,
    fields: Iterable[str],
    since: ResumeToken | None,
    send_initial_state: bool,
    predicates_: Iterable[Predicate | int],
    predicate_cel: str,
    bookmark_interval: int | None,
    wait_for_sync: bool,
    held: bytes | None = None,
) -> pb.WatchRequest:
    """Raises ValueError when more than one of since, send_initial_state and held is given."""
    if sum((since is not None, send_initial_state, held is not None)) > 1:
        raise ValueError("since, send_initial_state and held exclude each other")
    req = pb.WatchRequest(
        resource=resource,
        cluster=cluster,
        namespace=namespace,
        label_selector=label_selector,
        field_selector=field_selector,
        index=index_lookup(index),
        fields=list(fields),
        predicates=predicates(predicates_),
        predicate_cel=predicate_cel,
        bookmark_interval_seconds=bookmark_interval or 0,
        wait_for_sync=wait_for_sync,
    )
    if since is not None:
        req.since.CopyFrom(_token(since))
    elif send_initial_state:
        req.send_initial_state = True
    elif held is not None:
        # Set even when empty: a delta resume holding nothing is the whole initial state.
        req.held.SetInParent()
        req.held.entries = held
    return req


def ensure_request(api_version: str, kind: str, namespaces: Sequence[str], *, cluster: str) -> pb.EnsureRequest:
    return pb.EnsureRequest(api_version=api_version, kind=kind, namespaces=list(namespaces), cluster=cluster)


def status_request(resource: str, *, cluster: str) -> pb.StatusRequest:
    return pb.StatusRequest(resource=resource, cluster=cluster)


def keys_subscription(
    resource: str,
    *,
    namespace: str,
    cluster: str,
    label_selector: str,
    field_selector: str,
    index: pb.IndexLookup | tuple[str, str] | None,
    predicates_: Iterable[Predicate | int],
    predicate_cel: str,
    since: ResumeToken | None,
    debounce: float,
    max_delay: float,
    owner_kind: str,
    owner_api_version: str,
    owner_and_self: bool,
    wait_for_sync: bool,
    send_objects: bool = False,
    fields: Iterable[str] = (),
) -> pb.KeysSubscription:
    """The first message of a WatchKeys stream; `debounce` and `max_delay` are in seconds."""
    sub = pb.KeysSubscription(
        resource=resource,
        cluster=cluster,
        namespace=namespace,
        label_selector=label_selector,
        field_selector=field_selector,
        index=index_lookup(index),
        predicates=predicates(predicates_),
        predicate_cel=predicate_cel,
        debounce_millis=round(debounce * 1000),
        max_delay_millis=round(max_delay * 1000),
        wait_for_sync=wait_for_sync,
        send_objects=send_objects,
        fields=list(fields),
    )
    if since is not None:
        sub.since.CopyFrom(_token(since))
    if owner_kind:
        mode = pb.OWNER_AND_SELF if owner_and_self else pb.OWNER_ONLY
        sub.owner.CopyFrom(pb.OwnerMapping(kind=owner_kind, api_version=owner_api_version, mode=mode))
    return sub


def coalesce_acks(requests: list[pb.WatchKeysRequest]) -> list[pb.WatchKeysRequest]:
    """The requests in order, consecutive acks merged into one message.

    Decision: the key streams send every ack already queued in one message. A loop that acks
    key by key would otherwise send a small message each, and the sidecar's HTTP/2 server ends
    a connection on which about 2,000 small DATA frames wait unread (GOAWAY ENHANCE_YOUR_CALM):
    under load, a first resync then starts over (the Go client's sendAcks says more).
    """
    out: list[pb.WatchKeysRequest] = []
    for request in requests:
        if out and request.HasField("ack") and out[-1].HasField("ack"):
            out[-1].ack.acks.extend(request.ack.acks)
        else:
            out.append(request)
    return out


def acks_request(keys: Iterable[tuple[Key, int]]) -> pb.WatchKeysRequest | None:
    """The message acknowledging these (key, revision) pairs; None when there are none."""
    acks = [pb.KeyAck(key=pb.Key(kind=k.kind, namespace=k.namespace, name=k.name), revision=r) for k, r in keys]
    return pb.WatchKeysRequest(ack=pb.KeyAcks(acks=acks)) if acks else None

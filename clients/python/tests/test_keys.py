"""WatchKeys from Python: a resync of every key at start, one key per burst of changes
(debounce), a deleted key delivered (its Get says NOT_FOUND), resume from a token with only the
keys changed since, keys carrying their objects when asked, and a refused subscription naming
the field."""

from __future__ import annotations

import queue
import threading
import time

import grpc
import pytest
from helpers import pod

from informerd import InformerdError, Key, KeyEvent, KeyEventType, KeyWatch, NotFoundError
from informerd._requests import acks_request, coalesce_acks
from informerd.v1 import cache_pb2 as pb


def reader(keys: KeyWatch) -> queue.Queue:
    out: queue.Queue = queue.Queue()

    def run() -> None:
        try:
            for ev in keys:
                out.put(ev)
        except Exception as err:  # noqa: BLE001 - handed to the test
            out.put(err)

    threading.Thread(target=run, daemon=True).start()
    return out


def take(out: queue.Queue, quiet: float) -> KeyEvent | None:
    """The next event, or None when none comes for `quiet` seconds."""
    try:
        ev = out.get(timeout=quiet)
    except queue.Empty:
        return None
    if isinstance(ev, Exception):
        raise ev
    return ev


def read_resync(keys: KeyWatch, out: queue.Queue) -> list[str]:
    names: list[str] = []
    started = False
    while True:
        ev = take(out, 60)
        assert ev is not None, "no resync within 60 s"
        if ev.type is KeyEventType.RESYNC_START:
            started = True
        elif ev.type is KeyEventType.RESYNC_END:
            assert started
            return names
        elif ev.type is KeyEventType.KEY:
            assert started, f"a key before RESYNC_START: {ev}"
            names.append(ev.key.name)
            keys.ack(ev)


def test_keys_coalesce_each_burst_and_resume(core, namespaces, sidecar, api):
    ns = namespaces.create()
    for i in range(10):
        core.create_namespaced_pod(ns, pod(f"p{i}"))
    sc = sidecar([ns])
    c = sc.client()
    debounce = 3.0
    keys = api.watch_keys(c, "pods", namespace=ns, debounce=debounce)
    out = reader(keys)
    assert sorted(read_resync(keys, out)) == sorted(f"p{i}" for i in range(10))

    # A burst of five changes per pod, then a deletion.
    longest = 0.0
    for i in range(9):
        start = time.monotonic()
        for n in range(5):
            core.patch_namespaced_pod(f"p{i}", ns, {"metadata": {"labels": {"n": str(n)}}})
        longest = max(longest, time.monotonic() - start)
    core.delete_namespaced_pod("p9", ns, grace_period_seconds=0)

    got: dict[str, list[KeyEvent]] = {}
    token = None
    while (ev := take(out, debounce + 5)) is not None:
        token = ev.token or token
        if ev.type is KeyEventType.KEY:
            got.setdefault(ev.key.name, []).append(ev)
            keys.ack(ev)
    assert sorted(got) == sorted(f"p{i}" for i in range(10)), "every changed key"
    if longest < debounce:  # each burst was one quiet period
        assert {name: len(evs) for name, evs in got.items()} == {f"p{i}": 1 for i in range(10)}
    assert got["p9"][-1].deleted
    with pytest.raises(NotFoundError):
        c.get("pods", "p9", ns)
    last = got["p0"][-1]
    assert c.get("pods", "p0", ns)["metadata"]["labels"]["n"] == "4"
    assert last.key.kind == "Pod" and last.key.namespace == ns

    # Once the acks are in, a PROGRESS carries a token to resume from (maybe already read).
    deadline = time.monotonic() + 30
    while token is None or token.revision < last.revision:
        ev = take(out, max(0.1, deadline - time.monotonic()))
        assert ev is not None, "no token after the acks"
        token = ev.token or token
    keys.cancel()

    core.patch_namespaced_pod("p1", ns, {"metadata": {"labels": {"n": "resumed"}}})
    with api.watch_keys(c, "pods", namespace=ns, since=token) as resumed:
        out = reader(resumed)
        names = []
        while (ev := take(out, 4)) is not None:
            assert ev.type is not KeyEventType.RESYNC_START, "a token of this run resumes"
            if ev.type is KeyEventType.KEY:
                names.append(ev.key.name)
                resumed.ack(ev)
        assert names == ["p1"]


def test_keys_refused_subscription_names_the_field(namespaces, sidecar, api):
    ns = namespaces.create()
    c = sidecar([ns]).client()
    with api.watch_keys(c, "pods", namespace=ns, debounce=2, max_delay=1) as keys, pytest.raises(InformerdError) as err:
        next(iter(keys))
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.message.startswith("subscribe.max_delay_millis")


def test_keys_carry_their_object_when_asked(core, namespaces, sidecar, api):
    ns = namespaces.create()
    for i in range(3):
        core.create_namespaced_pod(ns, pod(f"p{i}"))
    c = sidecar([ns]).client()
    with api.watch_keys(c, "pods", namespace=ns, send_objects=True, fields=["metadata.labels"]) as keys:
        out = reader(keys)
        seen = {}
        while (ev := take(out, 60)) is not None and ev.type is not KeyEventType.RESYNC_END:
            if ev.type is KeyEventType.KEY:
                seen[ev.key.name] = ev.object
                keys.ack(ev)
        assert sorted(seen) == ["p0", "p1", "p2"]
        for name, obj in seen.items():
            assert obj is not None, f"{name}: a key with its object"
            assert obj["metadata"]["name"] == name
            assert "spec" not in obj, "masked by fields"
        core.patch_namespaced_pod("p1", ns, {"metadata": {"labels": {"n": "7"}}})
        while (ev := take(out, 60)) is not None and ev.type is not KeyEventType.KEY:
            pass
        assert ev is not None and ev.key.name == "p1"
        assert ev.object["metadata"]["labels"]["n"] == "7", "the changed object"
    with api.watch_keys(c, "pods", namespace=ns) as plain:
        out = reader(plain)
        while (ev := take(out, 60)) is not None and ev.type is not KeyEventType.KEY:
            pass
        assert ev is not None and ev.object is None, "keys alone unless asked"


def test_queued_acks_go_in_one_message() -> None:
    def ack(name: str) -> pb.WatchKeysRequest:
        request = acks_request([(Key(kind="Pod", namespace="ns", name=name), 1)])
        assert request is not None
        return request

    subscribe = pb.WatchKeysRequest(subscribe=pb.KeysSubscription(resource="pods"))
    merged = coalesce_acks([subscribe, ack("a"), ack("b"), ack("c")])
    assert len(merged) == 2
    assert merged[0].HasField("subscribe")
    assert [a.key.name for a in merged[1].ack.acks] == ["a", "b", "c"]
    # Order is kept: acks on either side of another request stay on their side.
    merged = coalesce_acks([ack("a"), subscribe, ack("b")])
    assert [r.WhichOneof("request") for r in merged] == ["ack", "subscribe", "ack"]

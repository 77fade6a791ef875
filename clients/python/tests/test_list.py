"""List and Get against a real sidecar: the cache equals the apiserver."""

from __future__ import annotations

import grpc
import pytest
from helpers import api_pods, cache_pods, key_of, pod, pods_resource

from informerd import EventType, InformerdError, NotFoundError, Reason
from informerd.v1 import cache_pb2 as pb


def test_list_equals_apiserver(core, namespaces, sidecar):
    ns = namespaces.create()
    other = namespaces.create("other")  # not in the sidecar's configuration
    for i in range(30):
        core.create_namespaced_pod(ns, pod(f"p-{i:02d}", {"app": "web" if i % 3 else "db"}))
    core.create_namespaced_pod(other, pod("elsewhere"))

    sc = sidecar([ns])
    c = sc.client()

    result = c.list("pods", namespace=ns)
    assert result.synced
    assert result.epoch != 0 and result.revision != 0
    got = {key_of(o): o["metadata"]["resourceVersion"] for o in result.items}
    assert got == api_pods(core, [ns])
    assert len(got) == 30
    # The transform of the configuration ran; objects carry apiVersion and kind.
    for o in result.items:
        assert "managedFields" not in o["metadata"]
        assert o["apiVersion"] == "v1" and o["kind"] == "Pod"

    # Every namespace of the cache (only the configured one), in small chunks, at the same
    # revision: nothing changed in between.
    chunked = c.list("pods", chunk_size=7)
    assert cache_pods(c) == got
    assert {key_of(o): o["metadata"]["resourceVersion"] for o in chunked.items} == got
    assert chunked.token == result.token
    chunks = list(c.list_chunks("pods", chunk_size=7))
    assert [len(ch.objects) for ch in chunks[:-1]] == [7] * (len(chunks) - 1)
    assert sum(len(ch.objects) for ch in chunks) == 30
    assert chunks[-1].last and not any(ch.last for ch in chunks[:-1])

    # Filters answer as the apiserver does.
    for selector in ["app=web", "app!=web", "app in (db)", "!app"]:
        assert cache_pods(c, namespace=ns, label_selector=selector) == api_pods(core, [ns], selector), (
            selector
        )
    assert set(cache_pods(c, namespace=ns, field_selector="metadata.name=p-05")) == {f"{ns}/p-05"}


def test_get(core, namespaces, sidecar):
    ns = namespaces.create()
    created = core.create_namespaced_pod(ns, pod("one", {"app": "web"}))
    sc = sidecar([ns])
    c = sc.client()

    got = c.get("pods", "one", ns)
    assert got["metadata"]["uid"] == created.metadata.uid
    assert got["metadata"]["resourceVersion"] == created.metadata.resource_version
    assert got["spec"]["containers"][0]["name"] == "main"

    # Read your own writes: the cache answers with the version written, or a later one.
    for i in range(5):
        written = core.patch_namespaced_pod("one", ns, {"metadata": {"annotations": {"step": str(i)}}})
        got = c.get("pods", "one", ns, min_resource_version=written.metadata.resource_version)
        assert int(got["metadata"]["resourceVersion"]) >= int(written.metadata.resource_version)
        assert got["metadata"]["annotations"]["step"] == str(i)
        # A List reads it too.
        listed = c.list("pods", namespace=ns, min_resource_version=written.metadata.resource_version)
        assert [p["metadata"]["annotations"]["step"] for p in listed.items] == [str(i)]

    # A field mask: only those fields, and the identity.
    masked = c.get("pods", "one", ns, fields=["status.phase", 'metadata.labels["app"]'])
    assert masked["metadata"]["name"] == "one"
    assert masked["metadata"]["labels"] == {"app": "web"}
    assert "spec" not in masked
    assert masked["status"] == {"phase": created.status.phase or "Pending"}

    with pytest.raises(NotFoundError) as err:
        c.get("pods", "missing", ns)
    assert err.value.code == grpc.StatusCode.NOT_FOUND
    assert err.value.reason == Reason.NOT_FOUND

    with pytest.raises(NotFoundError) as err:
        c.list("no-such-resource")
    assert err.value.reason == Reason.NOT_FOUND

    with pytest.raises(InformerdError) as err:
        c.list("pods", label_selector="app in (")
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.reason == Reason.INVALID


def test_reason_trailer_is_the_generated_name(namespaces, sidecar):
    """The trailer of a NOT_FOUND Get parses to the proto's enum, without a table."""
    ns = namespaces.create()
    c = sidecar([ns]).client()
    with pytest.raises(NotFoundError) as err:
        c.get("pods", "missing", ns)
    assert pb.Reason.Value(err.value.reason) == pb.Reason.NotFound


def test_index_lookup(core, namespaces, sidecar):
    ns = namespaces.create()
    for i in range(12):
        p = pod(f"p-{i:02d}")
        p["spec"]["restartPolicy"] = "Never" if i % 4 == 0 else "Always"
        core.create_namespaced_pod(ns, p)
    sc = sidecar(
        [ns],
        resources_yaml=pods_resource([ns]) + "  indexes:\n  - name: restart\n    path: spec.restartPolicy\n",
    )
    c = sc.client()

    never = api_pods(core, [ns], field_selector="spec.restartPolicy=Never")
    assert len(never) == 3
    assert cache_pods(c, index=("restart", "Never")) == never
    assert cache_pods(c, namespace=ns, field_selector="spec.restartPolicy=Never") == never
    assert cache_pods(c, index=("restart", "Always")) == api_pods(
        core, [ns], field_selector="spec.restartPolicy=Always"
    )
    assert cache_pods(c, index=("restart", "OnFailure")) == {}


def test_watch_initial_state_and_bookmarks(core, namespaces, sidecar):
    ns = namespaces.create()
    for i in range(5):
        core.create_namespaced_pod(ns, pod(f"p-{i}"))
    sc = sidecar([ns])
    c = sc.client()
    listed = c.list("pods")

    w = c.watch("pods", send_initial_state=True, bookmark_interval=1)
    try:
        events = []
        for ev in w:
            events.append(ev)
            if ev.type is EventType.BOOKMARK:
                break
    finally:
        w.cancel()
    # The current state as ADDED, one SYNCED at the list's revision, then (nothing changes)
    # bookmarks at that revision.
    assert [e.type for e in events] == [EventType.ADDED] * 5 + [EventType.SYNCED, EventType.BOOKMARK]
    assert {e.key: e.raw.resource_version for e in events[:5]} == api_pods(core, [ns])
    assert all(e.object["metadata"]["name"] == e.raw.name for e in events[:5])
    assert events[5].token == listed.token
    assert events[6].token == listed.token

    # Read-your-writes that cannot be satisfied in time: DEADLINE_EXCEEDED, NotCaughtUp.
    rv = core.read_namespaced_pod("p-0", ns).metadata.resource_version
    with pytest.raises(InformerdError) as err:
        c.get("pods", "p-0", ns, min_resource_version=str(int(rv) + 10**9), timeout=5)
    assert err.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert err.value.reason == Reason.NOT_CAUGHT_UP

    # limit: the first objects in the list's order, across chunks; no negative limit.
    every = [p["metadata"]["name"] for p in c.list("pods", namespace=ns).items]
    first = c.list("pods", namespace=ns, limit=3, chunk_size=2).items
    assert [p["metadata"]["name"] for p in first] == every[:3]
    with pytest.raises(InformerdError) as err:
        c.list("pods", namespace=ns, limit=-1)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "limit" in str(err.value)

"""A label-selector watch: an object that stops matching is DELETED for the watch, one that
starts matching is ADDED."""

from __future__ import annotations

import queue

from helpers import api_pods, collect, events_until, key_of, pod, wait_until

from informerd import DeletedFinalStateUnknown


def test_label_selector_watch(core, namespaces, sidecar, api):
    ns = namespaces.create()
    core.create_namespaced_pod(ns, pod("before", {"app": "web"}))
    sc = sidecar([ns])
    c = sc.client()

    # An informer with the same selector: its handlers' view must follow the matching set.
    view: dict[str, str] = {}
    deleted: list[str] = []

    def on_delete(obj):
        key = obj.key if isinstance(obj, DeletedFinalStateUnknown) else key_of(obj)
        deleted.append(key)
        view.pop(key)

    informer = api.Informer(
        c,
        "pods",
        namespace=ns,
        label_selector="app=web",
        on_add=lambda o: view.__setitem__(key_of(o), o["metadata"]["resourceVersion"]),
        on_update=lambda old, o: view.__setitem__(key_of(o), o["metadata"]["resourceVersion"]),
        on_delete=on_delete,
    )
    informer.start()
    assert informer.wait_for_sync(60)
    assert view == {f"{ns}/before": core.read_namespaced_pod("before", ns).metadata.resource_version}

    since = c.list("pods", namespace=ns, label_selector="app=web").token
    events: queue.Queue = queue.Queue()
    w = c.watch("pods", namespace=ns, label_selector="app=web", since=since)
    collect(w, events)

    def label(name: str, app: str):
        return core.patch_namespaced_pod(
            name, ns, {"metadata": {"labels": {"app": app}}}
        ).metadata.resource_version

    a1 = core.create_namespaced_pod(ns, pod("a", {"app": "web"})).metadata.resource_version
    core.create_namespaced_pod(ns, pod("b", {"app": "db"}))  # never seen while it does not match
    label("a", "db")  # a stops matching
    core.patch_namespaced_pod("a", ns, {"metadata": {"annotations": {"unseen": "yes"}}})
    b2 = label("b", "web")  # b starts matching
    a3 = label("a", "web")  # a matches again
    a4 = core.patch_namespaced_pod(
        "a", ns, {"metadata": {"annotations": {"seen": "yes"}}}
    ).metadata.resource_version
    label("before", "db")
    core.delete_namespaced_pod("b", ns, grace_period_seconds=0)
    core.create_namespaced_pod(ns, pod("sentinel", {"app": "web"}))

    try:
        got = events_until(events, "sentinel")
    finally:
        w.cancel()
    # The versions of deletions are not compared: an object that stopped matching may be
    # reported with its last matching state or its new one.
    got = [(t, n, rv if t not in ("DELETED", "MODIFIED(deleting)") else "") for t, n, rv in got]
    assert got[:-1] == [
        ("ADDED", "a", a1),
        ("DELETED", "a", ""),
        ("ADDED", "b", b2),
        ("ADDED", "a", a3),
        ("MODIFIED", "a", a4),
        ("DELETED", "before", ""),
        ("MODIFIED(deleting)", "b", ""),
        ("DELETED", "b", ""),
    ]

    truth = api_pods(core, [ns], "app=web")
    assert set(truth) == {f"{ns}/a", f"{ns}/sentinel"}
    wait_until(lambda: view == truth, "the informer's view to equal the apiserver's app=web pods")
    assert deleted == [f"{ns}/a", f"{ns}/before", f"{ns}/b"]
    informer.stop(10)
    assert not informer.running
    assert informer.error is None

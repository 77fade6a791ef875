"""Predicates: a GENERATION_CHANGED watch skips status-only (and metadata-only) updates and
delivers spec changes. Pods qualify: this kube-apiserver bumps a Pod's metadata.generation on
spec updates, and not on status or label updates (checked below, against the apiserver)."""

from __future__ import annotations

import queue

import pytest
from helpers import collect, events_until, pod

from informerd import Predicate


@pytest.mark.parametrize(
    "predicate",
    [
        {"predicates": [Predicate.GENERATION_CHANGED]},
        # The same through CEL, over the stored objects.
        {"predicate_cel": "object.spec != oldObject.spec"},
    ],
    ids=["GENERATION_CHANGED", "cel"],
)
def test_generation_changed_skips_status_updates(core, namespaces, sidecar, predicate):
    ns = namespaces.create()
    core.create_namespaced_pod(ns, pod("p"))
    sc = sidecar([ns])
    c = sc.client()

    since = c.list("pods", namespace=ns).token
    filtered, everything = queue.Queue(), queue.Queue()
    watches = [
        c.watch("pods", namespace=ns, since=since, **predicate),
        c.watch("pods", namespace=ns, since=since),
    ]
    for w, out in zip(watches, [filtered, everything]):
        collect(w, out)

    def status(reason: str):
        cond = {"type": "example.io/Probe", "status": "True", "reason": reason}
        return core.patch_namespaced_pod_status("p", ns, {"status": {"conditions": [cond]}})

    s1 = status("one")
    l1 = core.patch_namespaced_pod("p", ns, {"metadata": {"labels": {"x": "1"}}})
    spec1 = core.patch_namespaced_pod("p", ns, {"spec": {"activeDeadlineSeconds": 600}})
    s2 = status("two")
    spec2 = core.patch_namespaced_pod("p", ns, {"spec": {"containers": [{"name": "main", "image": "app:2"}]}})
    s3 = status("three")
    core.create_namespaced_pod(ns, pod("sentinel"))

    # What the apiserver did: generation moves with the spec only.
    gens = [x.metadata.generation for x in (s1, l1, spec1, s2, spec2, s3)]
    assert gens == [1, 1, 2, 2, 3, 3], gens

    rv = lambda x: x.metadata.resource_version
    every_update = [("MODIFIED", "p", rv(x)) for x in (s1, l1, spec1, s2, spec2, s3)]
    spec_updates = [("MODIFIED", "p", rv(x)) for x in (spec1, spec2)]
    try:
        got_all = events_until(everything, "sentinel")
        got_filtered = events_until(filtered, "sentinel")
    finally:
        for w in watches:
            w.cancel()
    assert got_all[:-1] == every_update
    assert got_filtered[:-1] == spec_updates

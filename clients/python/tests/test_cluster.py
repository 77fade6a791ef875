"""The `cluster` keyword against a real sidecar: pods cached from its own cluster and from a
remote one named "mirror" (the same control plane through the kubeconfig file, with another
label selector), so that each pod is in exactly one of the two caches."""

from __future__ import annotations

import pytest
from helpers import pod

from informerd import KeyEventType, NotFoundError


def test_cluster_picks_the_cache(core, namespaces, sidecar, api, kubeconfig):
    ns = namespaces.create()
    core.create_namespaced_pod(ns, pod("own", {"side": "own"}))
    core.create_namespaced_pod(ns, pod("remote", {"side": "remote"}))
    resources = (
        f"- {{name: pods, apiVersion: v1, kind: Pod, namespaces: [{ns}], labelSelector: side=own}}\n"
        f"- {{name: pods, apiVersion: v1, kind: Pod, namespaces: [{ns}], labelSelector: side=remote,"
        " cluster: mirror}\n"
        f"clusters:\n- {{name: mirror, kubeconfig: {kubeconfig}}}\n"
    )
    c = sidecar([ns], resources_yaml=resources).client()

    assert [o["metadata"]["name"] for o in c.list("pods", namespace=ns, wait_for_sync=True)] == ["own"]
    mirror = c.list("pods", namespace=ns, cluster="mirror", wait_for_sync=True)
    assert [o["metadata"]["name"] for o in mirror] == ["remote"]
    assert c.get("pods", "remote", ns, cluster="mirror")["metadata"]["labels"] == {"side": "remote"}
    with pytest.raises(NotFoundError):
        c.get("pods", "remote", ns)
    with pytest.raises(NotFoundError):
        c.get("pods", "own", ns, cluster="nowhere")
    status = c.status(cluster="mirror")
    assert [(r.cluster, r.name) for r in status.resources] == [("mirror", "pods")]
    assert [(cl.name, cl.reachable) for cl in status.clusters] == [("mirror", True)]
    # watch_keys takes the cluster as the other calls do: an unknown one is NOT_FOUND.
    with pytest.raises(NotFoundError), api.watch_keys(c, "pods", namespace=ns, cluster="nowhere", timeout=30) as keys:
        next(iter(keys))
    with api.watch_keys(c, "pods", namespace=ns, cluster="mirror", timeout=30) as keys:
        first = next(iter(keys))
        assert first.type is KeyEventType.RESYNC_START, first

"""Ensure against a real sidecar: a kind the configuration does not list is cached on demand
within the operator's bounds, and read by the name Ensure returns; a namespace outside the
bounds is refused with PERMISSION_DENIED naming the bound."""

from __future__ import annotations

import grpc
import pytest
from helpers import pods_resource

from informerd import InformerdError, Reason


def test_ensure_caches_a_kind_on_demand(core, namespaces, sidecar):
    ns = namespaces.create()
    other = namespaces.create("other")
    for name in ("cm-a", "cm-b"):
        core.create_namespaced_config_map(ns, {"metadata": {"name": name}, "data": {"k": name}})

    on_demand = f'onDemand:\n  allow: [{{group: "", kinds: [ConfigMap]}}]\n  namespaces: [{ns}]\n'
    sc = sidecar([ns], resources_yaml=pods_resource([ns]) + on_demand)
    c = sc.client()

    name = c.ensure("v1", "ConfigMap", [ns], timeout=60)
    assert name == f"configmaps/{ns}"
    listed = c.list(name, namespace=ns)
    # What the apiserver holds: the two created, and the namespace's kube-root-ca.crt.
    want = sorted(cm.metadata.name for cm in core.list_namespaced_config_map(ns).items)
    assert {"cm-a", "cm-b"} <= set(want)
    assert sorted(o["metadata"]["name"] for o in listed.items) == want
    assert all(o["kind"] == "ConfigMap" for o in listed.items)

    with pytest.raises(InformerdError) as refused:
        c.ensure("v1", "ConfigMap", [other], timeout=60)
    assert refused.value.code == grpc.StatusCode.PERMISSION_DENIED
    assert refused.value.reason == Reason.FORBIDDEN
    assert "onDemand.namespaces" in str(refused.value)

"""Helpers of the tests (no fixtures): pods, the apiserver's and the sidecar's state, event
collection, and a handler view that checks what it is told."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from informerd import Client, DeletedFinalStateUnknown, Event, EventType


def new_api_client(kubeconfig: str) -> k8s.ApiClient:
    return k8s_config.new_client_from_config(config_file=kubeconfig)


def pods_resource(namespaces: list[str], name: str = "pods") -> str:
    """The `resources:` entry of the brief: Pods of these namespaces, managedFields dropped."""
    return (
        f"- name: {name}\n"
        "  apiVersion: v1\n"
        "  kind: Pod\n"
        f"  namespaces: [{', '.join(namespaces)}]\n"
        "  transform:\n"
        "    drop: [metadata.managedFields]\n"
    )


def wait_until(cond: Callable[[], object], what: str, timeout: float = 90, interval: float = 0.1) -> None:
    """Polls cond until it is true; fails (not a timed assertion: only to avoid hanging)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up after {timeout}s waiting for {what}", pytrace=False)
        time.sleep(interval)


def pod(name: str, labels: dict[str, str] | None = None) -> dict:
    """A pod that needs no node: no scheduler runs, so it stays Pending; deletion is at once."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "app:1"}],
        },
    }


def key_of(obj: dict) -> str:
    md = obj["metadata"]
    return f"{md['namespace']}/{md['name']}" if md.get("namespace") else md["name"]


def api_pods(
    core: k8s.CoreV1Api, namespaces: list[str], label_selector: str = "", field_selector: str = ""
) -> dict[str, str]:
    """key -> resourceVersion of the apiserver's pods in these namespaces."""
    out: dict[str, str] = {}
    for ns in namespaces:
        for p in core.list_namespaced_pod(
            ns, label_selector=label_selector, field_selector=field_selector
        ).items:
            out[f"{ns}/{p.metadata.name}"] = p.metadata.resource_version
    return out


def cache_pods(c: Client, resource: str = "pods", **kw) -> dict[str, str]:
    """key -> resourceVersion of the sidecar's list."""
    return {key_of(o): o["metadata"]["resourceVersion"] for o in c.list(resource, **kw).items}


def collect(w, out: queue.Queue) -> threading.Thread:
    def run() -> None:
        try:
            for ev in w:
                if ev.type is not EventType.BOOKMARK:
                    out.put(ev)
        except Exception as err:  # noqa: BLE001 - handed to the test
            out.put(err)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def events_until(out: queue.Queue, last_name: str, timeout: float = 60) -> list[tuple[str, str, str]]:
    """(type, name, resourceVersion) of the events up to and including the ADDED of last_name;
    the type of an update that marks the object deleted is MODIFIED(deleting)."""
    got: list[tuple[str, str, str]] = []
    while True:
        ev = out.get(timeout=timeout)  # raises queue.Empty rather than hang
        if isinstance(ev, Exception):
            raise ev
        assert isinstance(ev, Event)
        kind = ev.type.value
        if ev.type is EventType.MODIFIED and ev.object["metadata"].get("deletionTimestamp"):
            # The apiserver marks a pod deleted (deletionTimestamp) before it removes it, even
            # with a grace period of 0.
            kind = "MODIFIED(deleting)"
        got.append((kind, ev.raw.name, ev.raw.resource_version))
        if ev.type is EventType.ADDED and ev.raw.name == last_name:
            return got


class View:
    """What a handler sees, checked as it goes: key -> resourceVersion, each object's
    resourceVersions strictly increasing, no add of a known object, no update or delete of an
    unknown one."""

    def __init__(self, initial: dict[str, str] | None = None):
        self.objects: dict[str, str] = dict(initial or {})
        self.last_rv: dict[str, int] = {k: int(v) for k, v in self.objects.items()}
        self.violations: list[str] = []
        self.counts = {"add": 0, "update": 0, "delete": 0}
        self.lock = threading.Lock()

    def _advance(self, key: str, rv: str, what: str, strict: bool = True) -> None:
        last = self.last_rv.get(key)
        if last is not None and (int(rv) <= last if strict else int(rv) < last):
            self.violations.append(f"{what} {key}@{rv} after @{last}")
        self.last_rv[key] = max(int(rv), last or 0)

    def add(self, key: str, rv: str) -> None:
        with self.lock:
            self.counts["add"] += 1
            if key in self.objects:
                self.violations.append(f"ADDED {key}@{rv}, already had @{self.objects[key]}")
            self._advance(key, rv, "ADDED")
            self.objects[key] = rv

    def update(self, key: str, rv: str, old_rv: str | None = None) -> None:
        with self.lock:
            self.counts["update"] += 1
            if key not in self.objects:
                self.violations.append(f"MODIFIED {key}@{rv}, unknown")
            elif old_rv is not None and old_rv != self.objects[key]:
                self.violations.append(f"MODIFIED {key}@{rv}: old @{old_rv}, had @{self.objects[key]}")
            self._advance(key, rv, "MODIFIED")
            self.objects[key] = rv

    def delete(self, key: str, rv: str | None) -> None:
        with self.lock:
            self.counts["delete"] += 1
            if key not in self.objects:
                self.violations.append(f"DELETED {key}, unknown")
            if rv is not None:
                # A deletion's version is its own, or the last state's.
                self._advance(key, rv, "DELETED", strict=False)
            self.objects.pop(key, None)

    def snapshot(self) -> dict[str, str]:
        with self.lock:
            return dict(self.objects)

    def informer_handlers(self) -> dict:
        def on_delete(obj):
            if isinstance(obj, DeletedFinalStateUnknown):
                self.delete(obj.key, obj.ref.resource_version)
            else:
                self.delete(key_of(obj), obj["metadata"]["resourceVersion"])

        return {
            "on_add": lambda o: self.add(key_of(o), o["metadata"]["resourceVersion"]),
            "on_update": lambda old, new: self.update(
                key_of(new), new["metadata"]["resourceVersion"], old.resource_version
            ),
            "on_delete": on_delete,
        }

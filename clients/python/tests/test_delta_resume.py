"""The informer's delta resume: when its token is refused (EpochChanged after a cold restart of
the sidecar, Expired after the change log moved on), it sends what it holds (`held`) instead of
relisting, and its handlers see exactly the changes a full relist would give (an update, a
delete as DeletedFinalStateUnknown, an add) and nothing for the pods that did not change. Also
the wire format of `held` and `gone`, which the sidecar must hash alike."""

from __future__ import annotations

import signal
import threading

from helpers import View, api_pods, cache_pods, key_of, pod, wait_until

from informerd import DeletedFinalStateUnknown, EventType, held_entries, key_hash
from informerd._held import fnv1a64, gone_hashes

PODS = 12


def recording(view: View, record: list[tuple[str, str]]) -> dict:
    """The view's informer handlers, also appending (kind, key) of each call to `record`."""
    handlers = view.informer_handlers()
    on_add, on_update, on_delete = handlers["on_add"], handlers["on_update"], handlers["on_delete"]

    def add(obj):
        record.append(("add", key_of(obj)))
        on_add(obj)

    def update(old, new):
        record.append(("update", key_of(new)))
        on_update(old, new)

    def delete(obj):
        kind = "delete(final state unknown)" if isinstance(obj, DeletedFinalStateUnknown) else "delete"
        record.append((kind, obj.key if isinstance(obj, DeletedFinalStateUnknown) else key_of(obj)))
        on_delete(obj)

    return {"on_add": add, "on_update": update, "on_delete": delete}


def change_three(core, ns: str) -> list[tuple[str, str]]:
    """Updates p-01, deletes p-02, creates new-0: what the handlers must see, and only that."""
    core.patch_namespaced_pod("p-01", ns, {"metadata": {"annotations": {"changed": "yes"}}})
    core.delete_namespaced_pod("p-02", ns, grace_period_seconds=0)
    core.create_namespaced_pod(ns, pod("new-0"))
    return sorted(
        [("update", f"{ns}/p-01"), ("delete(final state unknown)", f"{ns}/p-02"), ("add", f"{ns}/new-0")]
    )


def test_fnv1a64_and_held_layout():
    # The FNV-1a test vectors, and a key as the informer hashes it (the UTF-8 of `ns/name`).
    assert fnv1a64(b"") == 0xCBF29CE484222325
    assert fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert fnv1a64(b"foobar") == 0x85944171F73967E8
    assert key_hash("ns/p") == fnv1a64(b"ns/p") == 0x4A7C8CBA48DDA801
    assert key_hash("node-1") == fnv1a64(b"node-1")  # a cluster-scoped object: its name

    entries = held_entries([("ns/p", "42"), ("node-1", "7")])
    assert len(entries) == 32
    assert entries[:8] == key_hash("ns/p").to_bytes(8, "little")
    assert entries[8:16] == fnv1a64(b"42").to_bytes(8, "little")
    assert entries[16:24] == key_hash("node-1").to_bytes(8, "little")
    assert entries[24:] == fnv1a64(b"7").to_bytes(8, "little")
    assert held_entries([]) == b""

    gone = key_hash("ns/p").to_bytes(8, "little") + key_hash("node-1").to_bytes(8, "little")
    assert list(gone_hashes(gone)) == [key_hash("ns/p"), key_hash("node-1")]
    try:
        list(gone_hashes(gone[:12]))
    except ValueError as err:
        assert "8-byte" in str(err)
    else:
        raise AssertionError("a gone of 12 bytes was accepted")


class Restarted:
    """An informer over PODS pods, across a cold restart of its sidecar during which
    change_three ran: what its handlers saw after the restart and what they had to see."""

    def __init__(self, core, namespaces, sidecar, api, server_yaml: str = ""):
        self.ns = ns = namespaces.create()
        for i in range(PODS):
            core.create_namespaced_pod(ns, pod(f"p-{i:02d}"))
        sc = sidecar([ns], server_yaml=server_yaml)
        self.client = c = sc.client()
        self.view = view = View()
        self.record: list[tuple[str, str]] = []
        self.informer = informer = api.Informer(c, "pods", namespace=ns, **recording(view, self.record))
        informer.start()
        try:
            assert informer.wait_for_sync(60)
            assert view.snapshot() == api_pods(core, [ns])
            assert len(self.record) == PODS
            self.record.clear()
            epoch = informer.token.epoch
            self.before = informer.known()

            sc.stop(signal.SIGKILL)
            self.expected = change_three(core, ns)
            sc.start()  # on the same socket, with no snapshot: a new epoch
            sc.wait_synced()
            self.truth = truth = api_pods(core, [ns])
            wait_until(
                lambda: informer.token is not None and informer.token.epoch != epoch, "a token of the new epoch"
            )
            wait_until(lambda: view.snapshot() == truth, "the informer's view to equal the apiserver's")
        finally:
            informer.stop(10)

    def assert_exact(self) -> None:
        """The handlers saw the three changes and nothing else; the informer ends exact."""
        assert self.informer.error is None
        assert sorted(self.record) == self.expected
        assert self.view.violations == []
        assert self.informer.known() == self.truth
        assert self.informer.error_counts["EpochChanged"] >= 1, self.informer.error_counts


def test_cold_restart_resumes_with_held(core, namespaces, sidecar, api):
    """A cold restart (a new epoch): the informer resumes with what it holds; its handlers see
    the update, the delete and the add made while the sidecar was down, and nothing else."""
    run = Restarted(core, namespaces, sidecar, api)
    run.assert_exact()
    informer, c, ns = run.informer, run.client, run.ns
    assert informer.delta_resumes == 1
    assert informer.relists == 0, informer.error_counts

    # What the sidecar sent that delta resume: only the two changed objects, and the deleted
    # one's key hash in `gone` (the sidecar hashes keys and resourceVersions as the client does).
    with c.watch("pods", namespace=ns, held=held_entries(run.before.items())) as w:
        added: list[str] = []
        gone: list[int] | None = None
        for ev in w:
            if ev.type is EventType.SYNCED:
                gone = list(gone_hashes(ev.gone))
                break
            assert ev.type is EventType.ADDED, ev
            added.append(ev.key)
    assert sorted(added) == [f"{ns}/new-0", f"{ns}/p-01"]
    assert gone == [key_hash(f"{ns}/p-02")]


def test_delta_resume_refused_relists_in_full(core, namespaces, sidecar, api):
    """A sidecar that refuses the delta resume (here: `held`, 16 bytes a pod, is over its
    limits.maxRequestSize, RequestTooLarge) gets a full relist instead, and the handlers see
    the same three changes."""
    run = Restarted(core, namespaces, sidecar, api, server_yaml="limits:\n  maxRequestSize: 150\n")
    run.assert_exact()
    assert run.informer.error_counts["RequestTooLarge"] == 1, run.informer.error_counts
    assert run.informer.delta_resumes == 1
    assert run.informer.relists == 1, run.informer.error_counts


def test_watch_held_sends_only_what_changed(core, namespaces, sidecar, api):
    """A watch holding every pod at its version receives none of them, only SYNCED; holding
    one it should not (a version it never had) receives that one again."""
    ns = namespaces.create()
    for i in range(3):
        core.create_namespaced_pod(ns, pod(f"p-{i}"))
    sc = sidecar([ns])
    c = sc.client()
    held = cache_pods(c, namespace=ns)
    held[f"{ns}/p-1"] = "1"  # not its resourceVersion
    with c.watch("pods", namespace=ns, held=held_entries(held.items())) as w:
        events = []
        for ev in w:
            events.append(ev)
            if ev.type is EventType.SYNCED:
                break
    assert [(e.type, e.key) for e in events] == [(EventType.ADDED, f"{ns}/p-1"), (EventType.SYNCED, None)]
    assert events[-1].gone == b""


def test_expired_token_resumes_with_held(core, namespaces, sidecar, api):
    """A token older than the change log (maxEvents: 2) is Expired: the informer resumes with
    what it holds, and its handlers see only the three changes made while it was not reading."""
    ns = namespaces.create()
    for i in range(PODS):
        core.create_namespaced_pod(ns, pod(f"p-{i:02d}"))
    sc = sidecar([ns], server_yaml="changeLog:\n  maxEvents: 2\n")
    c = sc.client()

    view = View()
    record: list[tuple[str, str]] = []
    synced = threading.Event()
    release = threading.Event()

    def on_synced():
        synced.set()
        release.wait(120)  # the informer reads nothing until released

    informer = api.Informer(c, "pods", namespace=ns, on_synced=on_synced, **recording(view, record))
    informer.start()
    try:
        wait_until(synced.is_set, "the informer's first sync")
        assert len(record) == PODS
        record.clear()
        # Its watch call ends while on_synced holds it; the changes overflow the change log.
        informer.reconnect()
        expected = change_three(core, ns)
        truth = api_pods(core, [ns])
        wait_until(lambda: cache_pods(c) == truth, "the sidecar's list to equal the apiserver's")
        release.set()
        wait_until(lambda: view.snapshot() == truth, "the informer's view to equal the apiserver's")
    finally:
        release.set()
        informer.stop(10)
    assert informer.error is None
    assert sorted(record) == expected
    assert view.violations == []
    assert informer.known() == truth
    assert informer.error_counts["Expired"] >= 1, informer.error_counts
    assert informer.delta_resumes == 1
    assert informer.relists == 0, informer.error_counts

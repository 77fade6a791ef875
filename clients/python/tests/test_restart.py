"""A sidecar restart changes the epoch: the informer's resume token is refused (OUT_OF_RANGE,
EpochChanged), it lists again (a delta resume: it holds objects) and delivers the differences,
so its handlers' view ends equal to the apiserver's."""

from __future__ import annotations

import signal

import grpc
import pytest
from helpers import View, api_pods, key_of, pod, wait_until

from informerd import DeletedFinalStateUnknown, InformerdError, Reason


def test_sidecar_restart_relists(core, namespaces, sidecar, api):
    ns = namespaces.create()
    for i in range(15):
        core.create_namespaced_pod(ns, pod(f"p-{i:02d}", {"tier": "keep"}))
    sc = sidecar([ns])
    c = sc.client()

    view = View()
    tombstones: list[str] = []
    handlers = view.informer_handlers()
    on_delete = handlers["on_delete"]

    def record_delete(obj):
        if isinstance(obj, DeletedFinalStateUnknown):
            tombstones.append(obj.key)
        on_delete(obj)

    handlers["on_delete"] = record_delete
    informer = api.Informer(c, "pods", namespace=ns, bookmark_interval=1, **handlers)
    informer.start()
    assert informer.wait_for_sync(60)
    assert view.snapshot() == api_pods(core, [ns])
    first = c.list("pods")

    # A change the informer follows by watching.
    core.create_namespaced_pod(ns, pod("live-1"))
    wait_until(lambda: f"{ns}/live-1" in view.snapshot(), "the informer to see live-1")
    assert informer.relists == 0

    for round_, sig in enumerate([signal.SIGKILL, signal.SIGINT], start=1):
        epoch = informer.token.epoch
        sc.stop(sig)
        # While the sidecar is down: deletes, creates, updates, relabels, a re-creation.
        gone = [f"p-{i:02d}" for i in range(3 * round_ - 3, 3 * round_)]
        for name in gone:
            core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
        for i in range(3):
            core.create_namespaced_pod(ns, pod(f"down-{round_}-{i}"))
        core.patch_namespaced_pod("p-10", ns, {"metadata": {"annotations": {"round": str(round_)}}})
        core.patch_namespaced_pod("p-11", ns, {"metadata": {"labels": {"tier": f"r{round_}"}}})
        core.patch_namespaced_pod_status(
            "p-12",
            ns,
            {
                "status": {
                    "conditions": [{"type": "example.io/Round", "status": "True", "reason": f"r{round_}"}]
                }
            },
        )
        core.delete_namespaced_pod("p-13", ns, grace_period_seconds=0)
        core.create_namespaced_pod(ns, pod("p-13"))  # the same name, another uid

        sc.start()  # on the same socket
        sc.wait_synced()
        truth = api_pods(core, [ns])
        # wait_until calls each lambda before it returns, within this round: they see its values.
        wait_until(
            lambda: informer.delta_resumes >= round_,  # noqa: B023
            f"the informer to relist by a delta resume (round {round_})",
        )
        wait_until(
            lambda: informer.token is not None and informer.token.epoch != epoch,  # noqa: B023
            "a token of the new epoch",
        )
        wait_until(
            lambda: view.snapshot() == truth,  # noqa: B023
            f"the informer's view to equal the apiserver's (round {round_})",
        )
        assert informer.delta_resumes == round_
        assert informer.relists == 0, informer.error_counts
        assert isinstance(informer.last_error, InformerdError)
        assert informer.last_error.code == grpc.StatusCode.OUT_OF_RANGE, informer.last_error
        assert informer.last_error.reason == Reason.EPOCH_CHANGED, informer.last_error
        assert all(f"{ns}/{name}" in tombstones for name in gone)
        assert view.violations == []
        assert informer.known() == truth

    # A token of the first run is refused by the new one, with the documented code and reason.
    with pytest.raises(InformerdError) as err:
        for _ in c.watch("pods", since=first.token):
            pass
    assert err.value.code == grpc.StatusCode.OUT_OF_RANGE
    assert err.value.reason == Reason.EPOCH_CHANGED

    # And the informer follows the new run by watching.
    core.create_namespaced_pod(ns, pod("live-2"))
    wait_until(lambda: f"{ns}/live-2" in view.snapshot(), "the informer to see live-2")
    wait_until(
        lambda: view.snapshot() == api_pods(core, [ns]), "the informer's view to equal the apiserver's"
    )
    informer.stop(10)
    assert not informer.running
    assert informer.error is None
    assert view.violations == []
    assert key_of(c.get("pods", "live-2", ns)) == f"{ns}/live-2"

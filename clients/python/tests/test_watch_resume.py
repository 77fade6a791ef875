"""Watch from a revision, break the connection again and again during churn, resume: the
watcher ends with exactly the sidecar's and the apiserver's state, having seen every change
once and in order."""

from __future__ import annotations

import random
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from helpers import View, api_pods, cache_pods, key_of, new_api_client, pod, wait_until
from kubernetes import client as k8s

from informerd import EventType, InformerdError, ResumeToken


class Churn(threading.Thread):
    """Creates, updates (annotations, spec), relabels, patches the status of and deletes pods,
    until it has done `min_ops` and the main thread has broken the watches `min_breaks` times."""

    def __init__(
        self, kubeconfig: str, namespace: str, names: list[str], min_ops: int, enough: threading.Event
    ):
        super().__init__(daemon=True)
        self.core = k8s.CoreV1Api(new_api_client(kubeconfig))
        self.ns = namespace
        self.live = list(names)
        self.dead: list[str] = []
        self.min_ops = min_ops
        self.enough = enough
        self.ops = 0
        self.counts = {"create": 0, "annotate": 0, "spec": 0, "relabel": 0, "status": 0, "delete": 0}
        self.error: BaseException | None = None
        self.rng = random.Random(7)
        self.next_id = 0

    def run(self) -> None:
        try:
            while self.ops < self.min_ops or not self.enough.is_set():
                self.step()
                self.ops += 1
                time.sleep(0.005)
        except BaseException as err:  # noqa: BLE001 - re-raised by the test
            self.error = err

    def step(self) -> None:
        op = self.rng.choices(
            ["create", "annotate", "spec", "relabel", "status", "delete"], [15, 20, 10, 20, 20, 15]
        )[0]
        if op == "create" or not self.live:
            if self.dead and self.rng.random() < 0.5:
                name = self.dead.pop(self.rng.randrange(len(self.dead)))  # the same name again
            else:
                name = f"churn-{self.next_id}"
                self.next_id += 1
            self.core.create_namespaced_pod(self.ns, pod(name, {"tier": "keep"}))
            self.live.append(name)
            self.counts["create"] += 1
            return
        name = self.rng.choice(self.live)
        if op == "annotate":
            self.core.patch_namespaced_pod(name, self.ns, {"metadata": {"annotations": {"n": str(self.ops)}}})
        elif op == "spec":
            self.core.patch_namespaced_pod(
                name,
                self.ns,
                {"spec": {"activeDeadlineSeconds": 1_000_000 - self.ops}},  # it may only go down
            )
        elif op == "relabel":
            tier = self.rng.choice(["keep", "drop"])
            self.core.patch_namespaced_pod(name, self.ns, {"metadata": {"labels": {"tier": tier}}})
        elif op == "status":
            cond = {
                "type": "example.io/Churned",
                "status": self.rng.choice(["True", "False"]),
                "reason": f"op{self.ops}",
            }
            self.core.patch_namespaced_pod_status(name, self.ns, {"status": {"conditions": [cond]}})
        elif op == "delete":
            self.core.delete_namespaced_pod(name, self.ns, grace_period_seconds=0)
            self.live.remove(name)
            self.dead.append(name)
        self.counts[op] += 1


def test_watch_resume_during_churn(core, kubeconfig, namespaces, sidecar, api, seed_bin):
    ns = namespaces.create()
    for i in range(20):
        core.create_namespaced_pod(ns, pod(f"p-{i:02d}", {"tier": "keep"}))
    watched = [ns]
    seeded = None
    if seed_bin:
        # The project's seeder adds realistic pods (server-side apply) and churns them too.
        prefix = namespaces.base + "-seed"
        seeded = namespaces.adopt(f"{prefix}-0")
        subprocess.run(
            [
                seed_bin,
                "pods",
                "--kubeconfig",
                kubeconfig,
                "--prefix",
                prefix,
                "--namespaces",
                "1",
                "--pods",
                "40",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        watched.append(seeded)

    sc = sidecar(watched)
    c = sc.client()

    start = c.list("pods")
    assert start.synced
    start_view = {key_of(o): o["metadata"]["resourceVersion"] for o in start.items}
    assert start_view == api_pods(core, watched)

    # 1. The raw Watch API, resumed by hand from the last token received.
    raw = View(start_view)
    token = [start.token]
    current = [None]
    stop = threading.Event()
    watch_errors: list[str] = []
    opened = [0]

    def follow() -> None:
        while not stop.is_set():
            w = c.watch("pods", since=token[0], bookmark_interval=1)
            current[0] = w
            opened[0] += 1
            if stop.is_set():
                w.cancel()
            try:
                for ev in w:
                    if ev.epoch != start.epoch:
                        watch_errors.append(f"epoch changed: {ev} after {start.token}")
                    if ev.type is EventType.ADDED:
                        raw.add(ev.key, ev.raw.resource_version)
                    elif ev.type is EventType.MODIFIED:
                        raw.update(ev.key, ev.raw.resource_version)
                    elif ev.type is EventType.DELETED:
                        raw.delete(ev.key, ev.raw.resource_version)
                    elif ev.type is EventType.SYNCED:
                        watch_errors.append(f"SYNCED on a watch since a token: {ev}")
                    if ev.revision < token[0].revision:
                        watch_errors.append(f"revision went back: {ev} after {token[0]}")
                    token[0] = ResumeToken(ev.epoch, ev.revision)
            except InformerdError as err:
                if err.needs_relist:
                    watch_errors.append(f"resume since {token[0]} failed: {err}")
                    return
                time.sleep(0.05)  # FellBehind or a broken connection: resume

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()

    # 2. The Informer, made to reconnect at the same moments.
    inf_view = View()
    informer = api.Informer(c, "pods", bookmark_interval=1, **inf_view.informer_handlers())
    informer.start()
    assert informer.wait_for_sync(60)
    assert inf_view.snapshot() == start_view  # nothing was written since the list

    enough = threading.Event()
    churn = Churn(kubeconfig, ns, [f"p-{i:02d}" for i in range(20)], min_ops=250, enough=enough)
    seeder = None
    if seeded:
        seeder = subprocess.Popen(
            [
                seed_bin,
                "churn",
                "--kubeconfig",
                kubeconfig,
                "--prefix",
                prefix,
                "--namespaces",
                "1",
                "--rate",
                "40",
                "--duration",
                "4s",
            ],
            stdout=subprocess.DEVNULL,
        )
    churn.start()
    breaks = 0
    while churn.is_alive():
        time.sleep(0.15)
        if current[0] is not None:
            current[0].cancel()  # the connection breaks mid-stream
        informer.reconnect()
        breaks += 1
        if breaks >= 8 and (seeder is None or seeder.poll() is not None):
            enough.set()
    churn.join()
    if seeder is not None:
        assert seeder.wait() == 0
    assert churn.error is None, getattr(churn.error, "body", churn.error)
    assert breaks >= 8

    # The sidecar catches up with the apiserver, then each watcher with the sidecar.
    truth = api_pods(core, watched)
    wait_until(lambda: cache_pods(c) == truth, "the sidecar's list to equal the apiserver's")
    final = c.list("pods")
    wait_until(lambda: token[0].revision >= final.revision, f"the watch to reach revision {final.revision}")
    wait_until(
        lambda: informer.token is not None and informer.token.revision >= final.revision,
        f"the informer to reach revision {final.revision}",
    )
    stop.set()
    if current[0] is not None:
        current[0].cancel()
    informer.stop(10)
    follower.join(10)
    assert not informer.running and not follower.is_alive()

    final_view = {key_of(o): o["metadata"]["resourceVersion"] for o in final.items}
    assert final_view == truth
    assert watch_errors == []
    assert raw.violations == []
    assert raw.snapshot() == truth
    assert inf_view.violations == []
    assert inf_view.snapshot() == truth
    assert informer.known() == truth
    assert informer.error is None
    # The watches were really broken and resumed, and saw the churn.
    assert opened[0] > 3
    assert informer.resumes > 3
    assert informer.relists == 0, informer.last_error
    assert raw.counts["delete"] >= churn.counts["delete"]
    assert raw.counts["add"] >= churn.counts["create"]


def test_fell_behind_resumes(core, kubeconfig, namespaces, sidecar, api):
    """An informer whose handler stalls while changes pile up is ended with FellBehind
    (RESOURCE_EXHAUSTED) by the sidecar; it resumes from its last token and its view ends
    exact, without a relist."""
    ns = namespaces.create()
    names = [f"p-{i:02d}" for i in range(20)]
    for name in names:
        core.create_namespaced_pod(ns, pod(name))
    sc = sidecar([ns])
    c = sc.client()

    view = View()
    handlers = view.informer_handlers()
    release = threading.Event()
    stalled = threading.Event()
    on_update = handlers["on_update"]

    def stalling_update(old, new):
        stalled.set()
        release.wait(300)  # the informer reads nothing meanwhile
        on_update(old, new)

    handlers["on_update"] = stalling_update
    informer = api.Informer(c, "pods", namespace=ns, **handlers)
    informer.start()
    try:
        assert informer.wait_for_sync(60)

        # Big updates until the sidecar has dropped the stalled watch (its buffer and the
        # connection's flow-control windows are full).
        blob = "x" * 4000
        api = k8s.CoreV1Api(new_api_client(kubeconfig))
        count = [0]

        def patch(i: int) -> None:
            api.patch_namespaced_pod(
                names[i % len(names)], ns, {"metadata": {"annotations": {"blob": f"{blob}{i}"}}}
            )

        def dropped() -> int:
            return c.status("pods").resources[0].dropped_watches

        with ThreadPoolExecutor(6) as pool:
            while dropped() == 0:
                assert count[0] < 30000, "the sidecar never dropped the stalled watch"
                list(pool.map(patch, range(count[0], count[0] + 250)))
                count[0] += 250
        assert stalled.is_set()
        release.set()

        truth = api_pods(core, [ns])
        wait_until(
            lambda: view.snapshot() == truth, "the informer's view to equal the apiserver's", timeout=180
        )
    finally:
        release.set()
        informer.stop(10)
    assert informer.error is None
    assert view.violations == []
    assert informer.error_counts["FellBehind"] >= 1, informer.error_counts
    assert informer.resumes >= 1
    assert informer.relists == 0, informer.error_counts
    assert view.counts["update"] >= count[0]

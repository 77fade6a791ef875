"""informerd.aio as asyncio code uses it (an operator such as kopf): coroutines awaited on the
test's own event loop, `async for` over a watch and a key stream, an Informer whose handlers
are coroutines, and a task cancelled while it reads a watch, as an operator's shutdown cancels
its tasks: the CancelledError goes on and the sidecar sees the watch end. The scenarios of the
other files run with both clients (tests/flavours.py); these are what only an asyncio caller
does."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
from helpers import api_pods, key_of, pod

from informerd import EventType, KeyEventType, NotFoundError, aio


async def eventually(cond: Callable[[], object], what: str, timeout: float = 60) -> None:
    """Polls cond on the loop until it is true; fails (only to avoid hanging) after `timeout`."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up after {timeout}s waiting for {what}", pytrace=False)
        await asyncio.sleep(0.1)


async def watchers(c: aio.Client, count: int, what: str) -> None:
    """Waits until the sidecar counts `count` open watches of pods."""
    seen = [-1]

    async def poll() -> bool:
        seen[0] = (await c.status("pods")).resources[0].watchers
        return seen[0] == count

    deadline = time.monotonic() + 60
    while not await poll():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}: {seen[0]} watches open, not {count}", pytrace=False)
        await asyncio.sleep(0.1)


@pytest.mark.asyncio
@pytest.mark.parametrize("api", ["aio"], indirect=True)
async def test_an_async_operator(core, namespaces, sidecar) -> None:
    ns = namespaces.create()
    for i in range(3):
        await asyncio.to_thread(core.create_namespaced_pod, ns, pod(f"p-{i}"))
    sc = sidecar([ns])

    async with aio.Client(sc.address, timeout=30) as c:
        listed = await c.list("pods", namespace=ns)
        truth = await asyncio.to_thread(api_pods, core, [ns])
        assert {key_of(o): o["metadata"]["resourceVersion"] for o in listed} == truth
        assert (await c.get("pods", "p-0", ns))["metadata"]["name"] == "p-0"
        with pytest.raises(NotFoundError):
            await c.get("pods", "missing", ns)

        # An informer whose handlers are coroutines, each awaited in turn.
        view: dict[str, str] = {}

        async def on_add(o: dict) -> None:
            await asyncio.sleep(0)
            view[key_of(o)] = o["metadata"]["resourceVersion"]

        async def on_update(old: aio.ObjectRef, o: dict) -> None:
            assert view[key_of(o)] == old.resource_version
            view[key_of(o)] = o["metadata"]["resourceVersion"]

        async def on_delete(o: dict | aio.DeletedFinalStateUnknown) -> None:
            view.pop(o.key if isinstance(o, aio.DeletedFinalStateUnknown) else key_of(o))

        informer = aio.Informer(c, "pods", namespace=ns, on_add=on_add, on_update=on_update, on_delete=on_delete)
        task = informer.start()
        assert await informer.wait_for_sync(60)
        assert view == truth

        # A watch since the list: the first change after it.
        w = c.watch("pods", namespace=ns, since=listed.token)

        async def first_added() -> aio.Event:
            async for ev in w:
                if ev.type is EventType.ADDED:
                    return ev
            raise AssertionError("the watch ended")

        reader = asyncio.create_task(first_added())
        created = await asyncio.to_thread(core.create_namespaced_pod, ns, pod("new"))
        ev = await asyncio.wait_for(reader, 60)
        assert (ev.raw.name, ev.raw.resource_version) == ("new", created.metadata.resource_version)
        w.cancel()
        await eventually(lambda: f"{ns}/new" in view, "the informer to see the new pod")

        # The key queue: a resync of every key at the start.
        async with aio.watch_keys(c, "pods", namespace=ns, timeout=60) as keys:
            names = []
            async for kev in keys:
                if kev.type is KeyEventType.KEY:
                    names.append(kev.key.name)
                    keys.ack(kev)
                elif kev.type is KeyEventType.RESYNC_END:
                    break
        assert sorted(names) == ["new", "p-0", "p-1", "p-2"]

        # Only the informer's watch is left open: the sidecar saw the others end.
        await watchers(c, 1, "the cancelled watch and the closed key stream to end")

        # A task cancelled while it reads a watch: the cancellation goes on, the call ends.
        reading = asyncio.Event()

        async def follow() -> None:
            async for _ in c.watch("pods", namespace=ns, bookmark_interval=1):
                reading.set()

        follower = asyncio.create_task(follow())
        await asyncio.wait_for(reading.wait(), 60)
        await watchers(c, 2, "the follower's watch")
        follower.cancel()
        with pytest.raises(asyncio.CancelledError):
            await follower
        await watchers(c, 1, "the cancelled task's watch to end")

        await informer.stop(10)
        assert task.done() and not informer.running
        assert informer.error is None
        assert view == await asyncio.to_thread(api_pods, core, [ns])

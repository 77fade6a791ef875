"""Tokens on the wire, in-process: a gRPC server of the test's own records the `authorization`
metadata of every call it receives, unary (Get) and streaming (Watch), while the token file
rotates the way the kubelet rotates a projected token (a new directory, then a symlink swap)."""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from flavours import Flavour

from informerd import Client, EventType, InformerdError, KeyEventType
from informerd.v1 import cache_pb2 as pb
from informerd.v1 import cache_pb2_grpc as pb_grpc

POD = b'{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}'


class Recorder(pb_grpc.CacheServicer):
    """Answers Get and Watch, and records the authorization each call carried."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self._lock = threading.Lock()

    def _record(self, context: grpc.ServicerContext) -> None:
        values = [v for k, v in context.invocation_metadata() if k == "authorization"]
        with self._lock:
            self.seen.append(",".join(values))

    def Get(self, request, context):  # type: ignore[no-untyped-def]
        self._record(context)
        return pb.GetResponse(object=pb.Object(name=request.name, json=POD))

    def Watch(self, request, context):  # type: ignore[no-untyped-def]
        self._record(context)
        yield pb.WatchEvent(type=pb.SYNCED)

    def WatchKeys(self, request_iterator, context):  # type: ignore[no-untyped-def]
        self._record(context)
        next(request_iterator)  # the subscription
        yield pb.KeyEvent(type=pb.RESYNC_START)


@pytest.fixture
def server() -> Iterator[tuple[Recorder, str]]:
    recorder = Recorder()
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_CacheServicer_to_server(recorder, srv)
    with tempfile.TemporaryDirectory() as d:
        socket = os.path.join(d, "s.sock")
        srv.add_insecure_port("unix://" + socket)
        srv.start()
        try:
            yield recorder, socket
        finally:
            srv.stop(None)


def calls(client: Client, recorder: Recorder) -> tuple[str, str]:
    """Makes a Get and a Watch; the authorization each carried."""
    client.get("pods", "p", "ns", timeout=30)
    get = recorder.seen[-1]
    with client.watch("pods", timeout=30) as w:
        assert next(iter(w)).type == EventType.SYNCED
    return get, recorder.seen[-1]


def projected(directory: Path, token: str) -> None:
    """Writes `token` as the kubelet's atomic writer does: the file in a new directory, `..data`
    a symlink to it replaced by a rename, `token` a symlink to `..data/token`."""
    gen = Path(tempfile.mkdtemp(prefix="..gen_", dir=directory))
    (gen / "token").write_text(token)
    tmp = directory / "..data_tmp"
    tmp.symlink_to(gen.name)
    tmp.rename(directory / "..data")
    link = directory / "token"
    if not link.is_symlink():
        link.symlink_to(Path("..data") / "token")


def test_a_fixed_token_goes_with_every_call(server: tuple[Recorder, str], api: Flavour) -> None:
    recorder, socket = server
    with api.Client(socket, token="static-token\n") as c:
        assert calls(c, recorder) == ("Bearer static-token", "Bearer static-token")
    with api.Client(socket) as c:
        assert calls(c, recorder) == ("", "")


def test_a_token_file_is_followed_through_rotations(
    server: tuple[Recorder, str], tmp_path: Path, api: Flavour
) -> None:
    recorder, socket = server
    projected(tmp_path, "first-token")
    with api.Client(socket, token_file=tmp_path / "token") as c:
        assert calls(c, recorder) == ("Bearer first-token", "Bearer first-token")
        # Same length, perhaps the same modification time: the new file tells the change.
        projected(tmp_path, "secnd-token")
        assert calls(c, recorder) == ("Bearer secnd-token", "Bearer secnd-token")
        # A file that goes away fails the call, naming it; no call goes out without a token.
        (tmp_path / "..data").unlink()
        before = len(recorder.seen)
        with pytest.raises(InformerdError) as err:
            c.get("pods", "p", "ns", timeout=30)
        assert err.value.code == grpc.StatusCode.UNAUTHENTICATED
        assert str(tmp_path / "token") in err.value.message
        assert len(recorder.seen) == before


def test_a_missing_or_empty_token_file_fails_at_once(tmp_path: Path, api: Flavour) -> None:
    with pytest.raises(InformerdError, match="token"):
        api.Client("/nonexistent.sock", token_file=tmp_path / "missing")
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(InformerdError, match="empty"):
        api.Client("/nonexistent.sock", token_file=tmp_path / "empty")
    with pytest.raises(ValueError):
        api.Client("/nonexistent.sock", token="t", token_file=tmp_path / "empty")


def test_the_token_goes_with_watch_keys(server: tuple[Recorder, str], api: Flavour) -> None:
    """WatchKeys, a stream of requests, carries the token as the other calls do."""
    recorder, socket = server
    with api.Client(socket, token="keys-token") as c, api.watch_keys(c, "pods", timeout=30) as keys:
        assert next(iter(keys)).type is KeyEventType.RESYNC_START
    assert recorder.seen[-1] == "Bearer keys-token"

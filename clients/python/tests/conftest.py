"""Fixtures: the real control plane (INFORMERD_KUBECONFIG), namespaces of each test's own,
informerd sidecars (INFORMERD_BIN) started on a socket of their own, and the client flavour
(`api`: informerd, or informerd.aio through tests/flavours.py) each test runs with. No mocks."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from flavours import SYNC, Flavour, LoopThread, aio_flavour
from helpers import new_api_client, pods_resource
from kubernetes import client as k8s

from informerd import Client

HOW_TO_RUN = (
    "run the Python client's tests with `make test` (or set INFORMERD_BIN to the informerd "
    "binary and INFORMERD_KUBECONFIG to the kubeconfig of a running kube-apiserver, e.g. after "
    "`make cluster`: INFORMERD_BIN=target/debug/informerd INFORMERD_KUBECONFIG=.cluster/kubeconfig "
    "clients/python/run-tests.sh)"
)


@pytest.fixture(scope="session")
def informerd_bin() -> str:
    path = os.environ.get("INFORMERD_BIN")
    if not path or not os.environ.get("INFORMERD_KUBECONFIG"):
        pytest.fail(f"INFORMERD_BIN and INFORMERD_KUBECONFIG must be set: {HOW_TO_RUN}", pytrace=False)
    if not os.access(path, os.X_OK):
        pytest.fail(f"INFORMERD_BIN={path} is not an executable: {HOW_TO_RUN}", pytrace=False)
    return path


@pytest.fixture(scope="session")
def kubeconfig(informerd_bin: str) -> str:
    path = os.environ["INFORMERD_KUBECONFIG"]
    if not os.path.isfile(path):
        pytest.fail(f"INFORMERD_KUBECONFIG={path} does not exist: {HOW_TO_RUN}", pytrace=False)
    return path


@pytest.fixture(scope="session")
def seed_bin() -> str | None:
    """The project's seeder (tools/cmd/seed), when INFORMERD_SEED_BIN names it."""
    path = os.environ.get("INFORMERD_SEED_BIN")
    return path if path and os.access(path, os.X_OK) else None


@pytest.fixture(params=["sync", "aio"])
def api(request: pytest.FixtureRequest) -> Iterator[Flavour]:
    """The client flavour of the test: its Client, Informer and watch_keys. A test that takes
    it (or `sidecar`) runs once with each flavour, with the same assertions."""
    if request.param == "sync":
        yield SYNC
        return
    loop = LoopThread()
    try:
        yield aio_flavour(loop)
    finally:
        loop.close()


@pytest.fixture(scope="session")
def core(kubeconfig: str) -> k8s.CoreV1Api:
    """The Kubernetes API (the kubernetes package), for writes and for the truth to compare."""
    return k8s.CoreV1Api(new_api_client(kubeconfig))


class Namespaces:
    """Creates namespaces with unique names and deletes them at the end of the test."""

    def __init__(self, core: k8s.CoreV1Api, test_name: str):
        self.core = core
        base = "".join(ch if ch.isalnum() else "-" for ch in test_name.lower()).strip("-")
        self.base = f"ipy-{base[:30].strip('-')}-{uuid.uuid4().hex[:6]}"
        self.names: list[str] = []

    def create(self, suffix: str = "") -> str:
        name = f"{self.base}-{suffix}" if suffix else self.base
        self.core.create_namespace({"metadata": {"name": name}})
        self.names.append(name)
        return name

    def adopt(self, name: str) -> str:
        """A namespace someone else created (the seeder), to delete at the end."""
        self.names.append(name)
        return name

    def delete_all(self) -> None:
        for name in self.names:
            try:
                self.core.delete_namespace(name)
            except k8s.ApiException as err:
                if err.status != 404:
                    raise


@pytest.fixture
def namespaces(core: k8s.CoreV1Api, request: pytest.FixtureRequest) -> Iterator[Namespaces]:
    ns = Namespaces(core, request.node.name)
    yield ns
    ns.delete_all()


class Sidecar:
    """One informerd process, serving on a Unix socket in a directory of its own."""

    def __init__(
        self,
        binary: str,
        kubeconfig: str,
        resources_yaml: str,
        server_yaml: str = "",
        client_class: Callable[..., Any] = Client,
    ):
        # A short directory: a Unix socket path has at most 107 bytes.
        self.dir = Path(tempfile.mkdtemp(prefix="informerd-py-"))
        self.socket = self.dir / "informerd.sock"
        self.address = f"unix://{self.socket}"
        self.config = self.dir / "config.yaml"
        self.config.write_text(
            "apiVersion: informerd.io/v1alpha1\n"
            "kind: Config\n"
            "server:\n"
            f"  socket: {self.socket}\n" + server_yaml + "resources:\n" + resources_yaml
        )
        self.log = self.dir / "informerd.log"
        self.binary = binary
        self.kubeconfig = kubeconfig
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.client_class = client_class
        self._clients: list[Any] = []

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "info")
        with open(self.log, "ab") as log:
            log.write(f"--- start {self.starts + 1} ---\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                [self.binary, "serve", "--config", str(self.config), "--kubeconfig", self.kubeconfig],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
            )
        self.starts += 1

    def client(self) -> Any:
        """A client of the test's flavour; closed with the sidecar."""
        c = self.client_class(self.address, timeout=30)
        self._clients.append(c)
        return c

    def wait_synced(self, timeout: float = 120) -> None:
        """Waits until Status reports every resource synced (and the socket answers)."""
        c = Client(self.address)
        try:
            deadline = time.monotonic() + timeout
            while True:
                if self.proc is not None and self.proc.poll() is not None:
                    pytest.fail(
                        f"informerd exited with {self.proc.returncode}:\n{self.log_tail()}", pytrace=False
                    )
                try:
                    c.wait_for_sync(timeout=2)
                    return
                except TimeoutError:
                    if time.monotonic() > deadline:
                        pytest.fail(
                            f"informerd not synced (Status over {self.socket}) after {timeout}s:\n{self.log_tail()}",
                            pytrace=False,
                        )
        finally:
            c.close()

    def stop(self, sig: int = signal.SIGINT, timeout: float = 15) -> None:
        """Stops the process (SIGINT: the sidecar's graceful stop; SIGKILL after `timeout`)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def close(self) -> None:
        for c in self._clients:
            c.close()
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def sidecar(
    informerd_bin: str, kubeconfig: str, api: Flavour, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Sidecar]]:
    """sidecar(namespaces) starts informerd caching those namespaces' pods and waits until it
    has synced (unless wait=False: with authorization on, Status needs a token); it is stopped
    at the end of the test (its log is shown if the test failed). Its `client()` is of the
    test's flavour (`api`)."""
    started: list[Sidecar] = []

    def start(
        namespaces: list[str], *, resources_yaml: str | None = None, server_yaml: str = "", wait: bool = True
    ) -> Sidecar:
        sc = Sidecar(informerd_bin, kubeconfig, resources_yaml or pods_resource(namespaces), server_yaml, api.Client)
        started.append(sc)
        sc.start()
        if wait:
            sc.wait_synced()
        return sc

    yield start
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for sc in started:
        if failed:
            print(f"--- informerd log ({sc.log}) ---\n{sc.log_tail(80)}")
        sc.close()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    rep = yield
    setattr(item, f"rep_{rep.when}", rep)
    return rep

"""The bookkeeping of Client.wait_for_sync (poll Status until synced, through a sidecar that is
not up yet), without the polling's I/O: shared by the synchronous and the asyncio client."""

from __future__ import annotations

import time

import grpc

from ._errors import InformerdError
from .v1 import cache_pb2 as pb


class SyncPoll:
    """One wait_for_sync: after each Status answer or failure, says whether to stop."""

    INTERVAL = 0.2  # seconds between two Status calls

    def __init__(self, address: str, timeout: float):
        self.address = address
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.last: InformerdError | None = None

    def call_timeout(self) -> float:
        """The deadline of the next Status call."""
        return max(0.5, min(5.0, self.deadline - time.monotonic()))

    def answered(self, status: pb.StatusResponse) -> bool:
        """True when `status` says synced; raises TimeoutError when the time is up."""
        if status.synced:
            return True
        self.last = None
        self._check()
        return False

    def failed(self, err: InformerdError) -> None:
        """Not up yet (no socket, connection refused), or NotSynced, is waited through; anything
        else is an answer, raised. Raises TimeoutError when the time is up."""
        if err.code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            raise err
        self.last = err
        self._check()

    def _check(self) -> None:
        if time.monotonic() >= self.deadline:
            raise TimeoutError(
                f"informerd at {self.address} not synced after {self.timeout:.0f}s"
                + (f": {self.last}" if self.last else "")
            )

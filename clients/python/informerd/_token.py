"""Tokens: with `server.authorization: kubernetes` (node-local mode) informerd serves each client
what that client's own ServiceAccount may read, and a client says who it is with a token in the
`authorization: Bearer <token>` metadata of every call, unary and streaming alike.

Decision: a client interceptor adds the metadata, rather than gRPC call credentials: call
credentials need a secure channel (or local credentials), and informerd is reached in plain
text over a Unix socket or loopback; an interceptor works on the channel the client already
makes, and on one the caller passes in.

Decision: the asyncio client (informerd.aio) passes the same metadata with each call rather
than through a grpc.aio interceptor: it then also works on a channel the caller passes in, and
an unreadable token file fails the call before it goes out, as here. The stat and the read are
blocking, but a stat is microseconds and the read only follows a rotation.

Decision: a token file is stat'ed on every call and read again when the path leads to another
file (the kubelet rotates a projected token by writing a new file and swapping the `..data`
symlink) or its modification time or size changed; it is never kept open, which would keep the
old file. A stat is cheap beside a call, and a rotated token is used from the next call on.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import grpc

from ._errors import InformerdError


class TokenFile:
    """The token in a file, read again whenever the file changes."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int, int] | None = None  # device, inode, mtime (ns), size
        self._token = ""

    def __call__(self) -> str:
        """The current token; raises InformerdError (UNAUTHENTICATED) naming the file when it
        cannot be read or is empty."""
        try:
            st = os.stat(self.path)  # follows the kubelet's symlinks to the current file
            seen = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
            with self._lock:
                if seen != self._seen:
                    with open(self.path, encoding="utf-8") as f:
                        token = f.read().strip()
                    if not token:
                        raise OSError(f"{self.path} is empty")
                    self._token, self._seen = token, seen
                return self._token
        except OSError as err:
            raise InformerdError(
                grpc.StatusCode.UNAUTHENTICATED, None, f"informerd token file {self.path}: {err}"
            ) from None


class _CallDetails(NamedTuple):
    method: str
    timeout: float | None
    metadata: Any
    credentials: Any
    wait_for_ready: Any
    compression: Any


def bearer(token: Callable[[], str]) -> tuple[str, str]:
    """The `authorization` metadata of a call."""
    return ("authorization", f"Bearer {token()}")


class BearerToken(
    grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor, grpc.StreamStreamClientInterceptor
):
    """Adds `authorization: Bearer <token()>` to every call (WatchKeys, a stream of requests,
    included)."""

    def __init__(self, token: Callable[[], str]):
        self._token = token

    def _details(self, details: grpc.ClientCallDetails) -> _CallDetails:
        metadata = [(k, v) for k, v in (details.metadata or ()) if k != "authorization"]
        metadata.append(bearer(self._token))
        return _CallDetails(
            details.method,
            details.timeout,
            metadata,
            details.credentials,
            getattr(details, "wait_for_ready", None),
            getattr(details, "compression", None),
        )

    def intercept_unary_unary(self, continuation, client_call_details, request):  # type: ignore[no-untyped-def]
        return continuation(self._details(client_call_details), request)

    def intercept_unary_stream(self, continuation, client_call_details, request):  # type: ignore[no-untyped-def]
        return continuation(self._details(client_call_details), request)

    def intercept_stream_stream(self, continuation, client_call_details, request_iterator):  # type: ignore[no-untyped-def]
        return continuation(self._details(client_call_details), request_iterator)


def token_source(token: str | None, token_file: str | os.PathLike[str] | None) -> Callable[[], str] | None:
    """What gives the token of each call: a fixed `token`, or `token_file` read as it changes."""
    if token is not None and token_file is not None:
        raise ValueError("give token or token_file, not both")
    if token is not None:
        fixed = token.strip()
        if not fixed:
            raise ValueError("token is empty")
        return lambda: fixed
    if token_file is not None:
        source = TokenFile(token_file)
        source()  # fail now, naming the file, rather than at the first call
        return source
    return None

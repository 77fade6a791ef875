"""Where the sidecar is: the address a client is given, else the socket in $INFORMERD_SOCKET
(what deploy/ sets for the controller), else the default socket; and the channel options both
clients (informerd and informerd.aio) open their channel with.

Decision: with neither an address nor $INFORMERD_SOCKET the client still uses the default
socket, as the CLI (`--socket`, default `$INFORMERD_SOCKET`, else the default) and the Go
client do, since a sidecar of the default configuration listens there. What would be unclear
is a failure to connect there: such a failure (UNAVAILABLE without a reason from the sidecar)
says where the address came from and how to give another (`ConnectionTarget.hint`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_SOCKET = "/run/informerd/informerd.sock"
DEFAULT_TARGET = "unix://" + DEFAULT_SOCKET
SOCKET_ENV = "INFORMERD_SOCKET"

# Objects travel as JSON; the server chunks lists at about 1 MiB, but one object may be larger.
_MAX_MESSAGE = 64 * 1024 * 1024
_CHANNEL_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.max_receive_message_length", _MAX_MESSAGE),
    # A restarted sidecar should be reached again within a second or two, not after gRPC's
    # default reconnect backoff (up to 120 s).
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
]


def grpc_target(address: str) -> str:
    """`/path/to.sock` as a gRPC target; other addresses (`unix://...`, `host:port`) as they are."""
    if address.startswith("/"):
        return "unix://" + address
    return address


@dataclass(frozen=True)
class ConnectionTarget:
    """The address a client uses (`address`, as given or found), its gRPC target, and `hint`:
    what a connection failure adds to its message (empty for an address given)."""

    address: str
    target: str
    hint: str

    @classmethod
    def resolve(cls, address: str | None) -> ConnectionTarget:
        """`address` when given (not empty), else $INFORMERD_SOCKET (a path), else the default."""
        if address:
            return cls(address, grpc_target(address), "")
        path = os.environ.get(SOCKET_ENV, "")
        if path:
            # A path, never a URL, as the CLI takes it; a relative one is relative to the cwd.
            target = ("unix://" if path.startswith("/") else "unix:") + path
            return cls(path, target, f" (the socket of ${SOCKET_ENV}={path})")
        return cls(
            DEFAULT_TARGET,
            DEFAULT_TARGET,
            f" (the default socket {DEFAULT_SOCKET}: no address was given to the Client and"
            f" ${SOCKET_ENV} is not set; pass the address argument or set ${SOCKET_ENV})",
        )

    def channel_options(self, extra: Sequence[tuple[str, Any]] = ()) -> list[tuple[str, Any]]:
        opts = list(_CHANNEL_OPTIONS)
        if self.target.startswith("unix:"):
            # gRPC's C core sends the socket path as :authority, which is no valid authority:
            # the sidecar's HTTP/2 server (h2) resets such streams (PROTOCOL_ERROR). Kubernetes
            # and grpc-go use "localhost" for Unix sockets; so do we.
            opts.append(("grpc.default_authority", "localhost"))
        return opts + list(extra)

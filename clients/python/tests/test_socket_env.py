"""Where a client connects without an address: the socket in $INFORMERD_SOCKET (what deploy/
sets for the controller), else the default socket; an address given (not empty) wins. A
failure to connect says where the address came from and how to give another."""

from __future__ import annotations

import os
from pathlib import Path

import grpc
import pytest
from flavours import Flavour

from informerd import DEFAULT_SOCKET, DEFAULT_TARGET, InformerdError


def unreachable(api: Flavour) -> InformerdError:
    """The error of a Status call of a client made without an address, which finds nothing."""
    with api.Client(timeout=5) as c, pytest.raises(InformerdError) as err:
        c.status()
    assert err.value.code == grpc.StatusCode.UNAVAILABLE, err.value
    return err.value


def test_informerd_socket_is_the_address_when_none_is_given(
    namespaces, sidecar, api: Flavour, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    sc = sidecar([namespaces.create()])
    monkeypatch.setenv("INFORMERD_SOCKET", str(sc.socket))
    for address in (None, ""):  # an empty address is none, as with Dial(os.Getenv(...)) in Go
        with api.Client(address, timeout=30) as c:
            assert c.address == str(sc.socket)
            assert c.status().synced

    # An address given wins over the variable.
    missing = tmp_path / "nothing.sock"
    monkeypatch.setenv("INFORMERD_SOCKET", str(missing))
    with api.Client(sc.address, timeout=30) as c:
        assert c.status().synced

    # Nothing at the variable's socket: the failure names the variable and the path.
    err = unreachable(api)
    assert f"$INFORMERD_SOCKET={missing}" in err.message, err

    # Neither: the default socket.
    monkeypatch.delenv("INFORMERD_SOCKET")
    with api.Client(timeout=5) as c:
        assert c.address == DEFAULT_TARGET
    if not os.path.exists(DEFAULT_SOCKET):  # no informerd of the default configuration here
        err = unreachable(api)
        assert "pass the address argument or set $INFORMERD_SOCKET" in err.message, err
        assert DEFAULT_SOCKET in err.message, err

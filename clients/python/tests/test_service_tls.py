"""Service mode from Python (deploy/service): informerd listening on TCP with TLS and
`server.authorization: kubernetes`, and a client that brings its own TLS channel (`channel=`,
trusting the server's CA) and a ServiceAccount token file. The certificate is made with the
openssl command for 127.0.0.1 by a CA of this test's own."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import grpc
import pytest
from conftest import Sidecar
from helpers import api_pods, pod, pods_resource
from kubernetes import client as k8s
from test_authz import AUTHORIZATION, expect_refused, list_when_ready, pod_reader_token

from informerd import Client, InformerdError, Reason


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def issue_certificate(directory: Path) -> tuple[Path, Path, Path]:
    """A CA, and a server certificate and key it signs for 127.0.0.1: (ca.crt, tls.crt,
    tls.key) in `directory`."""
    ca_crt, ca_key = directory / "ca.crt", directory / "ca.key"
    crt, key, csr = directory / "tls.crt", directory / "tls.key", directory / "tls.csr"
    ext = directory / "server.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    for args in (
        ["req", "-x509", *ec, "-keyout", ca_key, "-out", ca_crt, "-subj", "/CN=informerd test CA", "-days", "1"],
        ["req", *ec, "-keyout", key, "-out", csr, "-subj", "/CN=informerd"],
        ["x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial"]
        + ["-out", crt, "-days", "1", "-extfile", ext],
    ):
        subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)
    return ca_crt, crt, key


def test_a_tls_channel_and_a_token_read_what_rbac_allows(
    namespaces, core: k8s.CoreV1Api, kubeconfig: str, informerd_bin: str, tmp_path: Path
) -> None:
    """Over TLS, with the reader's token: exactly the pods of its namespace, PERMISSION_DENIED
    for another; a channel that does not trust the server's CA gets no answer at all."""
    a, b = namespaces.create("a"), namespaces.create("b")
    for ns in (a, b):
        core.create_namespaced_pod(ns, pod("p0"))
    token_file = pod_reader_token(kubeconfig, a, "reader", tmp_path)
    ca, crt, key = issue_certificate(tmp_path)
    port = free_port()
    server = f'  listen: "127.0.0.1:{port}"\n  tls:\n    certFile: {crt}\n    keyFile: {key}\n'
    sc = Sidecar(informerd_bin, kubeconfig, pods_resource([a, b]), server + AUTHORIZATION)
    try:
        sc.start()
        credentials = grpc.ssl_channel_credentials(root_certificates=ca.read_bytes())
        channel = grpc.secure_channel(f"127.0.0.1:{port}", credentials)
        with Client(channel=channel, timeout=30, token_file=token_file) as reader:
            assert list_when_ready(sc, reader, a) == api_pods(core, [a])
            expect_refused(
                lambda: reader.list("pods", namespace=b),
                grpc.StatusCode.PERMISSION_DENIED,
                Reason.FORBIDDEN,
                "the reader's list of namespace B over TLS",
            )
        channel.close()

        untrusting = grpc.secure_channel(f"127.0.0.1:{port}", grpc.ssl_channel_credentials())
        with Client(channel=untrusting, timeout=5, token_file=token_file) as stranger:
            with pytest.raises(InformerdError) as err:
                stranger.list("pods", namespace=a)
            assert err.value.code == grpc.StatusCode.UNAVAILABLE, f"an untrusted server: {err.value}"
        untrusting.close()
    finally:
        sc.close()

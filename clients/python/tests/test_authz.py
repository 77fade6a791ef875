"""Per-client authorization end to end: a real sidecar with `server.authorization: kubernetes`,
a ServiceAccount whose Role reads pods in namespace A only, and its token from the
TokenRequest API (audience `informerd`) in a file, as a projected token would be."""

from __future__ import annotations

import time
from pathlib import Path

import grpc
import pytest
from conftest import Sidecar
from helpers import api_pods, cache_pods, new_api_client, pod, wait_until
from kubernetes import client as k8s

from informerd import Client, InformerdError, Reason
from informerd.v1 import cache_pb2 as pb

AUDIENCE = "informerd"
# deniedTTL 1s: a denial given before RBAC's caches saw the new RoleBinding must not stick.
AUTHORIZATION = "  authorization:\n    mode: kubernetes\n    deniedTTL: 1s\n"


def pod_reader_token(kubeconfig: str, namespace: str, sa: str, directory: Path) -> Path:
    """Creates the ServiceAccount `sa` with a Role that may get, list and watch pods in
    `namespace` (nothing else), and writes its token for informerd's audience, from the
    TokenRequest API, to a file."""
    api = new_api_client(kubeconfig)
    core, rbac = k8s.CoreV1Api(api), k8s.RbacAuthorizationV1Api(api)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": sa}})
    rbac.create_namespaced_role(
        namespace,
        {
            "metadata": {"name": sa},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
        },
    )
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": sa},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": sa},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}],
        },
    )
    request = core.create_namespaced_service_account_token(
        sa, namespace, {"spec": {"audiences": [AUDIENCE], "expirationSeconds": 3600}}
    )
    assert request.status.token, f"the TokenRequest for {namespace}/{sa} returned no token"
    path = directory / "token"
    path.write_text(request.status.token)
    path.chmod(0o600)
    return path


def list_when_ready(sc: Sidecar, client: Client, namespace: str, timeout: float = 120) -> dict[str, str]:
    """Lists the namespace's pods once the sidecar has synced and the apiserver's RBAC serves
    the new binding; fails (only to avoid hanging) after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        if sc.proc is not None and sc.proc.poll() is not None:
            pytest.fail(f"informerd exited with {sc.proc.returncode}:\n{sc.log_tail()}", pytrace=False)
        try:
            return cache_pods(client, namespace=namespace)
        except InformerdError as err:
            if time.monotonic() > deadline:
                pytest.fail(f"the reader could not list {namespace} after {timeout}s: {err}", pytrace=False)
        time.sleep(0.2)


def expect_refused(call, code: grpc.StatusCode, reason: str, what: str) -> None:
    with pytest.raises(InformerdError) as err:
        call()
    assert (err.value.code, err.value.reason) == (code, reason), f"{what}: {err.value}"


def test_token_file_reads_only_what_rbac_allows(
    namespaces, core: k8s.CoreV1Api, kubeconfig: str, sidecar, api, tmp_path: Path
) -> None:
    """A client with `token_file` lists exactly the pods of the namespace its Role covers, is
    refused PERMISSION_DENIED/Forbidden for another cached namespace and for all namespaces
    (never a silent subset), and a client without a token is refused
    UNAUTHENTICATED/Unauthenticated."""
    a, b = namespaces.create("a"), namespaces.create("b")
    for ns in (a, b):
        for i in range(2):
            core.create_namespaced_pod(ns, pod(f"p{i}"))
    token_file = pod_reader_token(kubeconfig, a, "reader-a", tmp_path)
    sc = sidecar([a, b], server_yaml=AUTHORIZATION, wait=False)

    with api.Client(sc.address, timeout=30, token_file=token_file) as reader:
        got = list_when_ready(sc, reader, a)
        assert got == api_pods(core, [a]), f"pods of {a} listed with the reader's token"
        assert len(got) == 2, got

        expect_refused(
            lambda: reader.list("pods", namespace=b),
            grpc.StatusCode.PERMISSION_DENIED,
            Reason.FORBIDDEN,
            "the reader's list of namespace B",
        )
        expect_refused(
            lambda: reader.list("pods"),
            grpc.StatusCode.PERMISSION_DENIED,
            Reason.FORBIDDEN,
            "the reader's list of all namespaces",
        )

    with api.Client(sc.address, timeout=30) as anonymous:
        expect_refused(
            lambda: anonymous.list("pods", namespace=a),
            grpc.StatusCode.UNAUTHENTICATED,
            Reason.UNAUTHENTICATED,
            "a list of namespace A without a token",
        )


def test_informer_serves_once_rbac_allows(
    namespaces, core: k8s.CoreV1Api, kubeconfig: str, sidecar, api, tmp_path: Path
) -> None:
    """An Informer whose ServiceAccount may not read the namespace it follows keeps asking
    (each PERMISSION_DENIED/Forbidden counted, nothing raised) and holds exactly the
    apiserver's pods of that namespace once a RoleBinding grants the read: RBAC applied with
    the workload that needs it, and seen late, does not leave a pod's informer empty."""
    a, b = namespaces.create("a"), namespaces.create("b")
    for i in range(2):
        core.create_namespaced_pod(b, pod(f"p{i}"))
    token_file = pod_reader_token(kubeconfig, a, "reader", tmp_path)
    sc = sidecar([a, b], server_yaml=AUTHORIZATION, wait=False)

    with api.Client(sc.address, timeout=30, token_file=token_file) as reader:
        informer = api.Informer(reader, "pods", namespace=b, backoff_max=0.5)
        informer.start()
        try:
            wait_until(lambda: informer.error_counts["Forbidden"] >= 1, "a Forbidden watch")
            assert informer.error is None, informer.error
            rbac = k8s.RbacAuthorizationV1Api(new_api_client(kubeconfig))
            rbac.create_namespaced_role(
                b,
                {
                    "metadata": {"name": "reader"},
                    "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
                },
            )
            rbac.create_namespaced_role_binding(
                b,
                {
                    "metadata": {"name": "reader"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
                    "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": a}],
                },
            )
            want = api_pods(core, [b])
            wait_until(lambda: informer.known() == want, "the informer to hold namespace B's pods")
        finally:
            informer.stop(10)
        assert informer.error is None, informer.error
        assert len(want) == 2, want


def test_reason_constants_cover_the_proto() -> None:
    """Every reason cache.proto defines is a value of `Reason`, so a reason added to the proto
    without one (as Unauthenticated and Forbidden once were) fails."""
    constants = {v for k, v in vars(Reason).items() if k.isupper()}
    # pb.Reason is protobuf's EnumTypeWrapper, not a dict: keys() is how it lists its names.
    defined = {name for name in pb.Reason.keys() if pb.Reason.Value(name) != 0}  # noqa: SIM118
    assert defined <= constants, f"no Reason constant for {sorted(defined - constants)}"

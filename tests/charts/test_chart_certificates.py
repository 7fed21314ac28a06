"""Serving certificates in the three modes: what the API server trusts must be what the server presents."""

from __future__ import annotations

import base64
import datetime
import socket
import ssl
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.charts.fake_apiserver import fake_apiserver
from tests.charts.helm_chart import (
    CHART,
    FULLNAME,
    NAMESPACE,
    PINNED_VALUES,
    of_kind,
    one,
    pod_spec,
    render,
    render_error,
    run_helm,
    webhook_container,
)

pytestmark = pytest.mark.helm

SERVICE_NAMES = {
    FULLNAME,
    f"{FULLNAME}.{NAMESPACE}",
    f"{FULLNAME}.{NAMESPACE}.svc",
    f"{FULLNAME}.{NAMESPACE}.svc.cluster.local",
}


def secret(docs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    found = [d for d in of_kind(docs, "Secret") if d["metadata"]["name"] == name]
    assert len(found) == 1, name
    return found[0]


def decoded(obj: dict[str, Any], key: str) -> bytes:
    return base64.b64decode(obj["data"][key])


def ca_bundle(docs: list[dict[str, Any]]) -> bytes:
    hook = one(docs, "ValidatingWebhookConfiguration")["webhooks"][0]
    return base64.b64decode(hook["clientConfig"]["caBundle"])


def tls_secret_name(docs: list[dict[str, Any]]) -> str:
    volumes = {v["name"]: v for v in pod_spec(one(docs, "Deployment"))["volumes"]}
    name: str = volumes["tls"]["secret"]["secretName"]
    return name


def dns_names(certificate: x509.Certificate) -> set[str]:
    extension = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    return set(extension.value.get_values_for_type(x509.DNSName))


def handshake(cert_pem: bytes, key_pem: bytes, trusted: bytes, server_name: str, tmp_path: Path) -> None:
    """One TLS handshake on 127.0.0.1 the way the API server makes it: CA pinned, SNI = the service name."""
    (tmp_path / "tls.crt").write_bytes(cert_pem)
    (tmp_path / "tls.key").write_bytes(key_pem)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    client_context = ssl.create_default_context(cadata=trusted.decode())
    client_context.set_alpn_protocols(["http/1.1"])
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(10)
        port = listener.getsockname()[1]
        failures: list[BaseException] = []

        def serve() -> None:
            try:
                connection, _ = listener.accept()
                with server_context.wrap_socket(connection, server_side=True) as tls:
                    tls.recv(1)
            except (OSError, ssl.SSLError) as error:  # the client's refusal shows up here as well
                failures.append(error)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            with (
                socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
                client_context.wrap_socket(raw, server_hostname=server_name) as tls,
            ):
                tls.sendall(b"x")
        finally:
            thread.join(timeout=10)


def test_helm_mode_ca_bundle_signs_the_serving_certificate(tmp_path: Path) -> None:
    docs = render(set_json={"certificates.helm.certValidityDays": 30})
    ca_pem = ca_bundle(docs)
    ca = x509.load_pem_x509_certificate(ca_pem)
    served = secret(docs, tls_secret_name(docs))
    assert served["type"] == "kubernetes.io/tls"
    leaf = x509.load_pem_x509_certificate(decoded(served, "tls.crt"))
    leaf.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert dns_names(leaf) == SERVICE_NAMES
    usages = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in usages
    lifetime = leaf.not_valid_after_utc - leaf.not_valid_before_utc
    assert datetime.timedelta(days=29) < lifetime <= datetime.timedelta(days=31)
    # The key in the Secret belongs to the certificate in the Secret.
    key = serialization.load_pem_private_key(decoded(served, "tls.key"), password=None)
    assert key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ) == leaf.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    assert decoded(served, "ca.crt") == ca_pem
    kept = secret(docs, f"{FULLNAME}-ca")
    assert kept["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert decoded(kept, "tls.crt") == ca_pem
    handshake(
        decoded(served, "tls.crt"),
        decoded(served, "tls.key"),
        ca_pem,
        f"{FULLNAME}.{NAMESPACE}.svc",
        tmp_path,
    )


def test_helm_mode_certificate_is_refused_for_another_name(tmp_path: Path) -> None:
    docs = render()
    served = secret(docs, tls_secret_name(docs))
    with pytest.raises(ssl.SSLCertVerificationError, match="match"):
        handshake(
            decoded(served, "tls.crt"),
            decoded(served, "tls.key"),
            ca_bundle(docs),
            "other.trtguard.svc",
            tmp_path,
        )


def test_server_reads_the_mounted_secret() -> None:
    docs = render()
    container = webhook_container(docs)
    args = container["args"]
    assert args[args.index("--tls-cert") + 1] == "/etc/trtguard/tls/tls.crt"
    assert args[args.index("--tls-key") + 1] == "/etc/trtguard/tls/tls.key"
    mount = next(m for m in container["volumeMounts"] if m["name"] == "tls")
    assert mount == {"name": "tls", "mountPath": "/etc/trtguard/tls", "readOnly": True}


def upgrade(server: Any, tmp_path: Path, *extra: str) -> list[dict[str, Any]]:
    """``helm template --dry-run=server`` against the fake API server: `lookup` sees its Secrets."""
    result = run_helm(
        "template",
        "rel",
        str(CHART),
        "--namespace",
        NAMESPACE,
        "--dry-run=server",
        "--is-upgrade",
        "--disable-openapi-validation",
        "--values",
        str(PINNED_VALUES),
        *extra,
        kubeconfig=server.kubeconfig(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def test_helm_mode_reuses_the_installed_ca_and_certificate(tmp_path: Path) -> None:
    with fake_apiserver() as server:
        first = upgrade(server, tmp_path)
        for kept in of_kind(first, "Secret"):
            server.store_secret(kept)
        second = upgrade(server, tmp_path)
        assert any(path.endswith(f"/secrets/{FULLNAME}-ca") for path in server.requests)
    assert ca_bundle(second) == ca_bundle(first)
    name = tls_secret_name(first)
    assert secret(second, name)["data"] == secret(first, name)["data"]
    assert secret(second, f"{FULLNAME}-ca")["data"] == secret(first, f"{FULLNAME}-ca")["data"]


def test_helm_mode_renews_the_certificate_under_the_same_ca(tmp_path: Path) -> None:
    with fake_apiserver() as server:
        first = upgrade(server, tmp_path)
        for kept in of_kind(first, "Secret"):
            server.store_secret(kept)
        renewed = upgrade(server, tmp_path, "--set", "certificates.helm.renewCert=true")
    assert ca_bundle(renewed) == ca_bundle(first)
    name = tls_secret_name(first)
    old_leaf = decoded(secret(first, name), "tls.crt")
    new_leaf = decoded(secret(renewed, name), "tls.crt")
    assert new_leaf != old_leaf
    x509.load_pem_x509_certificate(new_leaf).verify_directly_issued_by(
        x509.load_pem_x509_certificate(ca_bundle(first))
    )


def test_helm_mode_issues_a_certificate_when_only_the_kept_ca_survived(tmp_path: Path) -> None:
    """After `helm uninstall` the CA Secret stays (resource-policy keep); a reinstall signs with it."""
    with fake_apiserver() as server:
        first = upgrade(server, tmp_path)
        server.store_secret(secret(first, f"{FULLNAME}-ca"))
        again = upgrade(server, tmp_path)
    assert ca_bundle(again) == ca_bundle(first)
    leaf = x509.load_pem_x509_certificate(decoded(secret(again, tls_secret_name(again)), "tls.crt"))
    leaf.verify_directly_issued_by(x509.load_pem_x509_certificate(ca_bundle(first)))


def test_helm_mode_replaces_a_certificate_from_another_ca(tmp_path: Path) -> None:
    with fake_apiserver() as server:
        first = upgrade(server, tmp_path)
        foreign = render()  # another CA and leaf, as if someone replaced the serving Secret
        server.store_secret(secret(first, f"{FULLNAME}-ca"))
        server.store_secret(secret(foreign, tls_secret_name(foreign)))
        again = upgrade(server, tmp_path)
    assert ca_bundle(again) == ca_bundle(first)
    leaf = x509.load_pem_x509_certificate(decoded(secret(again, tls_secret_name(again)), "tls.crt"))
    leaf.verify_directly_issued_by(x509.load_pem_x509_certificate(ca_bundle(first)))


def test_cert_manager_mode_injects_the_ca_of_the_serving_certificate() -> None:
    docs = render(CHART / "ci" / "cert-manager-values.yaml")
    configuration = one(docs, "ValidatingWebhookConfiguration")
    assert "caBundle" not in configuration["webhooks"][0]["clientConfig"]
    assert not of_kind(docs, "Secret")
    certificates = {c["metadata"]["name"]: c for c in of_kind(docs, "Certificate")}
    serving = certificates[f"{FULLNAME}-tls"]
    injected = configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
    assert injected == f"{NAMESPACE}/{serving['metadata']['name']}"
    assert serving["metadata"]["namespace"] == NAMESPACE
    assert serving["spec"]["secretName"] == tls_secret_name(docs)
    assert set(serving["spec"]["dnsNames"]) == SERVICE_NAMES
    assert serving["spec"]["duration"] == "720h" and serving["spec"]["renewBefore"] == "240h"
    assert "server auth" in serving["spec"]["usages"]
    assert serving["spec"]["privateKey"]["rotationPolicy"] == "Always"
    # The chart bootstraps a CA: self-signed Issuer -> CA Certificate -> CA Issuer -> serving Certificate.
    issuers = {i["metadata"]["name"]: i for i in of_kind(docs, "Issuer")}
    ca_issuer = issuers[serving["spec"]["issuerRef"]["name"]]
    ca_certificate = certificates[f"{FULLNAME}-ca"]
    assert ca_issuer["spec"]["ca"]["secretName"] == ca_certificate["spec"]["secretName"]
    assert ca_certificate["spec"]["isCA"] is True
    assert len(ca_certificate["spec"]["commonName"]) <= 64
    assert issuers[ca_certificate["spec"]["issuerRef"]["name"]]["spec"] == {"selfSigned": {}}


def test_cert_manager_mode_with_an_existing_issuer() -> None:
    docs = render(CHART / "ci" / "cert-manager-issuer-values.yaml")
    assert not of_kind(docs, "Issuer")
    serving = one(docs, "Certificate")
    assert serving["spec"]["issuerRef"] == {
        "name": "corp-internal-ca",
        "kind": "ClusterIssuer",
        "group": "cert-manager.io",
    }


def test_external_mode_trusts_the_given_ca_for_the_given_secret() -> None:
    values = CHART / "ci" / "external-certs-values.yaml"
    docs = render(values)
    given = yaml.safe_load(values.read_text())["certificates"]["external"]
    assert ca_bundle(docs) == given["caBundle"].encode()
    assert tls_secret_name(docs) == "trtguard-serving-cert"
    assert not of_kind(docs, "Secret") and not of_kind(docs, "Certificate")


@pytest.mark.parametrize(
    ("set_json", "message"),
    [
        (
            {"certificates.mode": "external"},
            "certificates.mode=external needs certificates.external.secretName",
        ),
        (
            {"certificates.mode": "external", "certificates.external.secretName": "tls"},
            "certificates.mode=external needs certificates.external.caBundle",
        ),
        (
            {
                "certificates.mode": "external",
                "certificates.external.secretName": "tls",
                "certificates.external.caBundle": "not a certificate",
            },
            "at '/certificates/external/caBundle'",
        ),
    ],
)
def test_external_mode_without_its_inputs_is_refused(set_json: dict[str, Any], message: str) -> None:
    assert message in render_error(set_json=set_json)

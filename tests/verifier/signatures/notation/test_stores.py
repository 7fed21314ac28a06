"""Trust stores are checked by type when the policy loads (issue 25, item 1): what Notation refuses in a
``ca``, ``signingAuthority`` or ``tsa`` store is a load error naming the file and the reason (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives.serialization import Encoding

from tests.policies.registry_world import run_cli
from tests.support.notary_pki import issue, make_pki, subject
from verifier.base._errors import InputError
from verifier.signatures.notation import NotationTrust, TrustedIdentity, load_certificates

POLICY = """\
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: p}
spec:
  images:
    - name: signed
      match: ["*"]
      signatures: {keys: [t/notary]}
---
apiVersion: trtguard.dev/v1alpha1
kind: TrustedKeys
metadata: {name: t}
spec:
  keys:
    - name: notary
      notation:
        trustStores: {STORES}
        trustedIdentities: ["*"]
        registryScopes: ["*"]
"""


def _load(tmp_path: Path, stores: str, files: dict[str, bytes]) -> tuple[int, str]:
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "policy.yaml").write_text(POLICY.replace("{STORES}", stores))
    pod = tmp_path / "pod.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: x}]}\n"
    )
    status, _, err = run_cli("check", "--policies", tmp_path / "policy.yaml", pod)
    return status, err


def test_a_leaf_in_a_ca_store_is_a_load_error_naming_the_file(tmp_path: Path) -> None:
    pki = make_pki()
    status, err = _load(tmp_path, "{ca: [leaf.crt]}", {"leaf.crt": pki.leaf.pem()})
    assert status == 2
    assert "leaf.crt" in err and "neither a CA certificate nor a self-signed signing certificate" in err


def test_an_intermediate_in_a_tsa_store_is_a_load_error(tmp_path: Path) -> None:
    pki = make_pki()
    files = {"root.crt": pki.root.pem(), "inter.crt": pki.intermediate.pem()}
    status, err = _load(tmp_path, "{ca: [root.crt], tsa: [inter.crt]}", files)
    assert status == 2 and "inter.crt" in err and "is not a root" in err


@pytest.mark.parametrize(
    ("path", "kind", "reason"),
    [
        ("truststore/ca/trust-store-with-leaf-certs/non-ca.crt", "ca", "neither a CA certificate"),
        (
            "truststore/ca/trust-store-with-leaf-certs-in-single-file/RootAndLeafCerts.crt",
            "ca",
            "neither a CA",
        ),
        ("truststore/ca/trust-store-with-invalid-certs/invalid", "ca", "not a certificate file"),
        ("truststore/tsa/test-nonCA/wabbit-networks.io.crt", "tsa", "is not a CA certificate"),
        ("truststore/tsa/test-nonSelfIssued/nonSelfIssued.crt", "tsa", "its issuer .* is not its subject"),
    ],
)
def test_notation_go_stores_that_notation_refuses_are_refused(
    data_dir: Path, path: str, kind: str, reason: str
) -> None:
    with pytest.raises(InputError, match=reason):
        load_certificates((data_dir / "notation-go" / path).read_bytes(), location=path, store=kind)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("path", "kind", "count"),
    [
        ("truststore/ca/valid-trust-store-2/GlobalSign.der", "ca", 1),
        ("truststore/ca/valid-trust-store-2/GlobalSignRootCA.crt", "ca", 1),
        ("truststore/ca/valid-trust-store-self-signed/openssl-minimum-self-signed.pem", "ca", 1),
        ("tsa-globalsignRoot.cer", "tsa", 1),
        ("der.der", "ca", 1),
        ("multi-der.der", "ca", 2),
    ],
)
def test_notation_go_stores_that_notation_loads_are_loaded(
    data_dir: Path, path: str, kind: str, count: int
) -> None:
    found = load_certificates((data_dir / "notation-go" / path).read_bytes(), location=path, store=kind)  # type: ignore[arg-type]
    assert len(found) == count


def test_a_self_signed_non_ca_certificate_may_anchor_a_ca_store_but_not_a_tsa_store() -> None:
    self_signed = issue(subject("Self Signer"))
    pem = self_signed.pem()
    assert load_certificates(pem, location="x", store="ca")
    with pytest.raises(InputError, match="is not a CA certificate"):
        load_certificates(pem, location="x", store="tsa")
    with pytest.raises(InputError, match="is not a CA certificate"):
        NotationTrust(
            stores={"ca": (self_signed.certificate,), "tsa": (self_signed.certificate,)},
            identities=(TrustedIdentity.parse("*"),),
        )


def test_garbage_after_der_certificates_is_refused() -> None:
    pki = make_pki()
    der = pki.root.certificate.public_bytes(Encoding.DER)
    assert len(load_certificates(der + der, location="x")) == 2
    for tail in (b"\x00", b"\x30\x05\x01", der[:-1]):
        with pytest.raises(InputError, match="not a certificate file"):
            load_certificates(der + tail, location="x")

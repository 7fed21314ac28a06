"""Notation's own configuration directory (issue 25): trustpolicy.json / trustpolicy.oci.json and
truststore/x509/, read as notation verify reads them, statements chosen by registry scope."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.notary_pki import NOW, Pki, make_pki
from verifier.base._errors import InputError, VerificationError
from verifier.signatures.notation import (
    JWS_MEDIA_TYPE,
    NotationPolicy,
    NotationSignature,
    TargetArtifact,
    load_notation_config,
    sign_notation,
    verify_notation,
)

DIGEST = "sha256:" + "ab" * 32
TARGET = TargetArtifact("application/vnd.oci.image.manifest.v1+json", DIGEST, 42)
IDENTITY = "x509.subject: C=US, ST=WA, O=Example, CN=Release Signer"


def _statement(name: str, scopes: list[str], **changes: Any) -> dict[str, Any]:
    statement = {
        "name": name,
        "registryScopes": scopes,
        "signatureVerification": {"level": "strict"},
        "trustStores": ["ca:release"],
        "trustedIdentities": [IDENTITY],
    }
    return statement | changes


def _config(root: Path, pki: Pki, *statements: dict[str, Any], name: str = "trustpolicy.json") -> Path:
    store = root / "truststore" / "x509" / "ca" / "release"
    store.mkdir(parents=True, exist_ok=True)
    (store / "root.crt").write_bytes(pki.root.pem())
    (root / name).write_text(json.dumps({"version": "1.0", "trustPolicies": list(statements)}))
    return root


def _load(root: Path) -> NotationPolicy:
    return load_notation_config(root, read=lambda path: path.read_bytes())


def _verify(policy: NotationPolicy, pki: Pki, repository: str) -> tuple[str, ...]:
    descriptor = {"mediaType": TARGET.media_type, "digest": DIGEST, "size": TARGET.size}
    signature = NotationSignature(sign_notation(descriptor, pki.leaf.signing_key, pki.chain), JWS_MEDIA_TYPE)
    return verify_notation(signature, policy, descriptor=TARGET, repository=repository, now=NOW).logged


def test_the_statement_of_the_repository_applies_before_the_wildcard_one(tmp_path: Path) -> None:
    pki = make_pki()
    policy = _load(
        _config(
            tmp_path,
            pki,
            _statement("prod", ["registry.example/prod/app"]),
            _statement("rest", ["*"], trustedIdentities=["x509.subject: C=US, ST=WA, O=Someone Else"]),
        )
    )
    assert _verify(policy, pki, "registry.example/prod/app") == ()
    with pytest.raises(VerificationError, match="matches none of the trusted identities"):
        _verify(policy, pki, "registry.example/other/app")  # the wildcard statement applies there


def test_no_applicable_statement_is_notations_error(tmp_path: Path) -> None:
    pki = make_pki()
    policy = _load(_config(tmp_path, pki, _statement("prod", ["registry.example/prod/app"])))
    with pytest.raises(VerificationError, match="has no applicable trust policy statement"):
        _verify(policy, pki, "registry.example/other/app")


def test_a_skip_statement_makes_its_signatures_count_for_nothing(tmp_path: Path) -> None:
    pki = make_pki()
    skip = {"name": "test", "registryScopes": ["*"], "signatureVerification": {"level": "skip"}}
    policy = _load(_config(tmp_path, pki, skip))
    with pytest.raises(VerificationError, match="set to skip signature verification"):
        _verify(policy, pki, "registry.example/prod/app")


def test_the_oci_document_wins_over_the_old_name(tmp_path: Path) -> None:
    pki = make_pki()
    _config(
        tmp_path, pki, _statement("old", ["*"], trustedIdentities=["x509.subject: C=US, ST=WA, O=Nobody"])
    )
    _config(tmp_path, pki, _statement("oci", ["*"]), name="trustpolicy.oci.json")
    policy = _load(tmp_path)
    assert policy.source.endswith("trustpolicy.oci.json")
    assert _verify(policy, pki, "registry.example/a/b") == ()


def test_a_plugin_identity_beside_an_x509_one_is_ignored(tmp_path: Path) -> None:
    pki = make_pki()
    statement = _statement("s", ["*"], trustedIdentities=[IDENTITY, "nonX509Prefix:my-custom-identity"])
    assert _verify(_load(_config(tmp_path, pki, statement)), pki, "registry.example/a/b") == ()
    alone = _statement("s", ["*"], trustedIdentities=["nonX509Prefix:my-custom-identity"])
    with pytest.raises(InputError, match="needs trustedIdentities"):
        _load(_config(tmp_path / "alone", pki, alone))


def _doc(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"version": "1.0", "trustPolicies": list(statements)}


_SKIP_WITH_STORES = {
    "name": "s",
    "registryScopes": ["*"],
    "signatureVerification": {"level": "skip"},
    "trustStores": ["ca:release"],
}
_OVERRIDE = {"level": "strict", "override": {"expiry": "log"}}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"version": "2.0", "trustPolicies": [_statement("a", ["*"])]}, "unsupported version '2.0'"),
        ({"trustPolicies": [_statement("a", ["*"])]}, "empty version"),
        (_doc(), "zero trust policy statements"),
        (_doc(_statement("a", ["*"]), _statement("a", ["r.io/x"])), "same name"),
        (_doc(_statement("a", ["r.io/x"]), _statement("b", ["r.io/x"])), "present in multiple"),
        (_doc(_statement("a", ["*", "r.io/x"])), "cannot be used in conjunction"),
        (_doc(_statement("a", [])), "zero registry scopes"),
        (_doc(_statement("a", ["*"], trustStores=["ca"])), "malformed trust store"),
        (_doc(_statement("a", ["*"], trustStores=["x509:r"])), "unsupported trust store type"),
        (_doc(_statement("a", ["*"], trustStores=["ca:missing"])), "does not exist"),
        (_doc(_statement("a", ["*"], trustedIdentities=[])), "both must be specified"),
        (_doc(_SKIP_WITH_STORES), "remove them"),
        (_doc(_statement("a", ["*"], signatureVerification=_OVERRIDE)), "overrides"),
        (_doc(_statement("a", ["*"], signatureVerification={"level": "lenient"})), "level 'lenient'"),
    ],
)
def test_documents_notation_refuses_are_refused(
    tmp_path: Path, document: dict[str, Any], message: str
) -> None:
    _config(tmp_path, make_pki())
    (tmp_path / "trustpolicy.json").write_text(json.dumps(document))
    with pytest.raises(InputError, match=message):
        _load(tmp_path)


def test_store_layout_is_notations(tmp_path: Path) -> None:
    pki = make_pki()
    _config(tmp_path, pki, _statement("a", ["*"]))
    store = tmp_path / "truststore" / "x509" / "ca" / "release"
    (store / "sub").mkdir()
    with pytest.raises(InputError, match="not a regular file"):
        _load(tmp_path)
    (store / "sub").rmdir()
    (store / "leaf.crt").write_bytes(pki.leaf.pem())
    with pytest.raises(InputError, match="neither a CA certificate"):
        _load(tmp_path)
    (store / "leaf.crt").unlink()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "truststore" / "x509" / "ca" / "linked").symlink_to(tmp_path / "elsewhere")
    linked = _statement("a", ["*"], trustStores=["ca:linked"])
    (tmp_path / "trustpolicy.json").write_text(json.dumps({"version": "1.0", "trustPolicies": [linked]}))
    with pytest.raises(InputError, match="symlinks are not supported"):
        _load(tmp_path)


def test_a_missing_trust_policy_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"trustpolicy\.oci\.json or trustpolicy\.json"):
        _load(tmp_path)

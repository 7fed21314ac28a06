"""verifier.crypto._intoto: in-toto Statement v1 parsing, building and subject matching."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from verifier.base._errors import InputError, VerificationError
from verifier.crypto import _dsse as dsse
from verifier.crypto import _intoto as intoto
from verifier.crypto import _keys as keys
from verifier.crypto._dsse import Envelope
from verifier.crypto._intoto import PAYLOAD_TYPE, ResourceDescriptor, Statement

DIGEST = "a" * 64


def _envelope(document: object, payload_type: str = PAYLOAD_TYPE) -> Envelope:
    return Envelope(payload_type=payload_type, payload=json.dumps(document).encode(), signatures=())


def _statement(**changes: object) -> dict[str, object]:
    document: dict[str, object] = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "engine.plan", "digest": {"sha256": DIGEST}}],
        "predicateType": "https://trtguard.dev/attestations/engine-build/v1",
        "predicate": {"audit_id": "A-1"},
    }
    document.update(changes)
    return document


def test_statement_for_file_binds_name_and_sha256(tmp_path: Path) -> None:
    engine = tmp_path / "model.plan"
    engine.write_bytes(b"\x00engine bytes" * 1000)
    statement = intoto.statement_for_file(engine, "https://example.com/p/v1", {"k": "v"})
    assert statement.subject == [
        ResourceDescriptor(
            name="model.plan", digest={"sha256": hashlib.sha256(engine.read_bytes()).hexdigest()}
        )
    ]
    named = intoto.statement_for_file(engine, "https://example.com/p/v1", {}, name="resnet50.plan")
    assert named.subject[0].name == "resnet50.plan"


def test_statement_for_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read subject file"):
        intoto.statement_for_file(tmp_path / "absent", "https://example.com/p/v1", {})


def test_to_json_uses_spec_field_names_and_round_trips() -> None:
    statement = Statement.model_validate(_statement())
    document = json.loads(statement.to_json())
    assert list(document) == ["_type", "subject", "predicateType", "predicate"]
    assert document["subject"] == [{"name": "engine.plan", "digest": {"sha256": DIGEST}}]
    assert Statement.model_validate_json(statement.to_json()) == statement


def test_sign_statement_and_read_it_back() -> None:
    key = keys.generate_private_key()
    statement = Statement.model_validate(_statement())
    envelope = intoto.sign_statement(statement, key)
    assert envelope.payload_type == PAYLOAD_TYPE
    assert dsse.verify_envelope(envelope, {"k": key.public_key()}) == ("k",)
    assert intoto.statement_from_envelope(envelope) == statement


def test_wrong_payload_type_is_a_verification_error() -> None:
    with pytest.raises(VerificationError, match="payload type is 'text/plain'") as raised:
        intoto.statement_from_envelope(_envelope(_statement(), "text/plain"), location="a.json")
    assert raised.value.location == "a.json"


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (_statement(subject=[]), "subject"),
        (_statement(subject=[{"name": "x", "digest": {}}]), "subject\\[0\\] has no digest"),
        (_statement(subject=[{"name": "x", "digest": {"sha256": "xyz"}}]), "sha256 must be 64 hexadecimal"),
        (_statement(_type="https://in-toto.io/Statement/v2"), "unsupported statement type"),
        ({k: v for k, v in _statement().items() if k != "predicateType"}, "predicateType"),
        ([1, 2], "statement"),
    ],
)
def test_invalid_statements_name_the_field(document: Any, message: str) -> None:
    with pytest.raises(InputError, match=message):
        intoto.statement_from_envelope(_envelope(document))


def test_payload_that_is_not_json() -> None:
    with pytest.raises(InputError, match="not JSON"):
        intoto.statement_from_envelope(Envelope(PAYLOAD_TYPE, b"\xff{", ()))


def test_statement_v01_is_read_and_unknown_fields_are_ignored() -> None:
    document = _statement(_type="https://in-toto.io/Statement/v0.1", extra_field={"x": 1})
    statement = intoto.statement_from_envelope(_envelope(document))
    assert statement.predicate_type == "https://trtguard.dev/attestations/engine-build/v1"


def test_upper_case_hex_digests_are_normalised() -> None:
    commit = "C0FFEE" * 6 + "ABCD"
    digest = {"sha256": DIGEST.upper(), "gitCommit": commit, "somecoolhash": "ABC"}
    statement = intoto.statement_from_envelope(
        _envelope(_statement(subject=[{"name": "x", "digest": digest}]))
    )
    assert statement.subject[0].digest == {
        "sha256": DIGEST,
        "gitCommit": commit.lower(),
        "somecoolhash": "ABC",
    }
    assert statement.subject_digests() == frozenset({f"sha256:{DIGEST}"})


@pytest.mark.parametrize(
    ("algorithm", "value"),
    [
        ("gitCommit", "a" * 39),  # issue 25: a 39-character commit was accepted
        ("gitCommit", "a" * 41),
        ("gitTree", "a" * 63),
        ("gitBlob", "g" * 40),
        ("sha512_256", "a" * 128),
        ("sha3_384", "a" * 64),
        ("md5", "a" * 40),
        ("ripemd160", "a" * 64),
        ("dirHash1", "a" * 40),
        ("blake2b", "abc"),  # any size, but whole bytes of hex
        ("shake256", ""),
    ],
)
def test_digests_of_the_wrong_length_for_their_algorithm_are_refused(algorithm: str, value: str) -> None:
    # in-toto digest_set.md v1.1: the named algorithms are hex of their size (git: SHA-1 or SHA-256).
    document = _statement(subject=[{"name": "x", "digest": {"sha256": DIGEST, algorithm: value}}])
    with pytest.raises(InputError, match=f"digest {algorithm} must be"):
        intoto.statement_from_envelope(_envelope(document))


@pytest.mark.parametrize(
    ("algorithm", "value"),
    [("gitCommit", "a" * 40), ("gitCommit", "a" * 64), ("gitTag", "b" * 64), ("blake2b", "ab" * 64)],
)
def test_digests_of_every_size_their_algorithm_allows_are_read(algorithm: str, value: str) -> None:
    document = _statement(subject=[{"name": "x", "digest": {"sha256": DIGEST, algorithm: value}}])
    assert intoto.statement_from_envelope(_envelope(document)).subject[0].digest[algorithm] == value


def test_require_subject_finds_the_matching_subject() -> None:
    other = "b" * 64
    document = _statement(
        subject=[{"name": "a", "digest": {"sha256": DIGEST}}, {"name": "b", "digest": {"sha256": other}}]
    )
    statement = Statement.model_validate(document)
    assert statement.require_subject(f"sha256:{other}").name == "b"
    assert statement.require_subject(DIGEST).name == "a"
    with pytest.raises(
        VerificationError, match=f"covers sha256:{DIGEST}, sha256:{other}, not sha256:{'c' * 64}"
    ):
        statement.require_subject("c" * 64)
    with pytest.raises(InputError, match="not a SHA-256 digest"):
        statement.require_subject("md5:abc")


def test_real_slsa_statement_from_the_conformance_bundle(shared_fixtures: Path) -> None:
    folder = shared_fixtures / "cosign" / "bundles" / "conformance"
    bundle = json.loads((folder / "happy-path-intoto-in-dsse-v3" / "bundle.sigstore.json").read_bytes())
    envelope = Envelope.from_dict(bundle["dsseEnvelope"])
    statement = intoto.statement_from_envelope(envelope)
    assert statement.predicate_type == "https://slsa.dev/provenance/v1"
    artifact = hashlib.sha256((folder / "a.txt").read_bytes()).hexdigest()
    assert statement.require_subject(artifact).name == "a.txt"
    assert base64.b64decode(bundle["dsseEnvelope"]["payload"]) == envelope.payload

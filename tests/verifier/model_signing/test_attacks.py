"""What a signature may not make trtguard accept: shard digests as whole files, a resource hashed with
another algorithm than the manifest's, names spelt otherwise than upstream reads them; and the format as
the verification room sees it (threshold over signing keys across copies, each signature parsed once)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest import mock

import model_signing
import pytest

from tests.verifier.model_signing.conftest import resign, write_ca, write_key, write_leaf
from tests.verifier.model_signing.test_interop import sign_certificate, sign_key, upstream_key
from verifier import model_signing as ms
from verifier.base import MAX_DOCUMENT_BYTES, InputError, VerificationError
from verifier.crypto._dsse import Envelope
from verifier.crypto._intoto import statement_from_envelope
from verifier.evidence import Attestation
from verifier.model_signing import _signature as signature_module
from verifier.verification import StatementRefused, StatementTrust, verify_model_statement, verify_statement


def _key(public: Path) -> dict[str, ms.ModelSigningTrust]:
    return {"publisher": ms.ModelSigningKey.from_pem(public.read_bytes())}


def test_a_shard_manifest_is_refused(model: Path, tmp_path: Path) -> None:
    write_key(tmp_path / "publisher.pem")
    signature = tmp_path / "model.sig"
    hashing = model_signing.hashing.Config().use_shard_serialization(shard_size=4)
    model_signing.signing.Config().use_elliptic_key_signer(
        private_key=tmp_path / "publisher.pem"
    ).set_hashing_config(hashing).sign(model, signature)
    # model_signing 1.1.1 cannot verify its own shard signatures either (it reads shard_size back as a
    # float); trtguard refuses them by design: a shard's digest is no whole file's.
    with pytest.raises(TypeError):
        model_signing.verifying.Config().use_elliptic_key_verifier(
            public_key=tmp_path / "publisher.pub"
        ).verify(model, signature)
    with pytest.raises(InputError, match="serialization method 'shards' is not supported"):
        ms.verify_model(model, signature, _key(tmp_path / "publisher.pub"))


def test_a_resource_of_another_algorithm_than_the_manifest_is_refused(model: Path, tmp_path: Path) -> None:
    key = write_key(tmp_path / "publisher.pem")
    signature = tmp_path / "model.sig"
    sign_key(model, signature, tmp_path / "publisher.pem")

    def blake3_resource(statement: dict[str, Any]) -> None:
        statement["predicate"]["resources"][0]["algorithm"] = "blake3"

    resign(signature, key, blake3_resource)
    assert upstream_key(model, signature, tmp_path / "publisher.pub") is False
    with pytest.raises(InputError, match="hashed with 'blake3', not the manifest's sha256"):
        ms.verify_model(model, signature, _key(tmp_path / "publisher.pub"))


def test_a_blake3_manifest_is_refused(model: Path, tmp_path: Path) -> None:
    write_key(tmp_path / "publisher.pem")
    signature = tmp_path / "model.sig"
    hashing = model_signing.hashing.Config().use_file_serialization(hashing_algorithm="blake3")
    model_signing.signing.Config().use_elliptic_key_signer(
        private_key=tmp_path / "publisher.pem"
    ).set_hashing_config(hashing).sign(model, signature)
    with pytest.raises(InputError, match="hash type 'blake3' is not supported"):
        ms.verify_model(model, signature, _key(tmp_path / "publisher.pub"))


def test_names_are_read_as_upstream_reads_them(model: Path, tmp_path: Path) -> None:
    """``./sub//config.json`` is ``sub/config.json`` to upstream: no false reject."""
    key = write_key(tmp_path / "publisher.pem")
    signature = tmp_path / "model.sig"
    sign_key(model, signature, tmp_path / "publisher.pem")

    def respell(statement: dict[str, Any]) -> None:
        for resource in statement["predicate"]["resources"]:
            if resource["name"] == "sub/config.json":
                resource["name"] = "./sub//config.json"

    resign(signature, key, respell)
    assert upstream_key(model, signature, tmp_path / "publisher.pub") is True
    assert ms.verify_model(model, signature, _key(tmp_path / "publisher.pub")).distinct_keys == 1


def test_an_inconsistent_root_digest_is_refused(model: Path, tmp_path: Path) -> None:
    write_key(tmp_path / "publisher.pem")
    signature = tmp_path / "model.sig"
    sign_key(model, signature, tmp_path / "publisher.pem")
    text = signature.read_text()
    raw = ms.read_signature(text.encode(), "model.sig")
    assert raw.covers(raw.resources["weights.onnx"]) == ("weights.onnx",)
    with pytest.raises(InputError, match="not JSON"):
        ms.read_signature(b"{", "model.sig")


def _copy(signature: Path) -> Attestation:
    """A signature file as the attestation folder hands it over: its envelope and the bundle whole."""
    raw = signature.read_bytes()
    envelope = Envelope.from_dict(json.loads(raw)["dsseEnvelope"], location=str(signature))
    statement = statement_from_envelope(envelope, location=str(signature))
    return Attestation(
        envelope, statement.predicate_type, statement.subject_digests(), str(signature), bundle=raw
    )


def _signer(trust: ms.ModelSigningTrust) -> Any:
    return mock.Mock(spec=["model_signing"], model_signing=trust)


def test_a_threshold_counts_signing_keys_across_copies(model: Path, tmp_path: Path) -> None:
    """Two copies of one statement, signed by one leaf key certified by two CAs: one signer, not two; by
    two keys: two."""
    key = write_key(tmp_path / "publisher.pem")
    ca1, ca2 = write_ca(tmp_path / "ca1.pem", "CA one"), write_ca(tmp_path / "ca2.pem", "CA two")
    write_leaf(tmp_path / "leaf1.pem", key, ca1)
    write_leaf(tmp_path / "leaf2.pem", key, ca2)
    first, second = tmp_path / "one.sig", tmp_path / "two.sig"
    sign_certificate(model, first, tmp_path / "publisher.pem", tmp_path / "leaf1.pem", tmp_path / "ca1.pem")
    sign_certificate(model, second, tmp_path / "publisher.pem", tmp_path / "leaf2.pem", tmp_path / "ca2.pem")
    copies = [_copy(first), _copy(second)]
    assert copies[0].envelope.payload == copies[1].envelope.payload  # one statement
    signers = {
        ca: _signer(ms.ModelSigningCertificates.from_pem((tmp_path / f"{ca}.pem").read_bytes(), ca))
        for ca in ("ca1", "ca2")
    }
    one = verify_statement(copies, StatementTrust.of(signers, formats=["model-signing"]))
    assert one.distinct_keys == 1
    with pytest.raises(StatementRefused, match="signed by 1 of the 2 required distinct keys"):
        verify_statement(copies, StatementTrust.of(signers, 2, formats=["model-signing"]))
    write_key(tmp_path / "other.pem")
    third = tmp_path / "three.sig"
    sign_key(model, third, tmp_path / "other.pem")
    signers["other"] = _signer(ms.ModelSigningKey.from_pem((tmp_path / "other.pub").read_bytes()))
    two = verify_statement([*copies, _copy(third)], StatementTrust.of(signers, 2, formats=["model-signing"]))
    assert two.distinct_keys == 2


def test_each_signature_is_parsed_once_whatever_the_number_of_signers(model: Path, tmp_path: Path) -> None:
    write_key(tmp_path / "publisher.pem")
    signature = tmp_path / "model.sig"
    sign_key(model, signature, tmp_path / "publisher.pem")
    signers = {}
    for index in range(5):
        write_key(tmp_path / f"k{index}.pem")
        signers[f"k{index}"] = _signer(ms.ModelSigningKey.from_pem((tmp_path / f"k{index}.pub").read_bytes()))
    signers["publisher"] = _signer(_key(tmp_path / "publisher.pub")["publisher"])
    with mock.patch.object(signature_module, "read_signature", wraps=signature_module.read_signature) as read:
        verify_statement([_copy(signature)], StatementTrust.of(signers, formats=["model-signing"]))
    assert read.call_count == 1


def test_a_key_signature_counts_for_no_other_kind_of_signer(model: Path, tmp_path: Path) -> None:
    write_key(tmp_path / "publisher.pem")
    signature = tmp_path / "model.sig"
    sign_key(model, signature, tmp_path / "publisher.pem")
    write_key(tmp_path / "other.pem")
    signers = {"other": _signer(_key(tmp_path / "other.pub")["publisher"])}
    with pytest.raises(StatementRefused, match="another key"):
        verify_statement([_copy(signature)], StatementTrust.of(signers, formats=["model-signing"]))
    with pytest.raises(VerificationError):
        ms.verify_model(model, signature, _key(tmp_path / "other.pub"))


def test_a_signature_is_parsed_once_per_evaluation(model: Path, tmp_path: Path) -> None:
    """The room's check and the model statement's file list read one parse: the bundle and its statement
    are decoded once, however many readers ask."""
    write_key(tmp_path / "publisher.pem")
    signature = tmp_path / "model.sig"
    sign_key(model, signature, tmp_path / "publisher.pem")
    signers = {"publisher": _signer(_key(tmp_path / "publisher.pub")["publisher"])}
    trust = StatementTrust.of(signers, formats=["model-signing"])
    with mock.patch.object(signature_module, "json", wraps=json) as decoder:
        first = verify_model_statement([_copy(signature)], trust)
        second = verify_model_statement([_copy(signature)], trust)
    assert first.files == second.files
    assert decoder.loads.call_count == 2  # the bundle, and the statement in it


def test_a_signature_larger_than_a_document_is_refused_unread() -> None:
    with pytest.raises(InputError, match="larger than 16 MiB"):
        ms.read_signature(b" " * (MAX_DOCUMENT_BYTES + 1), "model.sig")

"""Hostile evidence fails only itself (issue 24 item 11): the DSSE envelope and in-toto statement reader, the
OpenPGP signature and keyring reader (pysequoia) and the SBOM and scan readers (CycloneDX, SPDX, cosign's
vulnerability predicate), fed valid documents with mutated fields, types and sizes and mutated or random
bytes. The only outcomes allowed: read, or refused with a ``VerificationError`` or ``InputError`` (no other
exception, no traceback), within generous CPU and memory bounds (tests/support/hostile.py).

Seeds are real material: the DSSE specification's test vector, SBOMs and scans made by real tools
(tests/data/6xx), signatures and keyrings made by Debian's gpg.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.availability import unavailable
from tests.support.gpg import GnuPG
from tests.support.hostile import mutated, mutated_bytes, raw_nesting, read_or_refuse
from verifier.base._deadline import Deadline
from verifier.base._references import ImageReference
from verifier.crypto import _dsse as dsse
from verifier.crypto import _intoto as intoto
from verifier.crypto import _keys as keys
from verifier.evidence_folder import LocalEvidence
from verifier.scans import read_scan
from verifier.signatures._openpgp import OpenPGPKey, read_keyring, read_signatures, verify_detached

DATA = Path(__file__).resolve().parents[1] / "data"
FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)

#: (predicate type, file): SBOMs and scans written by real tools (tests/data/README.md, SOURCES there).
SCANS = [
    ("https://cyclonedx.org/bom", "603-pip-audit-pyyaml-5.3.cdx.json"),
    ("https://cyclonedx.org/bom", "607-cyclonedx-py-requirements.cdx.json"),
    ("https://cyclonedx.org/bom", "609-cyclonedx-vex-pyyaml-ratings.cdx.json"),
    ("https://spdx.dev/Document", "608-spdx-2.3-spec-example.spdx.json"),
    ("https://cosign.sigstore.dev/attestation/vuln/v1", "610-cosign-vuln-trivy-spec-example.json"),
]
_SCANS = {name: (kind, json.loads((DATA / name).read_text())) for kind, name in SCANS}
_KEY = keys.generate_private_key()
_VECTOR = json.loads((DATA / "dsse-spec" / "protocol-test-vector.json").read_text())["envelope"]


def _statement(predicate_type: str, predicate: Any) -> dict[str, Any]:
    return {
        "_type": intoto.STATEMENT_TYPE,
        "subject": [{"name": "image", "digest": {"sha256": "a" * 64}}],
        "predicateType": predicate_type,
        "predicate": predicate,
    }


def _envelope(document: Any) -> bytes:
    payload = json.dumps(document).encode()
    return dsse.sign_envelope(intoto.PAYLOAD_TYPE, payload, _KEY).to_json()


def _read_envelope(raw: bytes) -> intoto.Statement:
    """What an attestation folder or registry does with one DSSE attestation's bytes."""
    envelope = dsse.Envelope.from_json(raw, location="hostile.dsse.json")
    dsse.verify_envelope(envelope, {"trusted": _KEY.public_key()})
    return intoto.statement_from_envelope(envelope, location="hostile.dsse.json")


#: One signed envelope, made once: ECDSA signatures differ in length from one signing to the next, and the
#: strategies must draw the same way each time hypothesis replays an example.
_SIGNED = _envelope(_statement("https://example.com/p", {"a": 1}))


@FUZZ
@given(st.data())
def test_mutated_dsse_envelopes_are_read_or_refused(data: st.DataObject) -> None:
    valid = json.loads(_SIGNED)
    raw = json.dumps(data.draw(mutated(valid))).encode()
    read_or_refuse(lambda: _read_envelope(raw), size=len(raw))
    vector = data.draw(mutated(_VECTOR))
    read_or_refuse(lambda: dsse.Envelope.from_dict(vector), size=len(json.dumps(vector)))


@FUZZ
@given(st.data())
def test_mutated_statements_in_signed_envelopes_are_read_or_refused(data: st.DataObject) -> None:
    raw = _envelope(data.draw(mutated(_statement("https://example.com/p", {"a": [1, 2]}))))
    read_or_refuse(lambda: _read_envelope(raw), size=len(raw))


@FUZZ
@given(st.data())
def test_mutated_envelope_bytes_are_read_or_refused(data: st.DataObject) -> None:
    raw = data.draw(st.one_of(mutated_bytes(_SIGNED), st.binary()))
    read_or_refuse(lambda: _read_envelope(raw), size=len(raw))


@pytest.mark.parametrize("depth", [100, 1000, 100_000])
def test_deeply_nested_envelopes_and_statements_are_refused(depth: int) -> None:
    raw = raw_nesting(depth)
    read_or_refuse(lambda: _read_envelope(raw), size=len(raw))
    envelope = {
        "payloadType": intoto.PAYLOAD_TYPE,
        "payload": base64.b64encode(raw).decode(),
        "signatures": [],
    }
    read_or_refuse(lambda: intoto.statement_from_envelope(dsse.Envelope.from_dict(envelope)), size=len(raw))


@FUZZ
@given(st.data(), st.sampled_from(sorted(_SCANS)))
def test_mutated_sboms_and_scans_are_read_or_refused(data: st.DataObject, name: str) -> None:
    kind, valid = _SCANS[name]
    document = data.draw(mutated(valid, max_mutations=6))
    raw = _envelope(_statement(kind, document))
    read_or_refuse(
        lambda: read_scan(kind, document, name) if isinstance(document, dict) else None, size=len(raw)
    )
    # And through the whole path an attestation takes: a signed statement around it.
    read_or_refuse(lambda: read_scan(kind, _read_envelope(raw).predicate, name), size=len(raw))


@pytest.fixture(scope="module")
def gpg_material(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    if shutil.which("gpg") is None:
        unavailable("the gpg binary is not installed (Debian package gpg)")
    home = tmp_path_factory.mktemp("hostile-gnupg")
    gpg = GnuPG(home)
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    ed = gpg.generate("ed <ed@example.com>", "ed25519", at=t0)
    rsa = gpg.generate("rsa <rsa@example.com>", "rsa2048", at=t0, usage="cert")
    gpg.add_subkey(rsa, "nistp256/ecdsa", at=t0)
    data = b'{"_type": "https://in-toto.io/Statement/v1"}\n'
    return {
        "data": data,
        "binary": gpg.sign(data, ed, at=t0 + timedelta(hours=1), armor=False),
        "armored": gpg.sign(data, ed, at=t0 + timedelta(hours=1)),
        "keyring": gpg.export(ed, rsa, armor=False),
        "armored-keyring": gpg.export(ed, rsa),
    }


@FUZZ
@given(st.data())
def test_mutated_openpgp_signatures_are_read_or_refused(
    gpg_material: dict[str, bytes], data: st.DataObject
) -> None:
    keyring = read_keyring(gpg_material["keyring"])
    seed = data.draw(st.sampled_from(["binary", "armored"]))
    signature = data.draw(st.one_of(mutated_bytes(gpg_material[seed]), st.binary(max_size=512)))
    read_or_refuse(lambda: read_signatures(signature), measure_memory=False)
    read_or_refuse(lambda: verify_detached(gpg_material["data"], signature, keyring), measure_memory=False)


@FUZZ
@given(st.data())
def test_mutated_openpgp_keyrings_are_read_or_refused(
    gpg_material: dict[str, bytes], data: st.DataObject
) -> None:
    seed = data.draw(st.sampled_from(["keyring", "armored-keyring"]))
    keyring = data.draw(st.one_of(mutated_bytes(gpg_material[seed]), st.binary(max_size=512)))
    found = read_or_refuse(lambda: read_keyring(keyring), measure_memory=False)
    read_or_refuse(lambda: OpenPGPKey.from_armored(keyring), measure_memory=False)
    if found:
        read_or_refuse(
            lambda: verify_detached(gpg_material["data"], gpg_material["binary"], found), measure_memory=False
        )
        for key in found.values():
            key.state()


def test_a_signature_packet_claiming_gigabytes_is_refused_at_once(gpg_material: dict[str, bytes]) -> None:
    # A new-format packet header with a five-octet length of 4 GiB, then nothing.
    header = bytes([0xC2, 0xFF]) + (2**32 - 1).to_bytes(4, "big")
    assert (
        read_or_refuse(lambda: read_signatures(header + gpg_material["binary"]), measure_memory=False) is None
    )
    armored = (
        b"-----BEGIN PGP SIGNATURE-----\n\n" + base64.encodebytes(header) + b"-----END PGP SIGNATURE-----\n"
    )
    assert read_or_refuse(lambda: read_signatures(armored), measure_memory=False) is None


_VALID_FOLDER_FILE = _envelope(_statement("https://example.com/p", {"ok": True}))


@FUZZ
@given(
    st.data(),
    st.sampled_from(
        [
            ("hostile.dsse.json", _VALID_FOLDER_FILE),
            ("hostile.sigstore.json", json.dumps({"dsseEnvelope": json.loads(_VALID_FOLDER_FILE)}).encode()),
            (
                "hostile.cosign.json",
                b'{"payload": "e30=", "signature": "AA==", "media_type": "m",'
                b' "certificate": null, "chain": null, "rekor_bundle": null}',
            ),
            (
                "hostile.oci-manifest.json",
                b'{"schemaVersion": 2, "mediaType": '
                b'"application/vnd.oci.image.manifest.v1+json", "config": {}, "layers": []}',
            ),
            ("hostile.jsonl", _VALID_FOLDER_FILE + b"\n" + _VALID_FOLDER_FILE),
        ]
    ),
)
def test_a_hostile_file_in_an_attestation_folder_fails_only_itself(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, seed: tuple[str, bytes]
) -> None:
    """The folder keeps the valid attestation beside any hostile file: the file is read or left out."""
    folder = tmp_path_factory.mktemp("folder")
    (folder / "valid.dsse.json").write_bytes(_VALID_FOLDER_FILE)
    name, valid = seed
    raw = data.draw(
        st.one_of(
            mutated_bytes(valid),
            st.builds(lambda d: json.dumps(d).encode(), mutated(json.loads(valid.split(b"\n")[0]))),
        )
    )
    (folder / name).write_bytes(raw)
    evidence = read_or_refuse(lambda: LocalEvidence(folder), size=len(raw) + len(_VALID_FOLDER_FILE))
    assert evidence is not None, "a hostile file refused the whole folder"
    ref = ImageReference.parse("quay.io/a/b@sha256:" + "a" * 64)
    found = asyncio.run(evidence.attestations(ref, Deadline.never())).attestations
    assert str(folder / "valid.dsse.json") in {a.origin for a in found}

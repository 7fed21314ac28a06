"""Adding a statement signature format touches one folder plus one registration line (issue 26, done when).

The front door's docstring ("Adding a statement signature format") claims it; this proves it with a format
made for the test: Ed25519 signatures over a statement's exact bytes, written in a fresh package folder
under ``tmp_path`` (its ``__init__.py`` exports one object), registered with one line added to a copy of
``verifier/verification/_table.py`` (and the import that line needs), and patched in where the room reads
the table, one place. With nothing else changed it counts toward thresholds by key beside DSSE, across
copies; binds the subject; refuses a tampered copy; gives ``valid_until``; a signed build manifest loads
with :func:`verify_manifest`; an evidence folder carries its signature files (``X.json.ed25519`` beside a
statement ``X.json``); and the policy evaluator admits and denies through it.

What it does not cover is the policy language's side: a TrustedKeys document has no field for an Ed25519
key and :class:`policies.signers.Signer` no attribute, so the evaluator's signer is built here (a
``Signer`` with the attribute the format reads), as a real format would add them
(``policies/_trusted_keys.py``, ``policies/signers.py``).
"""

from __future__ import annotations

import asyncio
import base64
import difflib
import importlib
import importlib.util
import json
import textwrap
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from policies.evaluator import PolicyEvaluator
from policies.loader import load_policy_set
from policies.signers import Signer
from tests.policies.conftest import Material, manifest_data, pod
from tests.policies.evaluation import NOW, evaluate, rules
from verifier.base import Deadline, ImageReference
from verifier.crypto._dsse import Envelope, sign_envelope
from verifier.crypto._intoto import PAYLOAD_TYPE
from verifier.crypto._keys import PublicKey, generate_private_key
from verifier.evidence import Attestation
from verifier.evidence_folder import LocalEvidence
from verifier.manifest import EngineBuildManifest, manifest_statement
from verifier.verification import (
    StatementRefused,
    StatementTrust,
    UnreadableEvidence,
    _table,
    verify_manifest,
    verify_statement,
)

#: The new format's folder: one front door exporting one object, importing nothing from the room.
FORMAT_PACKAGE = '''
"""Ed25519 signatures over a statement's exact bytes (a test-only statement signature format).

A signature file ``X.json.ed25519`` is JSON: ``expires`` (ISO 8601) and ``signature`` (base64 of Ed25519
over the statement's bytes, a NUL and ``expires``): it stops verifying at ``expires``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

KIND = "ed25519"


class _Ed25519:
    label = "Ed25519"

    def material(self, signer: Any) -> object | None:
        return getattr(signer, "ed25519", None)

    def identity(self, material: Any) -> str:
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        return "ed25519:" + material.public_bytes(Encoding.Raw, PublicFormat.Raw).hex()

    def carries(self, copy: Any) -> bool:
        return any(kind == KIND for kind, _ in copy.detached)

    def check(
        self, copy: Any, trusted: Mapping[str, Any], now: datetime | None
    ) -> tuple[list[tuple[str, datetime | None]], list[str]]:
        from cryptography.exceptions import InvalidSignature

        signed: list[tuple[str, datetime | None]] = []
        problems: list[str] = []
        for kind, data in copy.detached:
            if kind != KIND:
                continue
            try:
                document = json.loads(data)
                expires = datetime.fromisoformat(document["expires"])
                signature = base64.b64decode(document["signature"], validate=True)
            except (ValueError, KeyError, TypeError):
                problems.append(f"{copy.origin}: not an Ed25519 signature file")
                continue
            if expires <= (now or datetime.now(UTC)):
                problems.append(f"{copy.origin}: the Ed25519 signature expired at {expires.isoformat()}")
                continue
            signed_bytes = copy.envelope.payload + b"\\0" + document["expires"].encode()
            for name, key in trusted.items():
                try:
                    key.verify(signature, signed_bytes)
                except InvalidSignature:
                    problems.append(f"{name}: the Ed25519 signature does not verify")
                    continue
                signed.append((name, expires))
        return signed, problems


ED25519 = _Ed25519()
'''

#: The one line that registers it in ``FORMATS``, and the import that line needs.
REGISTRATION = "    ED25519,\n"
IMPORT = "from ed25519_statements import ED25519\n"

SUBJECT = "ab" * 32
EXPIRES = NOW + timedelta(days=30)


@dataclass(frozen=True, slots=True)
class Ed25519Signer(Signer):
    """A policy's signer that carries an Ed25519 key: the attribute the format reads (a real format adds it
    to :class:`policies.signers.Signer`, with its TrustedKeys field)."""

    ed25519: Ed25519PublicKey | None = None


def _register(root: Path) -> ModuleType:
    """The new format's folder under ``root``, and a copy of the table with the one line that registers it;
    returns the copy, loaded."""
    (root / "ed25519_statements").mkdir()
    (root / "ed25519_statements" / "__init__.py").write_text(FORMAT_PACKAGE.lstrip())
    table = Path(_table.__file__).read_text()
    lines = table.splitlines(keepends=True)
    tuple_end = lines.index(")\n", next(i for i, line in enumerate(lines) if line.startswith("FORMATS")))
    first_import = next(i for i, line in enumerate(lines) if line.startswith("from verifier"))
    copy = [*lines[:first_import], IMPORT, *lines[first_import:tuple_end], REGISTRATION, *lines[tuple_end:]]
    added = [line[2:] for line in difflib.ndiff(lines, copy) if line.startswith("+ ")]
    assert added == [IMPORT, REGISTRATION]  # nothing else: one registration line and its import
    path = root / "_table_with_ed25519.py"
    path.write_text("".join(copy))
    spec = importlib.util.spec_from_file_location("_table_with_ed25519", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def ed25519(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> object:
    """The new format, registered: the table is patched where the room reads it, and nowhere else."""
    monkeypatch.syspath_prepend(str(tmp_path))
    table = _register(tmp_path)
    labels = [f.label for f in table.FORMATS]
    assert labels == [*(f.label for f in _table.FORMATS), "Ed25519"]
    monkeypatch.setattr(_table, "FORMATS", table.FORMATS)
    return importlib.import_module("ed25519_statements").ED25519


def _sign(key: Ed25519PrivateKey, payload: bytes, expires: datetime = EXPIRES) -> bytes:
    """A signature file of the new format over ``payload``."""
    stamp = expires.isoformat()
    signature = key.sign(payload + b"\0" + stamp.encode())
    return json.dumps({"expires": stamp, "signature": base64.b64encode(signature).decode()}).encode()


def _statement(subject: str = SUBJECT) -> bytes:
    return json.dumps(
        {
            "_type": "https://in-toto.io/Statement/v1",
            "subject": [{"name": "engine", "digest": {"sha256": subject}}],
            "predicateType": "https://example.com/predicate/v1",
            "predicate": {"about": "a test"},
        }
    ).encode()


def _copy(payload: bytes, *signatures: bytes, dsse: Any = None) -> Attestation:
    """A copy of the statement ``payload``: DSSE-signed with the private key ``dsse``, or bare with the new
    format's signature files, as the folder reader gives them (:attr:`Attestation.detached`)."""
    if dsse is not None:
        envelope = sign_envelope(PAYLOAD_TYPE, payload, dsse)
    else:
        envelope = Envelope(PAYLOAD_TYPE, payload, ())
    subjects = frozenset({f"sha256:{SUBJECT}"})
    detached = tuple(("ed25519", data) for data in signatures)
    return Attestation(envelope, "https://example.com/predicate/v1", subjects, "here", detached=detached)


def _signer(
    ed25519: Ed25519PublicKey | None = None, public_key: PublicKey | None = None, ref: str = "s"
) -> Ed25519Signer:
    return Ed25519Signer(ref, public_key, None, None, None, ed25519=ed25519)


def test_it_counts_by_key_with_dsse_across_copies(ed25519: object) -> None:
    toy, ecdsa = Ed25519PrivateKey.generate(), generate_private_key()
    payload = _statement()
    trust = StatementTrust.of(
        {"toy": _signer(toy.public_key()), "ecdsa": _signer(public_key=ecdsa.public_key())}, 2, now=NOW
    )
    # Two copies of one statement: one DSSE-signed, one with the new format's signature: two distinct keys.
    verified = verify_statement([_copy(payload, dsse=ecdsa), _copy(payload, _sign(toy, payload))], trust)
    assert verified.signers == ("ecdsa", "toy")
    assert verified.distinct_keys == 2
    assert verified.valid_until == EXPIRES  # when the new format's signature stops verifying
    # One Ed25519 key under two names counts once (by the key, never by the name).
    same = {"toy": _signer(toy.public_key()), "toy-again": _signer(toy.public_key())}
    with pytest.raises(StatementRefused, match="signed by 1 of the 2 required distinct keys"):
        verify_statement(
            [_copy(payload, _sign(toy, payload))],
            StatementTrust.of({**same, "ecdsa": _signer(public_key=ecdsa.public_key())}, 2, now=NOW),
        )


def test_it_binds_the_subject_and_refuses_a_tampered_copy(ed25519: object) -> None:
    toy = Ed25519PrivateKey.generate()
    payload = _statement()
    trust = StatementTrust.of({"toy": _signer(toy.public_key())}, now=NOW)
    assert verify_statement([_copy(payload, _sign(toy, payload))], trust, subject=f"sha256:{SUBJECT}")
    with pytest.raises(StatementRefused, match="not about sha256:"):
        verify_statement([_copy(payload, _sign(toy, payload))], trust, subject=f"sha256:{'cd' * 32}")
    tampered = payload.replace(b"a test", b"a lie!")
    with pytest.raises(StatementRefused, match="toy: the Ed25519 signature does not verify"):
        verify_statement([_copy(tampered, _sign(toy, payload))], trust)
    with pytest.raises(StatementRefused, match="the Ed25519 signature expired"):  # judged at the clock given
        verify_statement([_copy(payload, _sign(toy, payload, expires=NOW - timedelta(seconds=1)))], trust)
    # Another key's signature does not count for this one, and an unsigned copy carries no signature.
    other = Ed25519PrivateKey.generate()
    with pytest.raises(StatementRefused, match="does not verify"):
        verify_statement([_copy(payload, _sign(other, payload))], trust)
    with pytest.raises(StatementRefused, match="it carries no Ed25519 signature"):
        verify_statement([_copy(payload)], trust)


def _manifest_statement(material: Material) -> tuple[str, bytes]:
    """An engine artifact in ``material``'s evidence folder whose build manifest is signed in no format yet:
    its reference and the manifest's statement bytes."""
    reference = material.engine("resnet")
    (material.attestations / "resnet.manifest.json").unlink()  # the DSSE-signed copy Material writes
    manifest = EngineBuildManifest.model_validate(manifest_data(b"engine resnet"))
    return reference, manifest_statement(manifest).to_json()


def test_a_folder_carries_it_and_verify_manifest_loads_a_manifest_signed_only_so(
    ed25519: object, tmp_path: Path
) -> None:
    material = Material(tmp_path / "material")
    material.root.mkdir()
    toy = Ed25519PrivateKey.generate()
    reference, payload = _manifest_statement(material)
    (material.attestations / "resnet.statement.json").write_bytes(payload)
    (material.attestations / "resnet.statement.json.ed25519").write_bytes(_sign(toy, payload))
    found = asyncio.run(
        LocalEvidence(material.attestations).attestations(ImageReference.parse(reference), Deadline.never())
    )
    assert [a.detached[0][0] for a in found.attestations] == ["ed25519"]
    trust = StatementTrust.of({"toy": _signer(toy.public_key())}, now=NOW)
    verified = verify_manifest(found.attestations, trust)
    assert verified.signers == ("toy",)
    assert verified.valid_until == EXPIRES
    assert f"sha256:{verified.manifest.output_engine.sha256}" in verified.subjects
    # Signed so, but not a build manifest: unreadable evidence, as for every format.
    other = _statement()
    with pytest.raises(UnreadableEvidence, match="the signed build manifest is invalid"):
        verify_manifest([_copy(other, _sign(toy, other))], trust)


MANIFEST_POLICY = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: models}
spec:
  match: {namespaces: [prod]}
  models:
    required: true
    buildManifest: {keys: [platform/toy]}
"""


def _evaluator(material: Material, toy: Ed25519PublicKey) -> PolicyEvaluator:
    """The evaluator of a policy whose build manifests ``platform/toy`` signs, an Ed25519 key.

    TrustedKeys has no field for one (the policy language's side of a new format), so the loaded signer, a
    public key of the same name, is replaced by one that carries the Ed25519 key alone."""
    policy_set = load_policy_set(
        [material.policy(textwrap.dedent(MANIFEST_POLICY)), material.keys_file("toy")]
    )
    signer = Ed25519Signer("platform/toy", None, None, None, None, ed25519=toy)
    policy_set = replace(policy_set, signers={**policy_set.signers, "platform/toy": signer})
    return PolicyEvaluator(policy_set, LocalEvidence(material.attestations), clock=lambda: NOW)


def test_the_evaluator_admits_and_denies_through_it(ed25519: object, tmp_path: Path) -> None:
    material = Material(tmp_path / "material")
    material.root.mkdir()
    toy = Ed25519PrivateKey.generate()
    reference, payload = _manifest_statement(material)
    statement = material.attestations / "resnet.statement.json"
    statement.write_bytes(payload)
    signature = material.attestations / "resnet.statement.json.ed25519"
    signature.write_bytes(_sign(toy, payload))
    assert evaluate(_evaluator(material, toy.public_key()), pod(engine=reference)).allowed
    # Another key's signature: denied, with the format's own reason.
    signature.write_bytes(_sign(Ed25519PrivateKey.generate(), payload))
    decision = evaluate(_evaluator(material, toy.public_key()), pod(engine=reference))
    assert rules(decision) == {("models", "models.buildManifest", decision.violations[0].action)}
    assert "platform/toy: the Ed25519 signature does not verify" in decision.violations[0].message
    # Expired at the evaluation clock: denied.
    signature.write_bytes(_sign(toy, payload, expires=NOW - timedelta(days=1)))
    decision = evaluate(_evaluator(material, toy.public_key()), pod(engine=reference))
    assert "the Ed25519 signature expired" in decision.violations[0].message


def test_without_the_registration_line_nothing_counts_it(tmp_path: Path) -> None:
    """The control: the same evidence, the format's folder present, but not registered: denied."""
    (tmp_path / "unregistered").mkdir()
    material = Material(tmp_path / "unregistered")
    toy = Ed25519PrivateKey.generate()
    reference, payload = _manifest_statement(material)
    (material.attestations / "resnet.statement.json").write_bytes(payload)
    (material.attestations / "resnet.statement.json.ed25519").write_bytes(_sign(toy, payload))
    decision = evaluate(_evaluator(material, toy.public_key()), pod(engine=reference))
    assert not decision.allowed
    assert all(f.label != "Ed25519" for f in _table.FORMATS)

"""Hostile evidence beside valid evidence changes no verdict (issue 24 item 11): the adversarial corpus
(tests/data/600-adversarial-corpus.yaml) through ``trtguard check --attestations`` and a real ``trtguard
serve`` over TLS, with an attestation folder that holds the demo's valid attestations and, beside each, the
hostile files built from it (tampered, truncated, re-typed, nested to exhaust a parser, oversized, signed by
an untrusted key, a bad OpenPGP signature, a ``.jsonl`` mixing a good and a broken line). Every case gets
the verdict, violation for violation, that it gets with the clean folder; each hostile file is left out
with its reason.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import logging
import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import SERVICE, WebhookProcess, review
from tests.webhook.test_adversarial_corpus import Case, Finding, findings, load_cases
from trtguard.cli import main
from trtguard.demo.material import Material
from verifier.crypto._dsse import sign_envelope
from verifier.crypto._intoto import PAYLOAD_TYPE
from verifier.crypto._keys import generate_private_key

Verdicts = dict[str, tuple[bool, frozenset[Finding]]]
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def _hostile_variants(valid: bytes) -> dict[str, bytes]:
    """Hostile files made from one valid DSSE attestation (its subjects, its shape)."""
    envelope = json.loads(valid)
    statement = json.loads(base64.b64decode(envelope["payload"]))
    flipped = dict(envelope, signatures=[dict(s, sig="A" + s["sig"][1:]) for s in envelope["signatures"]])
    retyped = dict(statement, subject=[dict(s, digest=[s["digest"]]) for s in statement["subject"]])
    hostile_predicate = dict(statement, predicate={"x": ["y" * 100_000] * 20, "deep": _nested(300)})
    untrusted = sign_envelope(PAYLOAD_TYPE, json.dumps(hostile_predicate).encode(), generate_private_key())
    return {
        "tampered.dsse.json": json.dumps(
            dict(envelope, payload=base64.b64encode(b'{"_type": 1}').decode())
        ).encode(),
        "bad-signature.dsse.json": json.dumps(flipped).encode(),
        "truncated.dsse.json": valid[: len(valid) // 2],
        "retyped.dsse.json": json.dumps(
            dict(envelope, payload=base64.b64encode(json.dumps(retyped).encode()).decode())
        ).encode(),
        "deep.json": b'{"payloadType": ' * 50_000 + b"1" + b"}" * 50_000,
        "not-evidence.json": b'{"kind": "Pod"}',
        "binary.dsse": bytes(range(256)) * 64,
        "oversized.json": b" " * (16 * 1024 * 1024 + 1),
        "untrusted.dsse.json": untrusted.to_json(),
        "lines.jsonl": valid.strip() + b"\n{broken\n" + untrusted.to_json() + b"\n",
        "statement.json": json.dumps(statement).encode(),
        "statement.json.asc": b"-----BEGIN PGP SIGNATURE-----\n\nnot one\n-----END PGP SIGNATURE-----\n",
        "bundle.sigstore.json": json.dumps({"dsseEnvelope": flipped, "verificationMaterial": 7}).encode(),
        "classic.cosign.json": b'{"payload": "!!", "signature": 5, "media_type": null}',
        "manifest.oci-manifest.json": json.dumps({"mediaType": OCI_MANIFEST, "layers": 3}).encode(),
    }


def _nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = {"a": [value]}
    return value


@pytest.fixture(scope="module")
def polluted(demo_material: Material, tmp_path_factory: pytest.TempPathFactory) -> Material:
    """The demo material with hostile files beside each of its DSSE attestations."""
    folder = tmp_path_factory.mktemp("polluted") / "attestations"
    shutil.copytree(demo_material.attestations, folder)
    for path in sorted(demo_material.attestations.glob("*.dsse.json")):
        hostile = folder / f"{path.name}.hostile"
        hostile.mkdir()
        for name, content in _hostile_variants(path.read_bytes()).items():
            (hostile / name).write_bytes(content)
    return replace(demo_material, attestations=folder)


def _check(material: Material, resources: list[Case], folder: Path) -> tuple[Verdicts, str]:
    together = folder / "together.yaml"
    together.write_text("\n---\n".join(c.text for c in resources))
    out, err = io.StringIO(), io.StringIO()
    argv = ["check", "--policies", str(material.policies), "--attestations", str(material.attestations)]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([*argv, "--unknown-kinds", "judge", "--format", "json", str(together)])
    assert status in (0, 1), err.getvalue()
    verdicts = {
        f"{r['kind']}/{r['name']}": (r["allowed"], frozenset(findings(r["violations"])))
        for r in json.loads(out.getvalue())
    }
    return verdicts, err.getvalue()


@pytest.fixture(scope="module")
def resources(demo_material: Material) -> list[Case]:
    return [c for c in load_cases(demo_material) if c.resource is not None and "check" in c.paths]


@pytest.fixture(scope="module")
def clean(
    demo_material: Material, resources: list[Case], tmp_path_factory: pytest.TempPathFactory
) -> Verdicts:
    return _check(demo_material, resources, tmp_path_factory.mktemp("clean"))[0]


def test_check_gives_every_corpus_case_its_verdict_with_hostile_files_beside_the_valid_ones(
    polluted: Material,
    resources: list[Case],
    clean: Verdicts,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="verifier.evidence_folder"):
        verdicts, err = _check(polluted, resources, tmp_path)
    assert verdicts == clean
    assert any(allowed for allowed, _ in clean.values()) and not all(allowed for allowed, _ in clean.values())
    # Refused, or (the oversized file, which may be signed evidence too large to check) kept as unchecked.
    refused = {
        r.getMessage().split(": ", 1)[0] for r in caplog.records if r.getMessage().startswith("skipping ")
    }
    # Each file that cannot be read is left out with its reason. Those that can are kept and fail when
    # verified: a flipped signature (also in a bundle), the untrusted signer's (a key the policies do not
    # trust) and the OpenPGP pair (a statement whose signature is not one); the .jsonl by its broken line.
    for hostile in polluted.attestations.glob("*.hostile"):
        kept = {"bad-signature.dsse.json", "bundle.sigstore.json", "untrusted.dsse.json", "lines.jsonl"}
        kept |= {"statement.json", "statement.json.asc"}
        for path in hostile.iterdir():
            assert (f"skipping {path}" in refused) is (path.name not in kept), path.name
        assert f"skipping {hostile / 'lines.jsonl'}:2" in refused
    oversized = [r.getMessage() for r in caplog.records if "oversized.json: " in r.getMessage()]
    assert oversized and all("rules of the type it claims cannot tell" in m for m in oversized)
    assert "Traceback" not in err


@pytest.fixture(scope="module")
def polluted_webhook(
    polluted: Material, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WebhookProcess]:
    process = WebhookProcess(
        [
            "--policies",
            str(polluted.policies),
            "--attestations",
            str(polluted.attestations),
            "--self-signed",
            "tls",
            "--san",
            SERVICE,
            "--decision-log",
            "sqlite:///decisions.db",
        ],
        tmp_path_factory.mktemp("polluted-webhook"),
    )
    process.start()
    yield process
    process.stop()


async def test_serve_gives_the_clean_verdicts_with_hostile_files_in_its_folder(
    demo_material: Material, clean: Verdicts, polluted_webhook: WebhookProcess
) -> None:
    served = [c for c in load_cases(demo_material) if c.resource is not None and "serve" in c.paths]
    async with polluted_webhook.client() as client:
        for case in served:
            assert case.resource is not None
            response = (await client.post(review(obj=case.resource))).json()["response"]
            annotation = response.get("auditAnnotations", {}).get("violations", "[]")
            found = frozenset(findings([v for v in json.loads(annotation) if "more" not in v]))
            name = _name(case.resource)
            if name in clean:
                assert (response["allowed"], found) == clean[name], f"{case.id}: the hostile files changed it"


def _name(resource: Any) -> str:
    while resource.get("kind") == "List":
        [resource] = resource["items"]
    return f"{resource['kind']}/{resource['metadata']['name']}"

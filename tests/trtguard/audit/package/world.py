"""The world the evidence-package tests share: a real decision log written by the webhook's own Reviewer.

The Reviewer judges real AdmissionReviews against the bundled demo policies (trtguard.demo.material), with
engine attestations in an attestation folder. The committee's approval, the GPU verifier's attestation and an
engine signature are signed here with fresh keys, named by a TrustedKeys document through key files (one
outside the policy folder), so that the policy revision covers key files too. Helpers export and verify
packages and tamper with them as an outsider (no key) or a dishonest exporter (holding the key) would.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from decisionlog import SQLiteStore, open_store
from tests.support.harness import pod, review
from trtguard.audit.package import (
    ArchiveLimits,
    ChainScope,
    EvidencePackageReport,
    ExportSummary,
    Selection,
    export_evidence_package,
    verify_evidence_package,
)
from trtguard.audit.package.archive import read_archive, write_archive
from trtguard.audit.package.contents import INDEX, RECORDS, SIGNATURE, parse_predicate, seal
from trtguard.demo.material import OFF_LIST_IMAGE, TENSORRT_IMAGE, Material, make_material
from verifier.attestations import (
    CHANGE_APPROVAL_PREDICATE_TYPE,
    ENGINE_VERIFICATION_PREDICATE_TYPE,
    ChangeApproval,
    EngineVerification,
)
from verifier.crypto._dsse import Envelope
from verifier.crypto._intoto import ResourceDescriptor, Statement, sign_statement, statement_from_envelope
from verifier.crypto._keys import PrivateKey, encrypt_private_key, generate_private_key
from verifier.evidence import COSIGN_SIGN_PREDICATE
from verifier.evidence_folder import LocalEvidence
from webhook._admission import Reviewer
from webhook._metrics import Metrics
from webhook._policy_store import PolicyStore
from webhook._wire import parse_review_document

PASSWORD = b"evidence test password"
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

# (workload, engine, operation, dry run, image): the order in which the webhook judged them.
ADMISSIONS = (
    ("bert", None, "CREATE", False, OFF_LIST_IMAGE),  # seq 1, denied: image not on the allow-list
    ("resnet", "fp16", "CREATE", False, TENSORRT_IMAGE),  # seq 2
    ("other", "fp16", "CREATE", False, TENSORRT_IMAGE),  # seq 3
    ("resnet", "int8-uncalibrated", "UPDATE", False, TENSORRT_IMAGE),  # seq 4, denied: no calibration
    ("other", "fp16", "CREATE", True, TENSORRT_IMAGE),  # seq 5, dry run
    ("resnet", "fp16", "CREATE", True, TENSORRT_IMAGE),  # seq 6, dry run
    ("resnet", "int8-calibrated", "UPDATE", False, TENSORRT_IMAGE),  # seq 7
    ("bert", "int8-calibrated", "CREATE", False, TENSORRT_IMAGE),  # seq 8
    ("other", "int8-calibrated", "UPDATE", False, TENSORRT_IMAGE),  # seq 9
)


@dataclass(frozen=True)
class World:
    """A decision log with the material it was judged against, and the exporter's key."""

    root: Path
    material: Material
    log: Path
    exporter: PrivateKey
    key_file: Path
    public_key: Path
    password_file: Path
    engine_files: dict[str, str]  # engine name → engine file digest (the attestations' subject)
    engine_digests: dict[str, str]  # engine name → artifact digest (what decisions record)

    @property
    def url(self) -> str:
        return f"sqlite:///{self.log}"

    @property
    def policies(self) -> Path:
        return self.material.policies

    @property
    def attestations(self) -> Path:
        return self.material.attestations


def sign_extras(material: Material, root: Path, engine_files: dict[str, str]) -> None:
    """Committee approval, GPU verification and an engine signature, with keys named through key files."""
    alice, gpu, release = (generate_private_key() for _ in range(3))
    (material.policies / "keys").mkdir()
    (material.policies / "keys" / "alice.pub").write_bytes(alice.public_key().to_pem())
    (root / "shared-keys").mkdir()
    (root / "shared-keys" / "gpu.pub").write_bytes(gpu.public_key().to_pem())
    release_pem = "\n".join(f"        {line}" for line in release.public_key().to_pem().decode().splitlines())
    (material.policies / "committee.yaml").write_text(
        "apiVersion: trtguard.dev/v1alpha1\nkind: TrustedKeys\nmetadata: {name: committee}\nspec:\n  keys:\n"
        "    - {name: alice, file: keys/alice.pub}\n"
        "    - {name: gpu, file: ../shared-keys/gpu.pub}\n"
        f"    - name: release\n      publicKey: |\n{release_pem}\n"
    )
    fp16 = engine_files["fp16"]
    approval = ChangeApproval.model_validate(
        {
            "engine_digest": fp16,
            "audit_id": "DEMO-fp16",
            "changes": ["TensorRTMajorUpgrade"],
            "approver": "alice@example.com",
            "approved_at": "2026-11-20T10:00:00Z",
        }
    )
    verification = EngineVerification.model_validate(
        {
            "verified_at": "2026-11-21T10:00:00Z",
            "verifier": {"name": "trtguard", "version": "0.1.0"},
            "engine": {"name": "fp16.plan", "sha256": fp16.removeprefix("sha256:"), "size": 27},
            "runtime": {"module": "tensorrt", "tensorrt_version": "10.5.0.18"},
            "gpu": {"gpu_name": "NVIDIA H200", "compute_capability": "9.0", "driver_version": "580.159.04"},
            "io_tensors": [{"name": "input", "mode": "input", "dtype": "float32", "shape": [1, 3, 224, 224]}],
            "checks": [{"field": "output_engine.sha256", "status": "pass"}],
            "result": "pass",
        }
    )
    subject = [ResourceDescriptor(name="fp16.plan", digest={"sha256": fp16.removeprefix("sha256:")})]
    for name, predicate_type, predicate, key in (
        ("fp16.approval", CHANGE_APPROVAL_PREDICATE_TYPE, approval.model_dump(mode="json"), alice),
        ("fp16.verification", ENGINE_VERIFICATION_PREDICATE_TYPE, verification.model_dump(mode="json"), gpu),
    ):
        statement = Statement(subject=subject, predicate_type=predicate_type, predicate=predicate)
        (material.attestations / f"{name}.dsse.json").write_bytes(sign_statement(statement, key).to_json())
    artifact = material.engines["fp16"].split("@sha256:")[1]
    signing = Statement(
        subject=[ResourceDescriptor(digest={"sha256": artifact})], predicate_type=COSIGN_SIGN_PREDICATE
    )
    (material.attestations / "fp16.cosign-sign.dsse.json").write_bytes(
        sign_statement(signing, release).to_json()
    )


async def judge(material: Material, log: Path) -> None:
    """Run every admission of ADMISSIONS through the webhook's Reviewer, recording to ``log``."""
    store = SQLiteStore(log)
    await store.open()
    policies = PolicyStore(material.policies, LocalEvidence(material.attestations))
    policies.load()
    reviewer = Reviewer(policies, store, Metrics())
    previous: dict[str, dict[str, Any]] = {}
    try:
        for name, engine, operation, dry_run, image in ADMISSIONS:
            obj = pod(name, image, engine=material.engines[engine] if engine else None)
            body = review(obj=obj, operation=operation, dry_run=dry_run, old=previous.get(name))
            await reviewer.review(parse_review_document(body), api_timeout=10, started=time.perf_counter())
            previous[name] = obj
    finally:
        await store.close()


async def export_package(
    world: World,
    selection: Selection,
    output: Path,
    *,
    chain: ChainScope = ChainScope.SEGMENT,
    policies: Path | None = None,
    evidence: bool = True,
    key: PrivateKey | None = None,
) -> ExportSummary:
    """Export ``selection`` from the world's log to ``output`` (at a fixed time, for reproducibility)."""
    store = open_store(world.url, read_only=True)
    await store.open()
    try:
        return await export_evidence_package(
            store,
            selection,
            policies=[policies or world.policies],
            evidence=LocalEvidence(world.attestations) if evidence else None,
            key=key or world.exporter,
            output=output,
            chain=chain,
            now=NOW,
        )
    finally:
        await store.close()


def verify_package(world: World, archive: Path, **options: Any) -> EvidencePackageReport:
    """Verify ``archive`` with the exporter's public key."""
    return verify_evidence_package(archive, world.exporter.public_key(), **options)


def messages(report: EvidencePackageReport, status: str) -> list[str]:
    """``topic: message`` of every finding with ``status``."""
    return [f"{f.topic}: {f.message}" for f in report.findings if f.status == status]


def record_lines(archive: Path) -> list[dict[str, Any]]:
    """The lines of the package's ``records.jsonl``."""
    return [json.loads(line) for line in read_members(archive)[RECORDS].splitlines()]


def signed_predicate(members: dict[str, bytes]) -> dict[str, Any]:
    """The predicate of the signed index statement, as JSON."""
    statement = statement_from_envelope(Envelope.from_json(members[SIGNATURE]))
    return statement.predicate


def reseal(
    source: Path,
    target: Path,
    key: PrivateKey,
    change: Callable[[dict[str, bytes], dict[str, Any]], None],
) -> Path:
    """Rewrite a package as a dishonest exporter holding the key would: change files, sign a fresh index."""
    members = read_members(source)
    predicate = signed_predicate(members)
    files = {name: data for name, data in members.items() if name not in (INDEX, SIGNATURE)}
    change(files, predicate)
    write_archive(target, seal(files, parse_predicate(predicate), key), mtime=0, overwrite=True)
    return target


def rewrite(source: Path, target: Path, change: Callable[[dict[str, bytes]], None]) -> Path:
    """Change members without signing anything again (an outsider's tampering)."""
    members = read_members(source)
    change(members)
    write_archive(target, sorted(members.items()), mtime=0, overwrite=True)
    return target


def replace_record(data: bytes, seq: int, edit: Callable[[dict[str, Any]], None]) -> bytes:
    """``records.jsonl`` with the line of ``seq`` edited."""
    lines = []
    for raw in data.splitlines():
        line = json.loads(raw)
        if line["seq"] == seq:
            edit(line)
        lines.append(json.dumps(line).encode())
    return b"\n".join(lines) + b"\n"


def edit_record(seq: int, field: str, value: Any) -> Callable[..., None]:
    """Set ``record[field]`` of decision ``seq``; usable by :func:`rewrite` and :func:`reseal`."""

    def change(files: dict[str, bytes], *_: object) -> None:
        files[RECORDS] = replace_record(
            files[RECORDS], seq, lambda line: line["record"].__setitem__(field, value)
        )

    return change


def make_world(root: Path) -> World:
    """Material, a decision log judged against it, and an exporter key with its files, under ``root``."""
    material = make_material(root / "material")
    engine_files = {}
    for name in material.engines:
        manifest = json.loads((material.attestations / f"engine-{name}.oci-manifest.json").read_bytes())
        engine_files[name] = manifest["layers"][0]["digest"]
    sign_extras(material, root / "material", engine_files)
    log = root / "decisions.db"
    asyncio.run(judge(material, log))
    exporter = generate_private_key()
    key_file, public_key, password_file = root / "exporter.key", root / "exporter.pub", root / "password"
    key_file.write_bytes(encrypt_private_key(exporter, PASSWORD))
    public_key.write_bytes(exporter.public_key().to_pem())
    password_file.write_bytes(PASSWORD + b"\n")
    digests = {name: ref.split("@")[1] for name, ref in material.engines.items()}
    return World(root, material, log, exporter, key_file, public_key, password_file, engine_files, digests)


def read_members(archive: Path) -> dict[str, bytes]:
    """The members of a package, read with the default limits."""
    return read_archive(archive, ArchiveLimits())

"""trtguard.audit.package: export an evidence package from a real decision log, verify it, catch tampering.

The decision log is written by the webhook's own Reviewer judging real AdmissionReviews against the bundled
policies (webhook/_private/demo_material), with engine attestations in an attestation folder. The committee's
approval, the GPU verifier's attestation and an engine signature are signed here with fresh keys, named by
a TrustedKeys document through key files (one outside the policy folder), so that the policy revision
covers key files too.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import shutil
import socket
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import pod, review
from trtguard.audit.package import (
    Anchor,
    ArchiveLimits,
    ChainScope,
    EvidenceReport,
    ExportSummary,
    Selection,
    export_evidence,
    verify_evidence,
)
from trtguard.audit.package.archive import read_archive, write_archive
from trtguard.audit.package.contents import INDEX, RECORDS, SIGNATURE, parse_predicate, seal
from trtguard.cli import main
from trtguard.demo.material import OFF_LIST_IMAGE, TENSORRT_IMAGE, Material, make_material
from verifier.attestations import (
    CHANGE_APPROVAL_PREDICATE_TYPE,
    ENGINE_VERIFICATION_PREDICATE_TYPE,
    ChangeApproval,
    EngineVerification,
)
from verifier.dsse import Envelope
from verifier.evidence import COSIGN_SIGN_PREDICATE, LocalEvidence
from verifier.intoto import ResourceDescriptor, Statement, sign_statement, statement_from_envelope
from verifier.keys import PrivateKey, encrypt_private_key, generate_private_key
from webhook import decisionlog
from webhook.admission import Reviewer
from webhook.decisionlog import DecisionRecord, DecisionStore, RecordQuery, SQLiteStore, open_store
from webhook.metrics import Metrics
from webhook.policy_store import PolicyStore
from webhook.wire import parse_review_document

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


def _sign_extras(material: Material, root: Path, engine_files: dict[str, str]) -> None:
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


async def _judge(material: Material, log: Path) -> None:
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


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("evidence")
    material = make_material(root / "material")
    engine_files = {}
    for name in material.engines:
        manifest = json.loads((material.attestations / f"engine-{name}.oci-manifest.json").read_bytes())
        engine_files[name] = manifest["layers"][0]["digest"]
    _sign_extras(material, root / "material", engine_files)
    log = root / "decisions.db"
    asyncio.run(_judge(material, log))
    exporter = generate_private_key()
    key_file, public_key, password_file = root / "exporter.key", root / "exporter.pub", root / "password"
    key_file.write_bytes(encrypt_private_key(exporter, PASSWORD))
    public_key.write_bytes(exporter.public_key().to_pem())
    password_file.write_bytes(PASSWORD + b"\n")
    digests = {name: ref.split("@")[1] for name, ref in material.engines.items()}
    return World(root, material, log, exporter, key_file, public_key, password_file, engine_files, digests)


async def _export(
    world: World,
    selection: Selection,
    output: Path,
    *,
    chain: ChainScope = ChainScope.SEGMENT,
    policies: Path | None = None,
    evidence: bool = True,
    key: PrivateKey | None = None,
) -> ExportSummary:
    store = open_store(world.url, read_only=True)
    await store.open()
    try:
        return await export_evidence(
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


def _verify(world: World, archive: Path, **options: Any) -> EvidenceReport:
    return verify_evidence(archive, world.exporter.public_key(), **options)


def _messages(report: EvidenceReport, status: str) -> list[str]:
    return [f"{f.topic}: {f.message}" for f in report.findings if f.status == status]


def _records(archive: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in read_archive(archive, _limits())[RECORDS].splitlines()]


def _limits() -> ArchiveLimits:
    return ArchiveLimits()


def _predicate(members: dict[str, bytes]) -> dict[str, Any]:
    statement = statement_from_envelope(Envelope.from_json(members[SIGNATURE]))
    return statement.predicate


def _reseal(
    source: Path,
    target: Path,
    key: PrivateKey,
    change: Callable[[dict[str, bytes], dict[str, Any]], None],
) -> Path:
    """Rewrite a package as a dishonest exporter holding the key would: change files, sign a fresh index."""
    members = read_archive(source, _limits())
    predicate = _predicate(members)
    files = {name: data for name, data in members.items() if name not in (INDEX, SIGNATURE)}
    change(files, predicate)
    write_archive(target, seal(files, parse_predicate(predicate), key), mtime=0, overwrite=True)
    return target


def _rewrite(source: Path, target: Path, change: Callable[[dict[str, bytes]], None]) -> Path:
    """Change members without signing anything again (an outsider's tampering)."""
    members = read_archive(source, _limits())
    change(members)
    write_archive(target, sorted(members.items()), mtime=0, overwrite=True)
    return target


def _replace_record(data: bytes, seq: int, edit: Callable[[dict[str, Any]], None]) -> bytes:
    lines = []
    for raw in data.splitlines():
        line = json.loads(raw)
        if line["seq"] == seq:
            edit(line)
        lines.append(json.dumps(line).encode())
    return b"\n".join(lines) + b"\n"


@pytest.fixture(scope="module")
def resnet_package(world: World, tmp_path_factory: pytest.TempPathFactory) -> Path:
    output = tmp_path_factory.mktemp("packages") / "resnet.tar.gz"
    asyncio.run(_export(world, Selection.workload("prod/resnet"), output))
    return output


# --- what a good package holds and proves ------------------------------------------------------------------


def test_the_log_holds_what_the_webhook_decided(world: World) -> None:
    async def read() -> list[DecisionRecord]:
        store = open_store(world.url, read_only=True)
        await store.open()
        return [stored.record for stored in await store.query(RecordQuery())]

    records = asyncio.run(read())
    assert [(r.name, r.allowed, r.dry_run) for r in records] == [
        ("bert", False, False),
        ("resnet", True, False),
        ("other", True, False),
        ("resnet", False, False),
        ("other", True, True),
        ("resnet", True, True),
        ("resnet", True, False),
        ("bert", True, False),
        ("other", True, False),
    ]


def test_workload_package_verifies_and_says_what_it_proves(world: World, resnet_package: Path) -> None:
    report = _verify(world, resnet_package)
    assert report.ok, _messages(report, "fail")
    members = read_archive(resnet_package, _limits())
    fp16 = world.engine_digests["fp16"].replace(":", "-")
    assert {
        INDEX,
        SIGNATURE,
        RECORDS,
        "policies/policies/committee.yaml",
        "policies/policies/keys/alice.pub",
        "policies/shared-keys/gpu.pub",
        f"engines/{fp16}/build-manifest-1.dsse.json",
        f"engines/{fp16}/change-approval-1.dsse.json",
        f"engines/{fp16}/engine-verification-1.dsse.json",
        f"engines/{fp16}/signatures/1-cosign-sign-dsse.dsse.json",
    } <= set(members)
    # The segment runs from the first resnet decision to the head, other workloads' records included.
    assert [line["seq"] for line in _records(resnet_package)] == list(range(2, 10))
    assert _predicate(members)["selection"]["records"] == [2, 4, 6, 7]
    passed = "\n".join(_messages(report, "pass"))
    assert "the 8 records from seq 2 to the exported head (seq 9) recompute and link without a gap" in passed
    assert "exactly the 4 selected match the rule" in passed
    assert "the included policy set is the one all 4 selected decisions were made under" in passed
    assert (
        "change-approval (by alice@example.com for audit ID DEMO-fp16: TensorRTMajorUpgrade) signed by "
        "committee/alice" in passed
    )
    assert "engine-verification (GPU check pass on NVIDIA H200) signed by committee/gpu" in passed
    assert "signed by platform/build-signer" in passed
    assert "signature engines/" in passed and "keys [committee/release]" in passed
    assert report.proves[0].startswith(
        f"The package is exactly as the holder of key {world.exporter.public_key().key_id[:16]}"
    )
    assert any("removed from the end of the log" in item for item in report.does_not_prove)
    assert any("records before seq 2" in item for item in report.does_not_prove)


def test_export_is_reproducible(world: World, resnet_package: Path, tmp_path: Path) -> None:
    again = tmp_path / "again.tar.gz"
    asyncio.run(_export(world, Selection.workload("prod/resnet"), again))
    # ECDSA signatures are randomised; everything else is byte for byte the same.
    first, second = read_archive(resnet_package, _limits()), read_archive(again, _limits())
    assert {k: v for k, v in first.items() if k != SIGNATURE} == {
        k: v for k, v in second.items() if k != SIGNATURE
    }
    assert Envelope.from_json(first[SIGNATURE]).payload == Envelope.from_json(second[SIGNATURE]).payload


async def test_engine_selection_holds_its_real_admissions_across_workloads(
    world: World, tmp_path: Path
) -> None:
    output = tmp_path / "engine.tar.gz"
    summary = await _export(world, Selection.engine(world.engine_digests["fp16"]), output)
    assert (summary.decisions, summary.first_seq, summary.last_seq) == (2, 2, 9)
    members = read_archive(output, _limits())
    assert _predicate(members)["selection"]["records"] == [2, 3]  # the dry runs (5, 6) admitted nothing
    report = _verify(world, output)
    assert report.ok, _messages(report, "fail")
    assert any("every real (not dry-run) admission" in m for m in _messages(report, "pass"))


async def test_audit_id_selection_follows_the_build_manifests(world: World, tmp_path: Path) -> None:
    output = tmp_path / "audit.tar.gz"
    summary = await _export(world, Selection.audit_id("DEMO-int8-calibrated"), output)
    assert summary.decisions == 3
    assert _predicate(read_archive(output, _limits()))["selection"]["records"] == [7, 8, 9]
    report = _verify(world, output)
    assert report.ok, _messages(report, "fail")
    assert any("DEMO-int8-calibrated" in item for item in report.does_not_prove)


async def test_full_chain_starts_at_genesis(world: World, tmp_path: Path) -> None:
    output = tmp_path / "full.tar.gz"
    await _export(world, Selection.workload("prod/other"), output, chain=ChainScope.FULL)
    assert [line["seq"] for line in _records(output)] == list(range(1, 10))
    report = _verify(world, output)
    assert report.ok, _messages(report, "fail")
    assert any("from the genesis record to the exported head (seq 9)" in m for m in _messages(report, "pass"))
    assert not any("records before seq" in item for item in report.does_not_prove)


async def test_selected_chain_keeps_other_workloads_out_and_says_what_that_costs(
    world: World, tmp_path: Path
) -> None:
    output = tmp_path / "selected.tar.gz"
    await _export(world, Selection.workload("prod/resnet"), output, chain=ChainScope.SELECTED)
    lines = _records(output)
    assert [line["seq"] for line in lines] == [2, 4, 6, 7]
    assert {line["record"]["name"] for line in lines} == {"resnet"}
    report = _verify(world, output)
    assert report.ok, _messages(report, "fail")
    assert "selection: completeness cannot be checked: only the selected records are included" in _messages(
        report, "note"
    )
    assert any("That the selected decisions are all there are" in item for item in report.does_not_prove)


async def test_policies_changed_since_the_decisions_are_included_but_not_claimed(
    world: World, tmp_path: Path
) -> None:
    edited = tmp_path / "policies"
    shutil.copytree(world.policies, edited)
    (edited / "signed-images.yaml").write_text((edited / "signed-images.yaml").read_text() + "\n# edited\n")
    (tmp_path / "shared-keys").mkdir()
    shutil.copy(world.root / "material" / "shared-keys" / "gpu.pub", tmp_path / "shared-keys")
    output = tmp_path / "new-policies.tar.gz"
    summary = await _export(world, Selection.workload("prod/resnet"), output, policies=edited)
    assert summary.policy_in_force is False
    report = _verify(world, output)
    assert report.ok, _messages(report, "fail")
    [note] = [m for m in _messages(report, "note") if m.startswith("policy:")]
    assert "not the ones these decisions name" in note and "(4 decisions)" in note
    assert any(
        "policies in force for the decisions naming other revisions" in i for i in report.does_not_prove
    )


async def test_without_an_evidence_source_the_package_says_what_is_missing(
    world: World, tmp_path: Path
) -> None:
    output = tmp_path / "bare.tar.gz"
    summary = await _export(world, Selection.workload("prod/resnet"), output, evidence=False)
    assert summary.engines == 3 and not summary.attestations
    assert all("no evidence source was given" in problem for problem in summary.problems)
    report = _verify(world, output)
    assert report.ok, _messages(report, "fail")
    assert any("has no build manifest" in m for m in _messages(report, "note"))


async def test_a_registry_that_is_down_is_recorded_not_hidden(world: World, tmp_path: Path) -> None:
    from verifier.deadline import Deadline  # noqa: PLC0415
    from verifier.registry.client import RegistryClient  # noqa: PLC0415
    from verifier.registry.config import load_registry_config  # noqa: PLC0415
    from verifier.registry.evidence import RegistryEvidence  # noqa: PLC0415

    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        host = f"127.0.0.1:{probe.getsockname()[1]}"
    config = tmp_path / "registries.yaml"
    config.write_text(f'registries:\n  "{host}":\n    plain_http: true\n    retry: {{attempts: 1}}\n')
    source = open_store(world.url, read_only=True)
    [stored] = await source.query(RecordQuery(namespace="prod", name="resnet", limit=1))
    engine = f"{host}/models/fp16@{world.engine_digests['fp16']}"
    moved = dataclasses.replace(
        stored.record, engines=({"reference": engine, "digest": world.engine_digests["fp16"], "path": "x"},)
    )
    log = SQLiteStore(tmp_path / "moved.db")
    await log.open()
    await log.append(moved, deadline=Deadline.after(5))
    await log.close()
    reader = open_store(f"sqlite:///{tmp_path / 'moved.db'}", read_only=True)
    async with RegistryClient(load_registry_config(config)) as client:
        summary = await export_evidence(
            reader,
            Selection.workload("prod/resnet"),
            policies=[world.policies],
            evidence=RegistryEvidence(client),
            key=world.exporter,
            output=tmp_path / "down.tar.gz",
            deadline=Deadline.after(20),
        )
    assert summary.attestations == {} and summary.signatures == 0
    kinds = [problem.split(": ", 2)[1].split(" unavailable")[0] for problem in summary.problems]
    assert kinds == ["attestations", "signatures"]  # the subjects come with the attestations
    report = _verify(world, tmp_path / "down.tar.gz")
    assert report.ok, _messages(report, "fail")
    assert any("attestations unavailable from registry" in item for item in report.does_not_prove)


async def test_nothing_selected_is_an_input_error(world: World, tmp_path: Path) -> None:
    from verifier.errors import InputError  # noqa: PLC0415

    with pytest.raises(
        InputError, match=r"no decision .* matches: every decision about workload prod/nothing"
    ):
        await _export(world, Selection.workload("prod/nothing"), tmp_path / "none.tar.gz")
    assert not (tmp_path / "none.tar.gz").exists()


@pytest.mark.postgres
async def test_export_from_the_shared_postgresql_log(
    world: World, resnet_package: Path, pg_url: str, tmp_path: Path
) -> None:
    from verifier.deadline import Deadline  # noqa: PLC0415

    source = open_store(world.url, read_only=True)
    await source.open()
    writer = open_store(pg_url)
    await writer.open()
    for stored in await source.query(RecordQuery()):
        await writer.append(stored.record, deadline=Deadline.after(10))
    await writer.close()
    reader = open_store(pg_url, read_only=True)
    await reader.open()
    try:
        output = tmp_path / "pg.tar.gz"
        summary = await export_evidence(
            reader,
            Selection.workload("prod/resnet"),
            policies=[world.policies],
            evidence=LocalEvidence(world.attestations),
            key=world.exporter,
            output=output,
        )
    finally:
        await reader.close()
    assert (summary.decisions, summary.first_seq, summary.head_seq) == (4, 2, 9)
    report = _verify(world, output)
    assert report.ok, _messages(report, "fail")
    # The same records chain to the same hashes in either store.
    assert [(line["seq"], line["hash"]) for line in _records(output)] == [
        (line["seq"], line["hash"]) for line in _records(resnet_package)
    ]
    assert report.proves[0].endswith(f"from {reader.description}.")


# --- tampering ------------------------------------------------------------------------------------------


def _edit_record(seq: int, field: str, value: Any) -> Callable[..., None]:
    """Set ``record[field]`` of decision ``seq``; usable by :func:`_rewrite` and :func:`_reseal`."""

    def change(files: dict[str, bytes], *_: object) -> None:
        files[RECORDS] = _replace_record(
            files[RECORDS], seq, lambda line: line["record"].__setitem__(field, value)
        )

    return change


def test_a_changed_decision_fails_its_file_hash(world: World, resnet_package: Path, tmp_path: Path) -> None:
    tampered = _rewrite(resnet_package, tmp_path / "t.tar.gz", _edit_record(4, "allowed", True))
    report = _verify(world, tampered)
    assert not report.ok
    assert (
        "package: files changed (SHA-256 or size differ from the index): decisions/records.jsonl"
        in _messages(report, "fail")
    )
    assert report.proves == ()


def test_a_changed_decision_fails_its_chain_hash_even_when_signed_again(
    world: World, resnet_package: Path, tmp_path: Path
) -> None:
    tampered = _reseal(
        resnet_package, tmp_path / "t.tar.gz", world.exporter, _edit_record(4, "allowed", True)
    )
    report = _verify(world, tampered)
    assert "decisions: record seq 4 does not recompute to its hash: its content was changed" in _messages(
        report, "fail"
    )


def test_a_decision_removed_from_the_middle_breaks_the_chain(
    world: World, resnet_package: Path, tmp_path: Path
) -> None:
    def remove(files: dict[str, bytes], predicate: dict[str, Any]) -> None:
        kept = [raw for raw in files[RECORDS].splitlines() if json.loads(raw)["seq"] != 4]
        files[RECORDS] = b"\n".join(kept) + b"\n"
        predicate["selection"]["records"] = [2, 6, 7]
        predicate["log"]["records"] -= 1
        predicate["policy"]["decision_revisions"][0]["decisions"] -= 1

    report = _verify(world, _reseal(resnet_package, tmp_path / "t.tar.gz", world.exporter, remove))
    assert "decisions: records are missing from the segment chain: seq 4..4" in _messages(report, "fail")


def test_a_decision_left_out_of_the_selection_is_found(
    world: World, resnet_package: Path, tmp_path: Path
) -> None:
    def drop(files: dict[str, bytes], predicate: dict[str, Any]) -> None:
        predicate["selection"]["records"] = [2, 6, 7]
        predicate["policy"]["decision_revisions"][0]["decisions"] -= 1

    report = _verify(world, _reseal(resnet_package, tmp_path / "t.tar.gz", world.exporter, drop))
    assert "selection: decisions that match the rule were left out: seq 4" in _messages(report, "fail")


def test_a_swapped_build_manifest_is_not_about_the_engine(
    world: World, resnet_package: Path, tmp_path: Path
) -> None:
    fp16 = f"engines/{world.engine_digests['fp16'].replace(':', '-')}/build-manifest-1.dsse.json"
    other = (world.attestations / "engine-int8-calibrated.build-manifest.dsse.json").read_bytes()

    def swap(files: dict[str, bytes], *_: Any) -> None:
        files[fp16] = other

    outsider = _verify(world, _rewrite(resnet_package, tmp_path / "outsider.tar.gz", swap))
    assert f"package: files changed (SHA-256 or size differ from the index): {fp16}" in _messages(
        outsider, "fail"
    )
    insider = _verify(world, _reseal(resnet_package, tmp_path / "insider.tar.gz", world.exporter, swap))
    [failure] = _messages(insider, "fail")
    assert f"{fp16} is about sha256:{world.engine_files['int8-calibrated'][7:]}" in failure
    assert failure.endswith("not this engine")


def test_an_approval_signed_by_an_unknown_key_fails(
    world: World, resnet_package: Path, tmp_path: Path
) -> None:
    path = f"engines/{world.engine_digests['fp16'].replace(':', '-')}/change-approval-1.dsse.json"

    def forge(files: dict[str, bytes], *_: Any) -> None:
        envelope = Envelope.from_json(files[path])
        files[path] = sign_statement(statement_from_envelope(envelope), generate_private_key()).to_json()

    report = _verify(world, _reseal(resnet_package, tmp_path / "t.tar.gz", world.exporter, forge))
    assert _messages(report, "fail") == [
        f"engines: engine {world.engine_digests['fp16'][:19]}…: change-approval {path} is not signed by a "
        "key of the included TrustedKeys"
    ]


def test_a_changed_policy_file_no_longer_recomputes_its_revision(
    world: World, resnet_package: Path, tmp_path: Path
) -> None:
    def edit(files: dict[str, bytes], *_: Any) -> None:
        files["policies/policies/signed-images.yaml"] += b"\n# changed\n"

    report = _verify(world, _reseal(resnet_package, tmp_path / "t.tar.gz", world.exporter, edit))
    [failure] = _messages(report, "fail")
    assert failure.startswith("policy: the included policy files recompute to revision sha256:")


@pytest.mark.parametrize("member", [INDEX, SIGNATURE])
def test_a_flipped_byte_in_the_index_or_its_signature_fails(
    world: World, resnet_package: Path, tmp_path: Path, member: str
) -> None:
    def flip(members: dict[str, bytes]) -> None:
        if member == INDEX:
            data = bytearray(members[INDEX])
            data[data.index(b'"sha256": "') + 11] ^= 0x01
            members[INDEX] = bytes(data)
        else:
            document = json.loads(members[SIGNATURE])
            signature = bytearray(base64.b64decode(document["signatures"][0]["sig"]))
            signature[10] ^= 0x01
            document["signatures"][0]["sig"] = base64.b64encode(bytes(signature)).decode()
            members[SIGNATURE] = json.dumps(document).encode()

    report = _verify(world, _rewrite(resnet_package, tmp_path / "t.tar.gz", flip))
    failures = _messages(report, "fail")
    expected = (
        "package: index.json is not the index that was signed (it was changed or replaced)"
        if member == INDEX
        else "package: the index signature does not verify with the given key"
    )
    assert any(f.startswith(expected) for f in failures), failures
    assert report.proves == ()
    assert report.does_not_prove[0].startswith("Anything")


def test_an_extra_file_fails(world: World, resnet_package: Path, tmp_path: Path) -> None:
    def add(members: dict[str, bytes]) -> None:
        members["engines/note.txt"] = b"trust me\n"

    report = _verify(world, _rewrite(resnet_package, tmp_path / "t.tar.gz", add))
    assert _messages(report, "fail") == [
        "package: files in the archive but not in the index: engines/note.txt"
    ]


def test_another_key_verifies_nothing(world: World, resnet_package: Path) -> None:
    report = verify_evidence(resnet_package, generate_private_key().public_key())
    assert not report.ok
    assert report.proves == ()


# --- anchors: what the chain alone cannot show -------------------------------------------------------------


async def _truncated_copy(world: World, target: Path, keep: int) -> None:
    """A log whose last records were removed: the same records replayed, fewer of them. Its chain verifies."""
    source = open_store(world.url, read_only=True)
    await source.open()
    records = [stored.record for stored in await source.query(RecordQuery(limit=keep))]
    copy = SQLiteStore(target)
    await copy.open()
    from verifier.deadline import Deadline  # noqa: PLC0415

    for record in records:
        await copy.append(record, deadline=Deadline.after(5))
    await copy.close()
    assert (await open_store(f"sqlite:///{target}", read_only=True).verify()).ok


def _head(world: World) -> Anchor:
    report = asyncio.run(open_store(world.url, read_only=True).verify())
    return Anchor(report.head_seq, report.head_hash)


def test_an_anchor_inside_the_chain_is_checked(world: World, resnet_package: Path) -> None:
    head = _head(world)
    report = _verify(world, resnet_package, anchors=[head])
    assert report.ok
    assert "anchors: anchor seq 9 matches: the log agreed with your record there" in _messages(report, "pass")
    wrong = _verify(world, resnet_package, anchors=[Anchor(7, "0" * 64)])
    assert any("anchor seq 7: the package's record hashes to" in m for m in _messages(wrong, "fail"))
    before = _verify(world, resnet_package, anchors=[Anchor(1, head.hash)])
    assert any("anchor seq 1 cannot be checked" in m for m in _messages(before, "fail"))


def test_a_truncated_log_verifies_on_its_own_but_not_against_an_anchor(world: World, tmp_path: Path) -> None:
    anchor = _head(world)
    truncated = World(**{**world.__dict__, "log": tmp_path / "truncated.db"})
    asyncio.run(_truncated_copy(world, truncated.log, keep=7))
    output = tmp_path / "truncated.tar.gz"
    asyncio.run(_export(truncated, Selection.workload("prod/resnet"), output))
    assert _verify(truncated, output).ok  # the limit the package documents
    report = _verify(truncated, output, anchors=[anchor])
    [failure] = _messages(report, "fail")
    assert "anchor seq 9 lies beyond the log head at export (seq 7" in failure
    assert "records were removed from the end of the log" in failure


# --- the command line -----------------------------------------------------------------------------------


def _cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    status = main(["evidence", *map(str, args)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _export_args(world: World, output: Path, *selection: str) -> list[str]:
    return [
        "export",
        *selection,
        "--decision-log",
        world.url,
        "--policies",
        str(world.policies),
        "--attestations",
        str(world.attestations),
        "--key",
        str(world.key_file),
        "--password-file",
        str(world.password_file),
        "-o",
        str(output),
    ]


def test_cli_export_then_verify(world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "cli.tar.gz"
    status, out, _ = _cli(capsys, *_export_args(world, output, "--workload", "prod/resnet"))
    assert status == 0
    assert f"wrote {output}" in out
    assert "decisions: 4 selected" in out
    assert "chain: segment, 8 record(s) seq 2..9 (log head at export: seq 9)" in out
    assert "in force for every selected decision" in out
    status, out, _ = _cli(capsys, "verify", output, "--key", world.public_key)
    assert status == 0, out
    assert out.splitlines()[-1] == "VERIFIED: every check passed"
    assert "PASS  decisions" in out and "Does not prove:" in out
    status, out, _ = _cli(capsys, "verify", output, "--key", world.public_key, "--format", "json")
    assert status == 0 and json.loads(out)["ok"] is True
    # The same output again is refused, then replaced with --force.
    status, _, err = _cli(capsys, *_export_args(world, output, "--workload", "prod/resnet"))
    assert status == 2 and "refusing to overwrite" in err
    status, _, _ = _cli(capsys, *_export_args(world, output, "--workload", "prod/resnet"), "--force")
    assert status == 0


class _ClosingSpy:
    """A real store that notes whether it was closed."""

    def __init__(self, store: DecisionStore) -> None:
        self.store = store
        self.closed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def close(self) -> None:
        self.closed = True
        await self.store.close()


def test_cli_export_closes_the_log_when_the_evidence_source_fails(
    world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[_ClosingSpy] = []

    def spying_open_store(url: str, **options: Any) -> _ClosingSpy:
        opened.append(_ClosingSpy(open_store(url, **options)))
        return opened[-1]

    monkeypatch.setattr(decisionlog, "open_store", spying_open_store)
    args = _export_args(world, tmp_path / "x.tar.gz", "--workload", "prod/resnet")
    args[args.index("--attestations") + 1] = str(tmp_path / "absent")
    status, _, err = _cli(capsys, *args)
    assert status == 2 and "absent does not exist" in err
    assert [spy.closed for spy in opened] == [True]


def test_cli_verify_exits_1_naming_the_failure(
    world: World, resnet_package: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tampered = _reseal(
        resnet_package, tmp_path / "t.tar.gz", world.exporter, _edit_record(6, "user", "mallory")
    )
    status, out, _ = _cli(capsys, "verify", tampered, "--key", world.public_key)
    assert status == 1
    assert "FAIL  decisions  record seq 6 does not recompute to its hash" in out
    assert out.splitlines()[-1].startswith("FAILED: 1 check(s) failed; first: record seq 6")


def test_cli_usage_errors_exit_2(world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = _cli(capsys, *_export_args(world, tmp_path / "x.tar.gz", "--workload", "resnet"))
    assert status == 2 and "expected NAMESPACE/NAME" in err
    status, _, err = _cli(capsys, *_export_args(world, tmp_path / "x.tar.gz", "--engine", "sha256:abc"))
    assert status == 2 and "is not a SHA-256 digest" in err
    status, _, err = _cli(capsys, "verify", world.public_key, "--key", world.public_key)
    assert status == 2 and "not a readable tar.gz archive" in err
    status, _, err = _cli(capsys, "verify", tmp_path / "x.tar.gz", "--key", world.public_key, "--anchor", "7")
    assert status == 2 and "is not SEQ:HASH" in err


def test_cli_refuses_to_export_from_a_broken_log(
    world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.db"
    shutil.copy(world.log, broken)
    with sqlite3.connect(broken) as conn:
        conn.execute("DROP TRIGGER trtguard_decisions_no_update")
        conn.execute(
            "UPDATE trtguard_decisions SET body = replace(body, 'kubernetes-admin', 'mallory') WHERE seq = 4"
        )
    args = _export_args(world, tmp_path / "x.tar.gz", "--workload", "prod/resnet")
    args[args.index("--decision-log") + 1] = f"sqlite:///{broken}"
    status, _, err = _cli(capsys, *args)
    assert status == 1
    assert "the decision log does not verify" in err and "chain broken at record seq 4" in err
    assert not (tmp_path / "x.tar.gz").exists()

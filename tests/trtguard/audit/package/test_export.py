"""trtguard/audit/package/export.py: packages exported from a real decision log by each selection and chain
scope, with and without evidence, from SQLite and PostgreSQL; each one verifies."""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import shutil
import socket
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from decisionlog import DecisionRecord, RecordQuery, SQLiteStore, open_store
from decisionlog._record_check import is_record
from tests.trtguard.audit.package.world import (
    World,
    export_package,
    messages,
    read_members,
    record_lines,
    signed_predicate,
    verify_package,
)
from trtguard.audit.package import ChainScope, Selection, export_evidence_package
from trtguard.audit.package.contents import SIGNATURE
from verifier.crypto._dsse import Envelope
from verifier.evidence_folder import LocalEvidence


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


async def test_export_reads_each_record_of_the_log_once(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The one pass that verifies the chain hands the records on: each is checked as a record once (by its
    # types, without building it: decisionlog._record_check), none read (or decoded) a second time.
    checked: list[str] = []
    built: list[str] = []
    real = DecisionRecord.from_json.__func__  # type: ignore[attr-defined]

    def counted_check(data: Mapping[str, object]) -> bool:
        checked.append(str(data["uid"]))
        return is_record(data)

    def counted(cls: type[DecisionRecord], data: dict[str, object]) -> DecisionRecord:
        built.append(str(data["uid"]))
        return real(cls, data)  # type: ignore[no-any-return]

    monkeypatch.setattr("decisionlog._chain.is_record", counted_check)
    monkeypatch.setattr(DecisionRecord, "from_json", classmethod(counted))
    summary = await export_package(world, Selection.workload("prod/resnet"), tmp_path / "once.tar.gz")
    assert (summary.first_seq, summary.head_seq) == (2, 9)
    assert len(checked) == len(set(checked)) == 9  # the whole log; the segment (seq 2 to 9) not again
    assert built == []  # every record checked by its types: none built
    monkeypatch.undo()
    report = verify_package(world, tmp_path / "once.tar.gz")
    assert report.ok, messages(report, "fail")


def test_export_is_reproducible(world: World, resnet_package: Path, tmp_path: Path) -> None:
    again = tmp_path / "again.tar.gz"
    asyncio.run(export_package(world, Selection.workload("prod/resnet"), again))
    # ECDSA signatures are randomised; everything else is byte for byte the same.
    first, second = read_members(resnet_package), read_members(again)
    assert {k: v for k, v in first.items() if k != SIGNATURE} == {
        k: v for k, v in second.items() if k != SIGNATURE
    }
    assert Envelope.from_json(first[SIGNATURE]).payload == Envelope.from_json(second[SIGNATURE]).payload


async def test_engine_selection_holds_its_real_admissions_across_workloads(
    world: World, tmp_path: Path
) -> None:
    output = tmp_path / "engine.tar.gz"
    summary = await export_package(world, Selection.engine(world.engine_digests["fp16"]), output)
    assert (summary.decisions, summary.first_seq, summary.last_seq) == (2, 2, 9)
    members = read_members(output)
    assert signed_predicate(members)["selection"]["records"] == [2, 3]  # the dry runs (5, 6) admitted nothing
    report = verify_package(world, output)
    assert report.ok, messages(report, "fail")
    assert any("every real (not dry-run) admission" in m for m in messages(report, "pass"))


async def test_audit_id_selection_follows_the_build_manifests(world: World, tmp_path: Path) -> None:
    output = tmp_path / "audit.tar.gz"
    summary = await export_package(world, Selection.audit_id("DEMO-int8-calibrated"), output)
    assert summary.decisions == 3
    assert signed_predicate(read_members(output))["selection"]["records"] == [7, 8, 9]
    report = verify_package(world, output)
    assert report.ok, messages(report, "fail")
    assert any("DEMO-int8-calibrated" in item for item in report.does_not_prove)


async def test_full_chain_starts_at_genesis(world: World, tmp_path: Path) -> None:
    output = tmp_path / "full.tar.gz"
    await export_package(world, Selection.workload("prod/other"), output, chain=ChainScope.FULL)
    assert [line["seq"] for line in record_lines(output)] == list(range(1, 10))
    report = verify_package(world, output)
    assert report.ok, messages(report, "fail")
    assert any("from the genesis record to the exported head (seq 9)" in m for m in messages(report, "pass"))
    assert not any("records before seq" in item for item in report.does_not_prove)


async def test_selected_chain_keeps_other_workloads_out_and_says_what_that_costs(
    world: World, tmp_path: Path
) -> None:
    output = tmp_path / "selected.tar.gz"
    await export_package(world, Selection.workload("prod/resnet"), output, chain=ChainScope.SELECTED)
    lines = record_lines(output)
    assert [line["seq"] for line in lines] == [2, 4, 6, 7]
    assert {line["record"]["name"] for line in lines} == {"resnet"}
    report = verify_package(world, output)
    assert report.ok, messages(report, "fail")
    assert "selection: completeness cannot be checked: only the selected records are included" in messages(
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
    summary = await export_package(world, Selection.workload("prod/resnet"), output, policies=edited)
    assert summary.policy_in_force is False
    report = verify_package(world, output)
    assert report.ok, messages(report, "fail")
    [note] = [m for m in messages(report, "note") if m.startswith("policy:")]
    assert "not the ones these decisions name" in note and "(4 decisions)" in note
    assert any(
        "policies in force for the decisions naming other revisions" in i for i in report.does_not_prove
    )


async def test_without_an_evidence_source_the_package_says_what_is_missing(
    world: World, tmp_path: Path
) -> None:
    output = tmp_path / "bare.tar.gz"
    summary = await export_package(world, Selection.workload("prod/resnet"), output, evidence=False)
    assert summary.engines == 3 and not summary.attestations
    assert all("no evidence source was given" in problem for problem in summary.problems)
    report = verify_package(world, output)
    assert report.ok, messages(report, "fail")
    assert any("has no build manifest" in m for m in messages(report, "note"))


async def test_a_registry_that_is_down_is_recorded_not_hidden(world: World, tmp_path: Path) -> None:
    from verifier.base._deadline import Deadline  # noqa: PLC0415
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
    runtime = f"{host}/inference/runtime@sha256:{'ab' * 32}"
    moved = dataclasses.replace(
        stored.record,
        engines=({"reference": engine, "digest": world.engine_digests["fp16"], "path": "x"},),
        images=({"reference": runtime, "digest": f"sha256:{'ab' * 32}", "path": "y"},),
    )
    log = SQLiteStore(tmp_path / "moved.db")
    await log.open()
    await log.append(moved, deadline=Deadline.after(5))
    await log.close()
    reader = open_store(f"sqlite:///{tmp_path / 'moved.db'}", read_only=True)
    async with RegistryClient(load_registry_config(config)) as client:
        summary = await export_evidence_package(
            reader,
            Selection.workload("prod/resnet"),
            policies=[world.policies],
            evidence=RegistryEvidence(client),
            key=world.exporter,
            output=tmp_path / "down.tar.gz",
            deadline=Deadline.after(20),
        )
    assert summary.attestations == {} and summary.signatures == 0
    kinds = [
        (problem.split(" ")[0], problem.split(": ", 2)[1].split(" unavailable")[0])
        for problem in summary.problems
    ]
    # The subjects come with the attestations; of an image only the signatures are looked up.
    assert kinds == [("engine", "attestations"), ("engine", "signatures"), ("image", "signatures")]
    report = verify_package(world, tmp_path / "down.tar.gz")
    assert report.ok, messages(report, "fail")
    assert any("attestations unavailable from registry" in item for item in report.does_not_prove)


async def test_nothing_selected_is_an_input_error(world: World, tmp_path: Path) -> None:
    from verifier.base._errors import InputError  # noqa: PLC0415

    with pytest.raises(
        InputError, match=r"no decision .* matches: every decision about workload prod/nothing"
    ):
        await export_package(world, Selection.workload("prod/nothing"), tmp_path / "none.tar.gz")
    assert not (tmp_path / "none.tar.gz").exists()


async def test_a_full_disk_under_the_records_spool_is_an_input_error_and_leaves_nothing(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack 36b: ENOSPC on the records' spool (written on its own thread) ended the export, and
    `trtguard evidence export`, in an OSError traceback."""
    from verifier.base._errors import InputError  # noqa: PLC0415

    made = tempfile.TemporaryFile

    class Full:
        """The spool's file on a volume with no room left."""

        def __init__(self, **options: Any) -> None:
            self._file = made(**options)

        def write(self, data: bytes) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name: str) -> Any:
            return getattr(self._file, name)

        def __enter__(self) -> Full:
            return self

        def __exit__(self, *raised: object) -> None:
            self._file.close()

    monkeypatch.setattr(tempfile, "TemporaryFile", Full)
    output = tmp_path / "full" / "resnet.tar.gz"
    output.parent.mkdir()
    with pytest.raises(InputError, match="cannot write the archive: No space left on device") as caught:
        await export_package(world, Selection.workload("prod/resnet"), output)
    assert "free space" in (caught.value.hint or "")
    assert list(output.parent.iterdir()) == []


@pytest.mark.postgres
async def test_export_from_the_shared_postgresql_log(
    world: World, resnet_package: Path, pg_url: str, tmp_path: Path
) -> None:
    from verifier.base._deadline import Deadline  # noqa: PLC0415

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
        summary = await export_evidence_package(
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
    report = verify_package(world, output)
    assert report.ok, messages(report, "fail")
    # The same records chain to the same hashes in either store.
    assert [(line["seq"], line["hash"]) for line in record_lines(output)] == [
        (line["seq"], line["hash"]) for line in record_lines(resnet_package)
    ]
    assert report.proves[0].endswith(f"from {reader.description}.")

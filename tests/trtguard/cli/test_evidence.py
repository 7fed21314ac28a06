"""trtguard/cli/evidence.py: ``trtguard evidence export`` and ``verify`` on a real decision log (the world of
tests/trtguard/audit/package)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import decisionlog
from decisionlog import DecisionStore, open_store
from tests.trtguard.audit.package.world import (
    World,
    edit_record,
    export_package,
    make_world,
    reseal,
)
from trtguard.audit.package import Selection
from trtguard.cli import main


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(tmp_path_factory.mktemp("evidence"))


@pytest.fixture(scope="module")
def resnet_package(world: World, tmp_path_factory: pytest.TempPathFactory) -> Path:
    output = tmp_path_factory.mktemp("packages") / "resnet.tar.gz"
    asyncio.run(export_package(world, Selection.workload("prod/resnet"), output))
    return output


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
    tampered = reseal(
        resnet_package, tmp_path / "t.tar.gz", world.exporter, edit_record(6, "user", "mallory")
    )
    status, out, _ = _cli(capsys, "verify", tampered, "--key", world.public_key)
    assert status == 1
    assert "FAIL  decisions  record seq 6 does not recompute to its hash" in out
    assert out.splitlines()[-1].startswith("FAILED: 1 check(s) failed; first: record seq 6")


def test_cli_usage_errors_exit_2(world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = _cli(capsys, *_export_args(world, tmp_path / "x.tar.gz", "--workload", "resnet"))
    assert status == 2 and "expected NAMESPACE/KIND/NAME or NAMESPACE/NAME" in err
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

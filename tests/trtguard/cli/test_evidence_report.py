"""trtguard/cli/evidence.py: ``trtguard evidence report`` on packages that ``evidence export`` wrote from a
real decision log (the world of tests/trtguard/audit/package)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.trtguard.audit.package.world import World, edit_record, make_world, rewrite
from trtguard.cli import main


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(tmp_path_factory.mktemp("evidence-report"))


@pytest.fixture(scope="module")
def package(world: World, tmp_path_factory: pytest.TempPathFactory) -> Path:
    output = tmp_path_factory.mktemp("packages") / "resnet.tar.gz"
    status = main(
        [
            "evidence", "export", "--workload", "prod/resnet",
            "--decision-log", world.url, "--policies", str(world.policies),
            "--attestations", str(world.attestations),
            "--key", str(world.key_file), "--password-file", str(world.password_file),
            "-o", str(output),
        ]
    )  # fmt: skip
    assert status == 0
    return output


def _report(capsys: pytest.CaptureFixture[str], world: World, *args: str | Path) -> tuple[int, str, str]:
    status = main(["evidence", "report", *map(str, args), "--key", str(world.public_key)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_a_verified_package_writes_its_report_and_exits_0(
    world: World, package: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "report.html"

    status, out, _ = _report(capsys, world, package, "-o", output)

    assert status == 0
    assert out == f"wrote {output}: package VERIFIED\n"
    assert "VERIFIED: every check of this package passed." in output.read_text()


def test_a_tampered_package_writes_a_failed_report_and_exits_1(
    world: World, package: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tampered = rewrite(package, tmp_path / "tampered.tar.gz", edit_record(4, "allowed", True))
    output = tmp_path / "report.html"

    status, out, _ = _report(capsys, world, tampered, "-o", output)

    assert status == 1
    assert out.startswith(f"wrote {output}: package FAILED (")
    assert "VERIFICATION FAILED" in output.read_text()


def test_an_existing_report_is_kept_without_force(
    world: World, package: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "report.html"
    output.write_text("keep me")

    status, _, err = _report(capsys, world, package, "-o", output)

    assert status == 2
    assert "already exists" in err and "--force" in err
    assert output.read_text() == "keep me"
    assert _report(capsys, world, package, "-o", output, "--force")[0] == 0


def test_a_file_that_is_no_package_is_an_input_error(
    world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    not_a_package = tmp_path / "notes.tar.gz"
    not_a_package.write_bytes(b"not gzip")

    status, _, err = _report(capsys, world, not_a_package, "-o", tmp_path / "report.html")

    assert status == 2 and err.startswith("trtguard: error:")
    assert not (tmp_path / "report.html").exists()

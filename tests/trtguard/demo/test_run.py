"""trtguard/demo/_run.py: the README's first command, end to end (real server, real TLS, real signatures)."""

from __future__ import annotations

import dataclasses
import io
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trtguard.demo import _run as demo
from trtguard.demo.material import Material
from verifier.base._errors import TrtguardError


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_the_demo_admits_one_and_denies_four_with_reasons(tmp_path: Path) -> None:
    out = io.StringIO()
    port = _free_port()  # the port asked for (`make demo DEMO_PORT=…`, issue 28 item 9)
    assert demo.run(tmp_path / "demo", port=port, out=out) == 0
    text = out.getvalue()
    assert f"trtguard serve is listening on https://127.0.0.1:{port} " in text
    # Where the command is, since `make demo` puts nothing on PATH (issue 28 item 2).
    assert f"the trtguard command is {Path(sys.executable).with_name('trtguard')}" in text
    assert text.count("-> ALLOWED") == 1
    assert text.count("-> DENIED (403 PolicyViolation)") == 4
    flat = " ".join(text.split())
    for phrase in (
        "not pinned by digest",
        "not allowed by any image rule",
        "build manifest not signed",
        "no calibration evidence",
    ):
        assert phrase in flat
    assert "!!" not in text
    assert re.search(r"chain verified: 5 records", text)
    assert "trtguard audit tail --decision-log sqlite:///" in text
    assert (tmp_path / "demo" / "tls" / "ca.crt").is_file()
    # It ends with the report of its own decisions, from a package that verified.
    report = tmp_path / "demo" / "evidence-report.html"
    assert f"its report: {report}" in text
    assert "(verified)" in text
    page = report.read_text()
    assert "VERIFIED: every check of this package passed." in page
    assert page.count("PolicyViolation") == 4  # the four denials of the demo, with their reasons


def test_the_demo_reports_an_unexpected_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original = demo.scenarios

    def wrong(material: Material) -> list[demo.Scenario]:
        cases = original(material)
        return [dataclasses.replace(cases[4], allowed=True), *cases[:1]]

    monkeypatch.setattr(demo, "scenarios", wrong)
    out = io.StringIO()
    assert demo.run(tmp_path / "demo", out=out) == 1
    assert "!! expected an admission" in out.getvalue()
    assert "demo FAILED: 1 unexpected verdict(s)" in out.getvalue()


def test_a_server_that_prints_nothing_does_not_hold_the_demo(tmp_path: Path) -> None:
    """The wait for the listening line ends at its timeout, whatever the child does with its stdout."""
    silent = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], stdout=subprocess.PIPE, text=True
    )
    try:
        started = time.monotonic()
        with pytest.raises(TrtguardError, match="did not start within 1 s"):
            demo._wait_for_start(silent, tmp_path / "serve.log", timeout=1.0)
        assert time.monotonic() - started < 5
    finally:
        silent.kill()
        silent.wait()


def test_a_workdir_that_is_a_file_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Attack 28 finding 4 (the same family): `--workdir FILE` crashed with FileExistsError."""
    workdir = tmp_path / "a-file"
    workdir.write_text("")
    assert demo.main(["--workdir", str(workdir)]) == 2
    assert (
        capsys.readouterr().err == f"trtguard demo: error: {workdir}: --workdir names a file, not a folder\n"
    )

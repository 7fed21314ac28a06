"""tests/support/snapshots.py: the command line's output, captured; a changed snapshot shown as a diff."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.snapshots import UPDATE, assert_snapshot, cli_output


def test_help_is_captured_at_a_fixed_width() -> None:
    text = cli_output(["--help"])
    assert text.startswith("usage: trtguard")
    assert max(map(len, text.splitlines())) <= 100


def test_a_failing_command_is_not_a_snapshot() -> None:
    with pytest.raises(AssertionError, match="exited 2"):
        cli_output(["schema", "nothing"])


def test_a_changed_output_fails_with_its_diff_and_is_rewritten_on_demand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "900-x.txt").write_text("one\ntwo\n")
    assert_snapshot("one\ntwo\n", "900-x.txt", tmp_path)
    with pytest.raises(AssertionError, match=r"900-x.txt changed") as failure:
        assert_snapshot("one\nthree\n", "900-x.txt", tmp_path)
    assert "-two\n+three" in str(failure.value)
    monkeypatch.setenv(UPDATE, "1")
    assert_snapshot("one\nthree\n", "900-x.txt", tmp_path)
    assert (tmp_path / "900-x.txt").read_text() == "one\nthree\n"
    with pytest.raises(AssertionError, match="no snapshot"):
        monkeypatch.setenv(UPDATE, "0")
        assert_snapshot("", "901-missing.txt", tmp_path)

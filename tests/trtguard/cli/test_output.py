"""trtguard/cli/_output.py: every command that writes a file checks the path before it does any work and
writes through a temporary file renamed into place (attack 28 finding 4: `demo engine`, `check -o`,
`policy test --junit` and `evidence report -o` crashed with a traceback, `demo engine --onnx` after the plan
was already written; `evidence export -o DIR`, `serve --self-signed FILE` and `fetch-attestations -o` under
/proc did too)."""

from __future__ import annotations

import contextlib
import io
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from trtguard.cli import main
from trtguard.cli._output import Output, check_output, write_output, write_outputs
from verifier.base import InputError

REPO = Path(__file__).parents[3]
CHANGE_CONTROL_TESTS = REPO / "policies" / "library" / "tests" / "change-control"


def cli(*argv: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([str(a) for a in argv])
    return status, out.getvalue(), err.getvalue()


def _material(folder: Path) -> dict[str, Path]:
    """What the commands read: a stand-in engine and model, a key, a manifest, a predicate."""
    assert cli("demo", "engine", folder / "m.plan", "--onnx", folder / "m.onnx")[0] == 0
    assert cli("keygen", "--output", folder / "k")[0] == 0
    (folder / "pod.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: busybox}]\n"
    )
    (folder / "predicate.json").write_text("{}")
    (folder / "policies").mkdir()
    return {
        "plan": folder / "m.plan",
        "onnx": folder / "m.onnx",
        "key": folder / "k.key",
        "pub": folder / "k.pub",
        "pod": folder / "pod.yaml",
        "predicate": folder / "predicate.json",
        "policies": folder / "policies",
    }


#: (what the message calls the file, the command with OUT where the path goes), given the material.
COMMANDS: dict[str, tuple[str, Callable[[dict[str, Path]], list[object]]]] = {
    "demo engine": ("the plan", lambda m: ["demo", "engine", "OUT"]),
    "demo engine --onnx": (
        "the ONNX model",
        lambda m: ["demo", "engine", m["plan"], "--onnx", "OUT", "--force"],
    ),
    "check -o": ("the report", lambda m: ["check", m["pod"], "--policies", m["policies"], "-o", "OUT"]),
    "policy test --junit": (
        "the JUnit report",
        lambda m: ["policy", "test", CHANGE_CONTROL_TESTS, "--junit", "OUT"],
    ),
    "keygen": ("the private key", lambda m: ["keygen", "--output", "OUT"]),
    "attest -o": (
        "the envelope",
        lambda m: [
            *("attest", "--predicate", m["predicate"], "--type", "https://example.com/t/v1"),
            *("--subject", m["plan"], "--key", m["key"], "-o", "OUT"),
        ],
    ),
    "manifest create -o": (
        "the output",
        lambda m: [
            *("manifest", "create", "--engine", m["plan"], "--onnx", m["onnx"]),
            *("--allow-incomplete", "-o", "OUT"),
        ],
    ),
    "evidence export -o": (
        "the package",
        lambda m: [
            *("evidence", "export", "--audit-id", "X", "--policies", m["policies"]),
            *("--key", m["key"], "-o", "OUT"),
        ],
    ),
    "evidence report -o": (
        "the report",
        lambda m: ["evidence", "report", m["plan"], "--key", m["pub"], "-o", "OUT"],
    ),
    "audit backup --to": (
        "the backup",
        lambda m: ["audit", "backup", "--decision-log", "sqlite:///x.db", "--to", "OUT"],
    ),
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_missing_folder_is_one_line_and_exit_2_before_any_work(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRTGUARD_PASSWORD", "pw")
    material = _material(tmp_path)
    what, command = COMMANDS[name]
    out = tmp_path / "absent" / "out.file"
    argv = [out if word == "OUT" else word for word in command(material)]
    status, _, err = cli(*argv)
    shown = Path(f"{out}.key") if name == "keygen" else out
    assert status == 2, (name, err)
    assert (
        err == f"trtguard: error: {shown}: {what} cannot be written: the folder {out.parent} does not exist\n"
    )
    assert not out.parent.exists()


@pytest.mark.parametrize("name", sorted(set(COMMANDS) - {"keygen"}))
def test_a_folder_as_the_output_is_refused(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRTGUARD_PASSWORD", "pw")
    material = _material(tmp_path)
    what, command = COMMANDS[name]
    folder = tmp_path / "a-folder"
    folder.mkdir()
    argv = [folder if word == "OUT" else word for word in command(material)]
    status, _, err = cli(*argv, *(["--force"] if name.startswith("evidence") else []))
    assert status == 2, (name, err)
    assert err == f"trtguard: error: {folder}: {what} cannot be written: it is a folder\n"
    assert list(folder.iterdir()) == []


@pytest.mark.skipif(not Path("/proc/version").is_file(), reason="needs Linux /proc")
def test_a_folder_where_no_file_can_be_created_is_refused() -> None:
    with pytest.raises(InputError, match=r"no file can be created in /proc"):
        check_output(Path("/proc/version"), "the plan")


def test_self_signed_and_fetch_name_a_path_they_cannot_use(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    policy = REPO / "policies" / "library" / "trusted-base-images.yaml"
    status, _, err = cli("serve", "--policies", policy, "--self-signed", tmp_path / "a-file", "--port", "1")
    last = err.splitlines()[-1]
    assert (
        status == 2
        and last == f"trtguard: error: {tmp_path / 'a-file'}: --self-signed names a file, not a folder"
    )
    pod = tmp_path / "pod.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: busybox}]}\n"
    )
    status, _, err = cli("fetch-attestations", pod, "-o", tmp_path / "a-file" / "sub")
    assert status == 2 and "cannot make the folder" in err and "Traceback" not in err


def test_all_files_are_written_or_none(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "gone" / "second"
    with pytest.raises(InputError, match="cannot write the second file"):
        write_outputs([Output(first, b"1", "the first file"), Output(second, b"2", "the second file")])
    assert list(tmp_path.iterdir()) == []  # the first was not placed, no temporary file is left


def test_exclusive_never_replaces_and_removes_what_it_placed(tmp_path: Path) -> None:
    new, kept = tmp_path / "new", tmp_path / "kept"
    kept.write_bytes(b"keep me")
    with pytest.raises(InputError, match="the second already exists"):
        write_outputs([Output(new, b"1", "the first"), Output(kept, b"2", "the second")], exclusive=True)
    assert kept.read_bytes() == b"keep me" and sorted(tmp_path.iterdir()) == [kept]


def test_modes_are_the_given_one_or_what_open_would_give(tmp_path: Path) -> None:
    mask = os.umask(0o022)
    try:
        write_output(tmp_path / "plain", b"x", "a file")
        write_output(tmp_path / "secret", b"x", "a key", mode=0o600)
    finally:
        os.umask(mask)
    assert stat.S_IMODE((tmp_path / "plain").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "secret").stat().st_mode) == 0o600

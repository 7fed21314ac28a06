"""trtguard/cli/approve.py: an approval names the engine file's digest, and ``approve`` refuses the digests
it can recognise as wrong (issue 28 item 7): the artifact digest of ``--push REF``, another engine than the
one that artifact carries, and an artifact reference given as the digest. A real registry holds the artifact.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
from pathlib import Path

import pytest

from tests.support.localregistry import LocalRegistry
from trtguard.cli import main
from verifier.crypto._keys import encrypt_private_key, generate_private_key

PASSWORD = "approve test"


def cli(*argv: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([str(a) for a in argv])
    return status, out.getvalue(), err.getvalue()


@pytest.fixture
def pushed(registry: LocalRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """An engine file pushed as an engine artifact; returns the file and the artifact's digest reference."""
    config = tmp_path / "registries.yaml"
    config.write_text(f'registries:\n  "{registry.host}":\n    plain_http: true\n')
    monkeypatch.setenv("TRTGUARD_REGISTRY_CONFIG", str(config))
    monkeypatch.setenv("TRTGUARD_PASSWORD", PASSWORD)
    (tmp_path / "alice.key").write_bytes(encrypt_private_key(generate_private_key(), PASSWORD.encode()))
    engine = tmp_path / "model.plan"
    engine.write_bytes(b"an engine for the approve tests")
    status, out, err = cli("push-engine", engine, "--to", f"{registry.host}/approve/engine:v1")
    assert status == 0, err
    return engine, out.strip()


def approve(digest: object, push: str, folder: Path, *extra: object) -> tuple[int, str, str]:
    return cli(
        "approve", digest, "--audit-id", "CHG-1", "--changes", "FirstInt8", "--approver", "alice@corp",
        "--key", folder / "alice.key", "--push", push, *extra,
    )  # fmt: skip


def test_the_artifact_digest_is_refused_naming_the_engine_file(pushed: tuple[Path, str]) -> None:
    engine, reference = pushed
    artifact = reference.split("@")[1]
    engine_file = "sha256:" + hashlib.sha256(engine.read_bytes()).hexdigest()
    status, _, err = approve(artifact, reference, engine.parent)
    assert status == 2
    assert f"{artifact} is the digest of the artifact {reference} (its OCI manifest)" in err
    assert f"approvals name the engine file {engine_file}" in err and f"approve {engine_file}" in err


def test_the_artifact_digest_is_recognised_when_push_names_a_tag(
    registry: LocalRegistry, pushed: tuple[Path, str]
) -> None:
    """Attack 28 finding 6a: with --push REPO:TAG the artifact digest was taken for another engine file
    ("carries the engine file …, not sha256:<artifact>"); it is named as the artifact's digest."""
    engine, reference = pushed
    artifact = reference.split("@")[1]
    engine_file = "sha256:" + hashlib.sha256(engine.read_bytes()).hexdigest()
    tagged = f"{registry.host}/approve/engine:v1"
    status, _, err = approve(artifact, tagged, engine.parent)
    assert status == 2, err
    assert (
        f"{artifact} is the digest of the artifact {tagged} (its OCI manifest), not of the engine file it "
        f"carries; approvals name the engine file {engine_file}"
    ) in err
    assert "carries the engine file" not in err.replace("not of the engine file it carries", "")


def test_another_engine_than_the_artifact_carries_is_refused(pushed: tuple[Path, str]) -> None:
    engine, reference = pushed
    status, _, err = approve("sha256:" + "ab" * 32, reference, engine.parent)
    carried = hashlib.sha256(engine.read_bytes()).hexdigest()
    assert status == 2 and f"carries the engine file sha256:{carried}" in err


def test_an_artifact_reference_is_no_engine_digest(pushed: tuple[Path, str]) -> None:
    engine, reference = pushed
    status, _, err = approve(reference, reference, engine.parent)
    assert status == 2 and "is an artifact reference; an approval names the engine file's digest" in err


def test_the_engine_file_is_approved_and_attached_with_o(pushed: tuple[Path, str]) -> None:
    engine, reference = pushed
    status, _, err = approve(engine, reference, engine.parent, "-o", engine.parent / "approval.json")
    assert status == 0, err
    assert "attached https://trtguard.dev/attestations/change-approval/v1" in err
    assert (engine.parent / "approval.json").is_file()


def test_help_says_which_digest_an_approval_names(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["approve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "names the engine file's digest" in text and "never the digest of the OCI artifact" in text


def test_an_unwritable_output_is_refused_before_the_key_is_opened(pushed: tuple[Path, str]) -> None:
    """Attack 28 finding 4 (the same family): -o into a missing folder fails first, as one line."""
    engine, reference = pushed
    output = engine.parent / "missing" / "approval.json"
    status, _, err = approve(
        engine, reference, engine.parent, "-o", output, "--password-file", "/nonexistent"
    )
    assert status == 2
    message = f"the envelope cannot be written: the folder {output.parent} does not exist"
    assert err == f"trtguard: error: {output}: {message}\n"

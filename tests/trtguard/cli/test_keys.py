"""trtguard/cli/_keys.py: keygen, attest, verify-attestation and the shared password helper.

The commands run through a parser holding only these commands, with the same error contract as
``trtguard`` (``trtguard.cli.main``): a TrtguardError prints its diagnostics and exits with its exit code.
"""

from __future__ import annotations

import argparse
import getpass
import json
import stat
import sys
from pathlib import Path

import pytest

from trtguard.cli import _keys as keys_cli
from trtguard.cli import attest, keygen, verify_attestation
from verifier.base._errors import InputError, TrtguardError
from verifier.crypto import _keys as keys
from verifier.crypto._dsse import Envelope
from verifier.crypto._intoto import statement_from_envelope

PREDICATE_TYPE = "https://example.com/attestations/custom/v1"


def run(*argv: object) -> int:
    parser = argparse.ArgumentParser(prog="trtguard")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for command in (keygen, attest, verify_attestation):
        command.register(subparsers)
    args = parser.parse_args([str(a) for a in argv])
    try:
        status: int = args.handler(args)
    except TrtguardError as error:
        print(f"trtguard: error: {error.diagnostics()}", file=sys.stderr)
        return error.exit_code
    return status


@pytest.fixture(autouse=True)
def _no_password_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRTGUARD_PASSWORD", raising=False)
    monkeypatch.delenv("COSIGN_PASSWORD", raising=False)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False)


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TRTGUARD_PASSWORD", "correct horse")
    assert run("keygen", "--output", tmp_path / "signer") == 0
    (tmp_path / "predicate.json").write_text(json.dumps({"audit_id": "A-7", "precision": ["fp16"]}))
    (tmp_path / "model.plan").write_bytes(b"\x00\x01engine" * 4096)
    return tmp_path


# --- keygen ---------------------------------------------------------------------------------------------


def test_keygen_writes_a_cosign_key_pair(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRTGUARD_PASSWORD", "pw")
    assert run("keygen", "--output", tmp_path / "k") == 0
    key_file, pub_file = tmp_path / "k.key", tmp_path / "k.pub"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert key_file.read_bytes().startswith(b"-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\n")
    assert pub_file.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----\n")
    private = keys.load_private_key(key_file.read_bytes(), b"pw")
    public = keys.PublicKey.from_pem(pub_file.read_bytes())
    assert private.public_key() == public
    assert public.algorithm == "ecdsa-secp256r1"
    assert f"Key id {public.key_id}" in capsys.readouterr().out


def test_keygen_refuses_to_overwrite_without_force(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRTGUARD_PASSWORD", "pw")
    (tmp_path / "k.pub").write_text("keep me")
    assert run("keygen", "--output", tmp_path / "k") == 2
    assert (tmp_path / "k.pub").read_text() == "keep me"
    assert not (tmp_path / "k.key").exists()
    error = capsys.readouterr().err
    assert "refusing to overwrite" in error and "--force" in error


def test_keygen_force_replaces_and_tightens_the_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRTGUARD_PASSWORD", "pw")
    (tmp_path / "k.key").write_text("old")
    (tmp_path / "k.key").chmod(0o644)
    assert run("keygen", "--output", tmp_path / "k", "--force") == 0
    assert stat.S_IMODE((tmp_path / "k.key").stat().st_mode) == 0o600
    assert keys.load_private_key((tmp_path / "k.key").read_bytes(), b"pw")


def test_keygen_without_any_password_source_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("keygen", "--output", tmp_path / "k") == 2
    error = capsys.readouterr().err
    assert "no password given" in error and "--password-file" in error
    assert not (tmp_path / "k.key").exists()


def test_keygen_prompts_twice_on_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    answers = iter(["typed", "typed"])
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(getpass, "getpass", lambda prompt: next(answers))
    assert run("keygen", "--output", tmp_path / "k") == 0
    assert keys.load_private_key((tmp_path / "k.key").read_bytes(), b"typed")


def test_keygen_prompt_mismatch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = iter(["one", "two"])
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(getpass, "getpass", lambda prompt: next(answers))
    assert run("keygen", "--output", tmp_path / "k") == 2
    assert "the two passwords differ" in capsys.readouterr().err


def test_keygen_into_a_missing_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRTGUARD_PASSWORD", "pw")
    assert run("keygen", "--output", tmp_path / "absent" / "k") == 2
    assert "the private key cannot be written: the folder" in capsys.readouterr().err
    assert not (tmp_path / "absent").exists()


# --- read_password --------------------------------------------------------------------------------------


def _args(password_file: Path | None = None) -> argparse.Namespace:
    return argparse.Namespace(password_file=password_file)


def test_password_file_wins_and_loses_one_trailing_newline(tmp_path: Path) -> None:
    path = tmp_path / "pw"
    path.write_bytes(b"from file\n")
    assert keys_cli.read_password(_args(path), environ={"TRTGUARD_PASSWORD": "env"}) == b"from file"
    path.write_bytes(b"two lines\n\n")
    assert keys_cli.read_password(_args(path), environ={}) == b"two lines\n"
    path.write_bytes(b"windows\r\n")
    assert keys_cli.read_password(_args(path), environ={}) == b"windows"


def test_password_variables_in_order_and_empty_means_empty() -> None:
    both = {"TRTGUARD_PASSWORD": "t", "COSIGN_PASSWORD": "c"}
    assert keys_cli.read_password(_args(), environ=both) == b"t"
    assert keys_cli.read_password(_args(), environ={"COSIGN_PASSWORD": "c"}) == b"c"
    assert keys_cli.read_password(_args(), environ={"COSIGN_PASSWORD": ""}) == b""


def test_unreadable_password_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read the password file") as raised:
        keys_cli.read_password(_args(tmp_path / "absent"), environ={})
    assert raised.value.location == str(tmp_path / "absent")


def test_passwords_are_never_taken_from_argv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        run("keygen", "--output", tmp_path / "k", "--password", "secret")
    assert raised.value.code == 2
    assert "unrecognized arguments: --password" in capsys.readouterr().err
    assert not (tmp_path / "k.key").exists()
    parser = argparse.ArgumentParser()
    keys_cli.add_password_arguments(parser)
    assert parser.parse_args(["--password-file", "p"]).password_file == Path("p")


# --- attest / verify-attestation ------------------------------------------------------------------------


def test_attest_then_verify(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    envelope_path = workspace / "model.att.json"
    assert (
        run(
            "attest",
            "--predicate",
            workspace / "predicate.json",
            "--type",
            PREDICATE_TYPE,
            "--subject",
            workspace / "model.plan",
            "--subject-name",
            "resnet50.plan",
            "--key",
            workspace / "signer.key",
            "--output",
            envelope_path,
        )
        == 0
    )
    envelope = Envelope.from_json(envelope_path.read_bytes())
    assert envelope.payload_type == "application/vnd.in-toto+json"
    assert (
        envelope.signatures[0].keyid
        == keys.PublicKey.from_pem((workspace / "signer.pub").read_bytes()).key_id
    )
    statement = statement_from_envelope(envelope)
    assert statement.subject[0].name == "resnet50.plan"
    assert statement.predicate == {"audit_id": "A-7", "precision": ["fp16"]}
    capsys.readouterr()

    verify = ("verify-attestation", envelope_path, "--key", workspace / "signer.pub")
    assert run(*verify, "--subject", workspace / "model.plan", "--type", PREDICATE_TYPE) == 0
    out = capsys.readouterr().out
    assert "Verified OK" in out and f"predicate type: {PREDICATE_TYPE}" in out and "resnet50.plan" in out


@pytest.fixture
def attested(workspace: Path) -> Path:
    path = workspace / "model.att.json"
    assert (
        run(
            "attest",
            "--predicate",
            workspace / "predicate.json",
            "--type",
            PREDICATE_TYPE,
            "--subject",
            workspace / "model.plan",
            "--key",
            workspace / "signer.key",
            "--output",
            path,
        )
        == 0
    )
    return path


def test_verify_attestation_failures_exit_1_and_say_what_failed(
    workspace: Path, attested: Path, shared_fixtures: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong_key = shared_fixtures / "cosign" / "connaisseur-registry" / "keys" / "default.pub"
    other_file = workspace / "predicate.json"
    cases = [
        (("--key", wrong_key), "0 of 1 required signatures from keys"),
        (("--key", workspace / "signer.pub", "--subject", other_file), "subject digest mismatch"),
        (("--key", workspace / "signer.pub", "--type", "https://example.com/other"), "predicate type is"),
        (("--key", workspace / "signer.pub", "--key", wrong_key, "--threshold", "2"), "1 of 2 required"),
    ]
    for extra, message in cases:
        capsys.readouterr()
        assert run("verify-attestation", attested, *extra) == 1, message
        assert message in capsys.readouterr().err


def test_tampered_envelope_is_rejected(
    workspace: Path, attested: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = json.loads(attested.read_bytes())
    document["payloadType"] = "application/json"
    attested.write_text(json.dumps(document))
    assert run("verify-attestation", attested, "--key", workspace / "signer.pub") == 1
    assert "0 of 1 required signatures" in capsys.readouterr().err


def test_verify_attestation_input_errors_exit_2(
    workspace: Path, attested: Path, shared_fixtures: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    malformed_key = (
        shared_fixtures / "cosign" / "bundles" / "conformance" / "managed-key-wrong-key_fail" / "key.pub"
    )
    assert run("verify-attestation", attested, "--key", malformed_key) == 2
    assert "does not parse" in capsys.readouterr().err
    assert run("verify-attestation", workspace / "predicate.json", "--key", workspace / "signer.pub") == 2
    assert "DSSE envelope has no payloadType" in capsys.readouterr().err
    assert run("verify-attestation", workspace / "absent.json", "--key", workspace / "signer.pub") == 2
    assert "cannot read the envelope" in capsys.readouterr().err
    assert run("verify-attestation", attested, "--key", workspace / "signer.pub", "--threshold", "2") == 2
    assert "threshold 2 cannot be met" in capsys.readouterr().err


def test_attest_input_errors(
    workspace: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = ["attest", "--type", PREDICATE_TYPE, "--key", workspace / "signer.key"]
    (workspace / "list.json").write_text("[1]")
    (workspace / "bad.json").write_text("{")
    cases = [
        (
            ["--predicate", workspace / "bad.json", "--subject", workspace / "model.plan"],
            "predicate is not JSON",
        ),
        (
            ["--predicate", workspace / "list.json", "--subject", workspace / "model.plan"],
            "must be a JSON object",
        ),
        (
            ["--predicate", workspace / "predicate.json", "--subject", workspace / "absent"],
            "subject file does not",
        ),
    ]
    for extra, message in cases:
        assert run(*base, *extra) == 2
        assert message in capsys.readouterr().err
    monkeypatch.setenv("TRTGUARD_PASSWORD", "wrong")
    assert run(*base, "--predicate", workspace / "predicate.json", "--subject", workspace / "model.plan") == 2
    error = capsys.readouterr().err
    assert "wrong password" in error and "signer.key" in error


def test_attest_type_must_be_a_uri(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        run("attest", "--predicate", "p", "--type", "not-a-uri", "--subject", "s", "--key", "k")
    assert raised.value.code == 2
    assert "is not a URI" in capsys.readouterr().err


def test_attest_to_standard_output(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["attest", "--predicate", workspace / "predicate.json", "--type", PREDICATE_TYPE]
    assert run(*argv, "--subject", workspace / "model.plan", "--key", workspace / "signer.key") == 0
    envelope = Envelope.from_json(capsys.readouterr().out)
    assert statement_from_envelope(envelope).subject[0].name == "model.plan"


@pytest.mark.parametrize(
    ("name", "password"),
    [
        ("zarf-cosign", "test"),
        ("policy-controller-cosign", ""),
    ],  # SOURCES.md §3.1; both written by cosign (Go)
)
def test_attest_with_cosign_made_keys(
    shared_fixtures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, password: str
) -> None:
    folder = shared_fixtures / "cosign" / "keys"
    monkeypatch.setenv("COSIGN_PASSWORD", password)
    (tmp_path / "p.json").write_text("{}")
    (tmp_path / "s.bin").write_bytes(b"s")
    envelope = tmp_path / "e.json"
    argv = [
        "attest",
        "--predicate",
        tmp_path / "p.json",
        "--type",
        PREDICATE_TYPE,
        "--subject",
        tmp_path / "s.bin",
    ]
    assert run(*argv, "--key", folder / f"{name}.key", "--output", envelope) == 0
    verify = [
        "verify-attestation",
        envelope,
        "--key",
        folder / f"{name}.pub",
        "--subject",
        tmp_path / "s.bin",
    ]
    assert run(*verify) == 0


def test_attest_refuses_an_invalid_build_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """trtguard's own predicate types are validated before signing: a draft is never signed."""
    key = tmp_path / "signer.key"
    key.write_bytes(keys.encrypt_private_key(keys.generate_private_key(), b"pw"))
    password = tmp_path / "password"
    password.write_text("pw")
    predicate = tmp_path / "draft.json"
    predicate.write_text('{"build_timestamp": null}')
    subject = tmp_path / "model.plan"
    subject.write_bytes(b"plan")
    status = run(
        "attest", "--predicate", predicate, "--type", "https://trtguard.dev/attestations/engine-build/v1",
        "--subject", subject, "--key", key, "--password-file", password,
    )  # fmt: skip
    assert status == 2
    assert "build_timestamp" in capsys.readouterr().err

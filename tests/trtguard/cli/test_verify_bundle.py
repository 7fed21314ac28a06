"""trtguard/cli/verify_bundle.py: ``trtguard verify-bundle`` (``verify-blob`` is in test_verify_blob.py).

The command runs through ``trtguard.cli.main`` (the ``trtguard`` entry point: full parser, diagnostics on
standard error, exit codes); one test runs the entry point in a child process. The whole sigstore-conformance
suite goes through ``verify-bundle`` in test_signatures_conformance.py; here are the command's own rules.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trtguard.cli import main
from verifier.crypto import _keys as keys
from verifier.crypto._keys import PrivateKey

REPO = Path(__file__).resolve().parents[3]
SUITE = REPO / "tests" / "data" / "sigstore-conformance" / "bundle-verify"
BEACON = (
    "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/"
    "extremely-dangerous-oidc-beacon.yml@refs/heads/main"
)
ACTIONS = "https://token.actions.githubusercontent.com"
A_TXT_DIGEST = "sha256:" + hashlib.sha256((SUITE / "a.txt").read_bytes()).hexdigest()


def run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, " ".join(err.split())


def _keyless(bundle: str, *rest: object) -> list[object]:
    return [
        "verify-bundle",
        "--bundle",
        SUITE / bundle / "bundle.sigstore.json",
        "--certificate-identity",
        BEACON,
        "--certificate-oidc-issuer",
        ACTIONS,
        *rest,
    ]


# --- verify-bundle ---------------------------------------------------------------------------------------


def test_verify_bundle_by_path_and_by_digest(capsys: pytest.CaptureFixture[str]) -> None:
    for artifact in (SUITE / "a.txt", A_TXT_DIGEST):
        status, out, _ = run(capsys, *_keyless("happy-path-v0.3", artifact))
        assert status == 0
        assert f"artifact: {A_TXT_DIGEST}" in out
        assert "transparency log: verified" in out


def test_a_file_named_like_a_digest_is_a_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The protocol: a digest is sha256:<64 hex> that is not a path on disk; anything else is a file.
    monkeypatch.chdir(tmp_path)
    Path(A_TXT_DIGEST).write_bytes(b"not a.txt")
    status, _, err = run(capsys, *_keyless("happy-path-v0.3", A_TXT_DIGEST))
    assert status == 1
    assert "the bundle signs sha256:a0cfc712" in err
    status, _, err = run(capsys, *_keyless("happy-path-v0.3", "sha256:abc"))
    assert status == 2
    assert "cannot read the artifact" in err


def test_upper_case_digests_are_digests(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, *_keyless("happy-path-v0.3", A_TXT_DIGEST.upper().replace("SHA256", "sha256")))[0] == 0


def test_default_root_is_the_public_good_one_and_staging_is_another(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run(capsys, *_keyless("happy-path-v0.1", A_TXT_DIGEST))[0] == 0
    status, _, err = run(capsys, *_keyless("happy-path-v0.1", "--staging", A_TXT_DIGEST))
    assert status == 1
    assert "unknown log" in err
    # A staging bundle verifies under --staging.
    staging = "bundle-from-wrong-instance_fail"
    assert run(capsys, *_keyless(staging, A_TXT_DIGEST))[0] == 1
    assert run(capsys, *_keyless(staging, "--staging", A_TXT_DIGEST))[0] == 0


def test_key_mode_requires_the_log_unless_told_not_to(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = SUITE / "managed-key-happy-path"
    document = json.loads((folder / "bundle.sigstore.json").read_bytes())
    del document["verificationMaterial"]["tlogEntries"]
    untracked = tmp_path / "no-log.json"
    untracked.write_text(json.dumps(document))
    base = ["verify-bundle", "--bundle", untracked, "--key", folder / "key.pub"]
    status, _, err = run(capsys, *base, A_TXT_DIGEST)
    assert status == 1
    assert "no transparency log entry but the policy requires one" in err
    status, out, _ = run(capsys, *base, "--insecure-ignore-tlog", A_TXT_DIGEST)
    assert status == 0
    assert "transparency log: not checked" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--insecure-ignore-tlog"], "--insecure-ignore-tlog applies to --key only"),
        (["--trusted-root", "absent.json"], "cannot read the trusted root"),
    ],
)
def test_keyless_usage_errors_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str, tmp_path: Path
) -> None:
    status, _, err = run(capsys, *_keyless("happy-path-v0.3", *argv, A_TXT_DIGEST))
    assert status == 2
    assert message in err


def test_identity_and_issuer_go_together(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["verify-bundle", "--bundle", SUITE / "happy-path-v0.3" / "bundle.sigstore.json"]
    status, _, err = run(capsys, *argv, "--certificate-identity", BEACON, A_TXT_DIGEST)
    assert (status, "--certificate-identity needs --certificate-oidc-issuer" in err) == (2, True)
    with pytest.raises(SystemExit) as raised:
        main([*map(str, argv), A_TXT_DIGEST])  # neither --key nor an identity: argparse refuses
    assert raised.value.code == 2


def test_wrong_identity_is_refused_with_the_certificates_identity(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["verify-bundle", "--bundle", SUITE / "happy-path-v0.3" / "bundle.sigstore.json"]
    status, _, err = run(
        capsys,
        *argv,
        "--certificate-identity",
        "mallory@example.com",
        "--certificate-oidc-issuer",
        ACTIONS,
        A_TXT_DIGEST,
    )
    assert status == 1
    assert f"the certificate identity {BEACON} ({ACTIONS}) is not trusted" in err


@pytest.fixture(scope="module")
def blob_signer() -> dict[str, PrivateKey]:
    return {"signer": keys.generate_private_key(), "rekor": keys.generate_private_key()}


def _write(path: Path, data: bytes | str | dict[str, Any]) -> Path:
    if isinstance(data, dict):
        data = json.dumps(data)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def test_hostile_documents_exit_with_a_reason_not_a_traceback(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, blob_signer: dict[str, PrivateKey]
) -> None:
    # Nesting deeper than Python's recursion limit raised RecursionError out of the command (a traceback).
    deep = _write(tmp_path / "deep.json", "[" * 100_000)
    status, _, err = run(
        capsys,
        "verify-bundle",
        "--bundle",
        deep,
        "--certificate-identity",
        BEACON,
        "--certificate-oidc-issuer",
        ACTIONS,
        A_TXT_DIGEST,
    )
    assert (status, err) == (
        1,
        f"trtguard: error: {deep}: not a Sigstore bundle: the document is nested too deeply",
    )
    key = _write(tmp_path / "cosign.pub", blob_signer["signer"].public_key().to_pem())
    status, _, err = run(capsys, "verify-blob", "--bundle", deep, "--key", key, A_TXT_DIGEST)
    assert (status, err) == (2, f"trtguard: error: {deep}: the cosign bundle is nested too deeply")


def test_the_entry_point_in_a_process(tmp_path: Path) -> None:
    # Exit status and standard error as a conformance harness sees them.
    command = [sys.executable, "-c", "import sys; from trtguard.cli import main; sys.exit(main())"]
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    ok = subprocess.run(
        [*command, *map(str, _keyless("happy-path-v0.3", SUITE / "a.txt"))],
        capture_output=True,
        text=True,
        env=environment,
        check=False,
    )
    assert (ok.returncode, ok.stderr) == (0, "")
    failed = subprocess.run(
        [*command, *map(str, _keyless("signature-mismatch_fail", SUITE / "a.txt"))],
        capture_output=True,
        text=True,
        env=environment,
        check=False,
    )
    assert failed.returncode == 1
    assert failed.stdout == ""
    assert failed.stderr.startswith("trtguard: error: ")
    assert "does not verify with the signing certificate's key" in failed.stderr

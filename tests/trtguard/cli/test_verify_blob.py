"""trtguard/cli/verify_blob.py: ``trtguard verify-blob``, a classic cosign blob signature (cosign sign-blob).

The command runs through ``trtguard.cli.main`` (the ``trtguard`` entry point: full parser, diagnostics on
standard error, exit codes); the rules it shares with ``verify-bundle`` are tested in test_verify_bundle.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import local_rekor
from trtguard.cli import main
from verifier.crypto import _keys as keys
from verifier.crypto._keys import PrivateKey


def run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, " ".join(err.split())


@pytest.fixture(scope="module")
def blob_signer() -> dict[str, PrivateKey]:
    return {"signer": keys.generate_private_key(), "rekor": keys.generate_private_key()}


def _write(path: Path, data: bytes | str | dict[str, Any]) -> Path:
    if isinstance(data, dict):
        data = json.dumps(data)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


@pytest.fixture
def blob(tmp_path: Path, blob_signer: dict[str, PrivateKey]) -> dict[str, Path]:
    """A blob signed with a key (cosign sign-blob), the key, and the signature logged in a local log."""
    signer = blob_signer["signer"]
    artifact = _write(tmp_path / "model.onnx", b"onnx bytes" * 100)
    signature = signer.sign(artifact.read_bytes())
    log = local_rekor.LocalLog(blob_signer["rekor"])
    body = local_rekor.hashedrekord(
        hashlib.sha256(artifact.read_bytes()).digest(), signature, signer.public_key().to_pem()
    )
    entry = log.entry(body)
    rekor_bundle = {
        "SignedEntryTimestamp": entry["inclusionPromise"]["signedEntryTimestamp"],
        "Payload": {
            "body": entry["canonicalizedBody"],
            "integratedTime": int(entry["integratedTime"]),
            "logIndex": int(entry["logIndex"]),
            "logID": log.log_id.hex(),
        },
    }
    return {
        "artifact": artifact,
        "key": _write(tmp_path / "cosign.pub", signer.public_key().to_pem()),
        "signature": _write(tmp_path / "model.onnx.sig", base64.b64encode(signature).decode() + "\n"),
        "bundle": _write(
            tmp_path / "model.onnx.bundle",
            {"base64Signature": base64.b64encode(signature).decode(), "rekorBundle": rekor_bundle},
        ),
        "root": _write(tmp_path / "trusted_root.json", log.trusted_root()),
    }


def test_verify_blob_with_a_key_and_its_log_entry(
    capsys: pytest.CaptureFixture[str], blob: dict[str, Path]
) -> None:
    status, out, _ = run(
        capsys,
        "verify-blob",
        "--bundle",
        blob["bundle"],
        "--key",
        blob["key"],
        "--trusted-root",
        blob["root"],
        blob["artifact"],
    )
    assert status == 0
    assert "transparency log: verified" in out
    digest = "sha256:" + hashlib.sha256(blob["artifact"].read_bytes()).hexdigest()
    assert (
        run(
            capsys,
            "verify-blob",
            "--bundle",
            blob["bundle"],
            "--key",
            blob["key"],
            "--trusted-root",
            blob["root"],
            digest,
        )[0]
        == 0
    )


def test_verify_blob_signature_alone(capsys: pytest.CaptureFixture[str], blob: dict[str, Path]) -> None:
    argv = [
        "verify-blob",
        "--signature",
        blob["signature"],
        "--key",
        blob["key"],
        "--trusted-root",
        blob["root"],
    ]
    status, _, err = run(capsys, *argv, blob["artifact"])
    assert status == 1
    assert "no Rekor bundle but the policy requires one" in err
    status, out, _ = run(capsys, *argv, "--insecure-ignore-tlog", blob["artifact"])
    assert status == 0
    assert "transparency log: not checked" in out


@pytest.mark.parametrize("what", ["artifact", "key", "log"])
def test_verify_blob_refusals(
    capsys: pytest.CaptureFixture[str], blob: dict[str, Path], tmp_path: Path, what: str
) -> None:
    artifact, key, root = blob["artifact"], blob["key"], blob["root"]
    if what == "artifact":
        artifact = _write(tmp_path / "other.onnx", b"other bytes")
    elif what == "key":
        key = _write(tmp_path / "other.pub", keys.generate_private_key().public_key().to_pem())
    else:
        root = _write(
            tmp_path / "other-root.json", local_rekor.LocalLog(keys.generate_private_key()).trusted_root()
        )
    status, _, err = run(
        capsys, "verify-blob", "--bundle", blob["bundle"], "--key", key, "--trusted-root", root, artifact
    )
    assert status == 1
    assert {
        "artifact": "not made by any trusted key",
        "key": "not made by any trusted key",
        "log": "unknown log",
    }[what] in err


def test_verify_blob_needs_a_signature(capsys: pytest.CaptureFixture[str], blob: dict[str, Path]) -> None:
    status, _, err = run(capsys, "verify-blob", "--key", blob["key"], blob["artifact"])
    assert (status, "give the signature" in err) == (2, True)
    not_a_bundle = _write(blob["artifact"].parent / "sigstore.json", {"mediaType": "x"})
    status, _, err = run(
        capsys, "verify-blob", "--bundle", not_a_bundle, "--key", blob["key"], blob["artifact"]
    )
    assert (status, "not a cosign blob bundle" in err) == (2, True)


def test_verify_blob_keyless_classic_signature(
    capsys: pytest.CaptureFixture[str], shared_fixtures: Path, tmp_path: Path
) -> None:
    # containers/image's raw keyless cosign signature (shared fixtures, SOURCES.md §3.2) as cosign's blob
    # bundle: the signed payload is the blob; its Fulcio certificate, chain and Rekor SET are public-good.
    raw = shared_fixtures / "cosign" / "containers-image" / "raw"
    attachment = (
        shared_fixtures / "cosign" / "containers-image" / "dir-img-cosign-fulcio-rekor-valid" / "signature-1"
    )
    chain = json.loads(attachment.read_bytes()[len(b"\x00sigstore-json\n") :])["annotations"][
        "dev.sigstore.cosign/chain"
    ]
    legacy = {
        "base64Signature": (raw / "rekor-sig.b64").read_text().strip(),
        "cert": base64.b64encode((raw / "rekor-cert.pem").read_bytes()).decode(),
        "rekorBundle": json.loads((raw / "rekor-set.json").read_bytes()),
    }
    bundle = _write(tmp_path / "legacy.bundle", legacy)
    chain_file = _write(tmp_path / "chain.pem", chain)
    argv = [
        "verify-blob",
        "--bundle",
        bundle,
        "--certificate-chain",
        chain_file,
        "--certificate-oidc-issuer",
        "https://github.com/login/oauth",
    ]
    status, out, err = run(
        capsys, *argv, "--certificate-identity", "mitr@redhat.com", raw / "rekor-payload.json"
    )
    assert status == 0, err
    assert "identities [mitr@redhat.com (https://github.com/login/oauth)]" in out
    status, _, err = run(
        capsys, *argv, "--certificate-identity", "mallory@redhat.com", raw / "rekor-payload.json"
    )
    assert (status, "is not trusted" in err) == (1, True)

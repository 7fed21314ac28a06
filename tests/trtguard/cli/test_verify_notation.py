"""``trtguard verify-notation`` on unusable input (issue 25): every malformed trust policy, trust store or
configuration folder exits 2 with a message naming the file, never with a traceback, and never waits on a
FIFO. Verdicts on envelopes are tests/webhook/test_signature_formats.py's and the verifier's tests'."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.support import notation_envelopes as envelopes
from tests.support.notary_pki import NOW, Pki, make_pki
from trtguard.cli import main
from verifier.base import MAX_DOCUMENT_BYTES

DIGEST = "sha256:" + "ab" * 32
IMAGE = f"registry.example/team/app@{DIGEST}"
DESCRIPTOR = json.dumps(
    {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": DIGEST, "size": 2}
)
STATEMENT: dict[str, Any] = {
    "name": "app",
    "registryScopes": ["*"],
    "signatureVerification": {"level": "strict"},
    "trustStores": ["ca:release"],
    "trustedIdentities": ["*"],
}


def _config(root: Path, document: Any, pki: Pki | None = None) -> Path:
    store = root / "truststore" / "x509" / "ca" / "release"
    store.mkdir(parents=True)
    (store / "root.crt").write_bytes((pki or make_pki()).root.pem())
    (root / "trustpolicy.json").write_text(json.dumps(document))
    return root


def _run(config: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> tuple[int, str]:
    envelope = tmp_path / "signature.jws"
    envelope.write_text("{}")
    argv = ["verify-notation", IMAGE, "--config", str(config), "--signature", str(envelope)]
    status = main([*argv, "--descriptor", DESCRIPTOR])
    return status, capsys.readouterr().err


def _with(**changes: Any) -> dict[str, Any]:
    return {"version": "1.0", "trustPolicies": [STATEMENT | changes]}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"version": "1.0", "trustPolicies": []}, "zero trust policy statements"),
        ({"version": "1.0"}, "zero trust policy statements"),
        ({"version": "1.0", "trustPolicies": {}}, "zero trust policy statements"),
        ({"version": ["1.0"], "trustPolicies": [STATEMENT]}, "unsupported version"),
        ([], "not a JSON object"),
        ({"version": "1.0", "trustPolicies": [None]}, "is not an object"),
        (_with(name=5), "requires a name"),
        (_with(signatureVerification=[]), "invalid signatureVerification"),
        (_with(signatureVerification=None), "invalid signatureVerification"),
        (_with(signatureVerification={"level": ["strict"]}), "invalid signatureVerification"),
        (_with(signatureVerification={"level": "strict", "override": "x"}), "overrides"),
        (_with(signatureVerification={"level": "strict", "verifyTimestamp": {}}), "verifyTimestamp"),
        (_with(registryScopes="*"), "registryScopes is not a list of strings"),
        (_with(registryScopes=[""]), "is not valid"),
        (_with(trustStores="ca:release"), "trustStores is not a list of strings"),
        (_with(trustStores=["ca:.."]), "unsupported trust store name"),
        (_with(trustStores=["ca:."]), "unsupported trust store name"),
        (_with(trustStores=["ca:missing"]), "does not exist"),
        (_with(trustedIdentities=[]), "missing trust stores or trusted identities"),
        (_with(trustedIdentities=[7]), "trustedIdentities is not a list of strings"),
        (_with(trustedIdentities=["x509.subject: C=US, ST=WA, O=\\ff"]), "trusted identity"),
    ],
)
def test_a_malformed_trust_policy_exits_2_naming_the_file(
    document: Any, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, err = _run(_config(tmp_path / "notation", document), capsys, tmp_path)
    assert status == 2, err
    assert message in err and str(tmp_path / "notation") in err, err


def test_a_trust_policy_that_is_a_folder_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notation" / "trustpolicy.json").mkdir(parents=True)  # was an IsADirectoryError traceback
    status, err = _run(tmp_path / "notation", capsys, tmp_path)
    assert status == 2 and "not a regular file" in err, err


def test_a_trust_policy_that_is_a_fifo_is_refused_without_waiting_for_a_writer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notation").mkdir()
    os.mkfifo(tmp_path / "notation" / "trustpolicy.json")  # opening it would block until a writer came
    status, err = _run(tmp_path / "notation", capsys, tmp_path)
    assert status == 2 and "not a regular file" in err, err


def test_a_trust_policy_larger_than_the_bound_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _config(tmp_path / "notation", STATEMENT)
    with (root / "trustpolicy.json").open("wb") as stream:
        stream.truncate(MAX_DOCUMENT_BYTES + 1)  # sparse: no time spent writing it
    status, err = _run(root, capsys, tmp_path)
    assert status == 2 and "larger than" in err, err


def test_an_unreadable_trust_store_folder_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _config(tmp_path / "notation", _with())
    store = root / "truststore" / "x509" / "ca" / "release"
    (store / "root.crt").unlink()
    (store / "root.crt").mkdir()  # a folder where a certificate should be
    status, err = _run(root, capsys, tmp_path)
    assert status == 2 and "not a regular file" in err, err


@pytest.mark.parametrize("option", ["--signature", "--manifest"])
def test_a_signature_or_manifest_that_is_a_fifo_or_folder_exits_2(
    option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path / "notation", _with())
    envelope = tmp_path / "signature.jws"
    envelope.write_text("{}")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    for bad in (tmp_path / "fifo", tmp_path / "folder"):
        files = {"--signature": envelope, "--manifest": tmp_path / "manifest.json"} | {option: bad}
        argv = ["verify-notation", IMAGE, "--config", str(config)]
        status = main(
            [*argv, "--signature", str(files["--signature"]), "--manifest", str(files["--manifest"])]
        )
        err = capsys.readouterr().err
        assert status == 2 and "not a regular file" in err, err


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({}, None),
        ({"io.cncf.notary.verificationPlugin": "acme"}, "requires a verification plugin"),
        ({"x-padding": "x" * (MAX_DOCUMENT_BYTES // 16)}, "at most 1024 KiB are read"),
    ],
)
def test_envelopes_that_need_a_plugin_or_are_too_large_are_not_verified(
    headers: dict[str, str], reason: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 25 (6, D1) through the command: exit 1, the envelope's reason on its line."""
    pki = make_pki()
    config = _config(tmp_path / "notation", _with(), pki)
    descriptor = json.loads(DESCRIPTOR)
    chain = [pki.leaf.certificate, pki.intermediate.certificate, pki.root.certificate]
    protected = envelopes.jws_headers("ES256", NOW, **headers)
    envelope = tmp_path / "signature.jws"
    envelope.write_bytes(envelopes.jws(pki.leaf.signing_key, chain, protected, envelopes.payload(descriptor)))
    argv = ["verify-notation", IMAGE, "--config", str(config), "--signature", str(envelope)]
    status = main([*argv, "--descriptor", DESCRIPTOR, "--now", NOW.isoformat()])
    out = capsys.readouterr().out
    if reason is None:
        assert status == 0, out
    else:
        assert status == 1 and reason in out, out


def test_registry_settings_come_from_the_environment_without_registry_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As in the commands that write to registries: no --registry-config, then $TRTGUARD_REGISTRY_CONFIG."""
    settings = tmp_path / "registries.yaml"
    settings.write_text("registries: [1\n")
    monkeypatch.setenv("TRTGUARD_REGISTRY_CONFIG", str(settings))
    config = _config(tmp_path / "notation", _with())
    assert main(["verify-notation", IMAGE, "--config", str(config)]) == 2
    assert str(settings) in capsys.readouterr().err


def test_a_timeout_that_is_not_above_zero_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path / "notation", _with())
    assert main(["verify-notation", IMAGE, "--config", str(config), "--timeout", "0"]) == 2
    assert "--timeout must be a positive number of seconds, not 0.0" in capsys.readouterr().err

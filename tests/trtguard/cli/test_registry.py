"""trtguard/cli/_registry.py (what sign.py, push_engine.py and attach_attestation.py run): sign, push-engine
and attach-attestation against a real registry.

The commands run through a parser holding only these commands, with the error contract of
``trtguard`` (a TrtguardError prints its diagnostics and exits with its exit code). Results are read back
with the client and checked with verifier.signatures.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import model_signing
import pytest

from tests.policies.conftest import manifest_data
from tests.support.images import push_image, tiny_image
from tests.support.localregistry import LocalRegistry, plain_config
from tests.support.notary_pki import make_pki
from tests.verifier.model_signing.conftest import write_key
from trtguard.cli import attach_attestation, push_engine, sign
from verifier.base._deadline import Deadline
from verifier.base._errors import TrtguardError
from verifier.base._references import ImageReference
from verifier.crypto._intoto import sign_statement, statement_for_file
from verifier.crypto._keys import PrivateKey, encrypt_private_key, generate_private_key
from verifier.evidence import ImageSignatures
from verifier.registry._cosign_layout import read_signatures
from verifier.registry.client import RegistryClient
from verifier.registry.evidence import RegistryEvidence
from verifier.signatures import TrustPolicy, verify_image_signatures
from verifier.signatures.notation import NotationTrust, TrustedIdentity

T = TypeVar("T")
BUILD = "https://trtguard.dev/attestations/engine-build/v1"
PASSWORD = "registry cli test"


def run(*argv: object) -> int:
    parser = argparse.ArgumentParser(prog="trtguard")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for command in (sign, push_engine, attach_attestation):
        command.register(subparsers)
    args = parser.parse_args([str(a) for a in argv])
    try:
        status: int = args.handler(args)
    except TrtguardError as error:
        print(f"trtguard: error: {error.diagnostics()}", file=sys.stderr)
        return error.exit_code
    return status


@pytest.fixture
def setup(registry: LocalRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A registry config allowing the test registry, and the password in the environment."""
    (tmp_path / "registries.yaml").write_text(f'registries:\n  "{registry.host}":\n    plain_http: true\n')
    monkeypatch.setenv("TRTGUARD_PASSWORD", PASSWORD)
    monkeypatch.delenv("TRTGUARD_REGISTRY_CONFIG", raising=False)
    return tmp_path


def _key(folder: Path, name: str) -> tuple[Path, PrivateKey]:
    key = generate_private_key()
    path = folder / f"{name}.key"
    path.write_bytes(encrypt_private_key(key, PASSWORD.encode()))
    return path, key


def _in_registry(registry: LocalRegistry, work: Callable[[RegistryClient], Awaitable[T]]) -> T:
    async def go() -> T:
        async with RegistryClient(plain_config(registry.host)) as client:
            return await work(client)

    return asyncio.run(go())


def _material(registry: LocalRegistry, ref: ImageReference) -> ImageSignatures:
    return _in_registry(
        registry, lambda client: RegistryEvidence(client).image_signatures(ref, Deadline.after(10))
    )


def test_sign_twice_keeps_both_signatures(
    registry: LocalRegistry, setup: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref = ImageReference.parse(f"{registry.host}/cli/app:1.0")
    digest = _in_registry(registry, lambda client: push_image(client, ref, tiny_image()))
    config = setup / "registries.yaml"
    first_path, first = _key(setup, "first")
    second_path, second = _key(setup, "second")
    assert run("sign", ref, "--key", first_path, "--registry-config", config) == 0
    assert f"signed {ref.name}@{digest}; signature in {ref.name}:sha256-" in capsys.readouterr().out
    assert run("sign", ref, "--key", second_path, "--registry-config", config, "-a", "team=ml") == 0
    material = _material(registry, ref)
    assert material.digest == digest and len(material.classic) == 2
    policy = TrustPolicy(keys={"first": first.public_key(), "second": second.public_key()}, threshold=2)
    result = verify_image_signatures(digest, policy, classic=material.classic, repository=ref.name)
    assert sorted(result.keys) == ["first", "second"]
    assert json.loads(material.classic[1].payload)["optional"] == {"team": "ml"}


def test_sign_reads_the_registry_config_from_the_environment(
    registry: LocalRegistry, setup: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = ImageReference.parse(f"{registry.host}/cli/env:1.0")
    digest = _in_registry(registry, lambda client: push_image(client, ref, tiny_image()))
    key_path, _ = _key(setup, "env")
    monkeypatch.setenv("TRTGUARD_REGISTRY_CONFIG", str(setup / "registries.yaml"))
    assert run("sign", f"{ref.name}@{digest}", "--key", key_path) == 0
    layers = _in_registry(registry, lambda client: read_signatures(client, ref, digest, Deadline.after(10)))
    assert len(layers) == 1


def test_sign_failures(registry: LocalRegistry, setup: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key_path, _ = _key(setup, "k")
    config = setup / "registries.yaml"
    assert run("sign", f"{registry.host}/cli/absent:1.0", "--key", key_path, "--registry-config", config) == 1
    assert f"{registry.host} has no manifest cli/absent:1.0" in capsys.readouterr().err
    # Without the config the loopback registry is spoken to over TLS, which it does not speak.
    assert run("sign", f"{registry.host}/cli/absent:1.0", "--key", key_path, "--timeout", "5") == 1
    assert "trtguard: error:" in capsys.readouterr().err
    assert run("sign", f"{registry.host}/cli/x:1", "--key", key_path, "-a", "novalue") == 2
    assert run("sign", "Not/A/Reference", "--key", key_path) == 2
    assert run("sign", f"{registry.host}/cli/x:1", "--key", key_path, "--timeout", "0") == 2


def test_push_engine_prints_the_digest_reference(
    registry: LocalRegistry, setup: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = setup / "model.plan"
    engine.write_bytes(b"plan" * 1000)
    onnx = setup / "model.onnx"
    onnx.write_bytes(b"onnx" * 10)
    config = setup / "registries.yaml"
    assert (
        run(
            "push-engine",
            engine,
            "--to",
            f"{registry.host}/cli/engine:v1",
            "--onnx",
            onnx,
            "--registry-config",
            config,
        )
        == 0
    )
    printed = capsys.readouterr().out.strip()
    ref = ImageReference.parse(printed)
    assert ref.name == f"{registry.host}/cli/engine" and ref.digest is not None
    subjects = _in_registry(
        registry, lambda client: RegistryEvidence(client).subjects(ref, Deadline.after(10))
    )
    assert subjects.engine_file == "sha256:" + hashlib.sha256(engine.read_bytes()).hexdigest()
    assert subjects.onnx_file == "sha256:" + hashlib.sha256(onnx.read_bytes()).hexdigest()
    assert (
        run(
            "push-engine",
            setup / "absent.plan",
            "--to",
            f"{registry.host}/cli/engine:v1",
            "--registry-config",
            config,
        )
        == 2
    )


def test_attach_attestation_to_an_engine(
    registry: LocalRegistry, setup: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = setup / "model.plan"
    engine.write_bytes(b"another plan" * 500)
    config = setup / "registries.yaml"
    assert (
        run("push-engine", engine, "--to", f"{registry.host}/cli/attested:v1", "--registry-config", config)
        == 0
    )
    ref = ImageReference.parse(capsys.readouterr().out.strip())
    _, key = _key(setup, "builder")
    envelope_path = setup / "build.dsse.json"
    # A build manifest is checked before it is attached: it must be valid and describe this engine.
    predicate = manifest_data(engine.read_bytes(), audit_id="A-9")
    envelope_path.write_bytes(sign_statement(statement_for_file(engine, BUILD, predicate), key).to_json())
    assert (
        run(
            "attach-attestation",
            envelope_path,
            "--to",
            f"{registry.host}/cli/attested:v1",
            "--registry-config",
            config,
        )
        == 0
    )
    out = capsys.readouterr().out
    assert f"attached {BUILD} to {ref.name}@{ref.digest}; referrer {ref.name}@sha256:" in out
    # Attaching again adds nothing new.
    assert run("attach-attestation", envelope_path, "--to", str(ref), "--registry-config", config) == 0
    found = _in_registry(
        registry, lambda client: RegistryEvidence(client).attestations(ref, Deadline.after(10))
    )
    assert [a.predicate_type for a in found.attestations] == [BUILD]

    async def counts(client: RegistryClient) -> tuple[int, int]:
        assert ref.digest is not None
        att = await client.get_manifest(ref, Deadline.after(10), reference=f"sha256-{ref.digest[7:]}.att")
        index = await client.get_manifest(ref, Deadline.after(10), reference=f"sha256-{ref.digest[7:]}")
        assert att is not None and index is not None
        return len(att.layers), len(index.manifests)

    assert _in_registry(registry, counts) == (1, 1)


def test_attach_attestation_refuses_the_wrong_subject_and_bad_files(
    registry: LocalRegistry, setup: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref = ImageReference.parse(f"{registry.host}/cli/other:v1")
    _in_registry(registry, lambda client: push_image(client, ref, tiny_image()))
    config = setup / "registries.yaml"
    unrelated = setup / "unrelated.bin"
    unrelated.write_bytes(b"not the image")
    _, key = _key(setup, "k")
    envelope_path = setup / "wrong.dsse.json"
    envelope_path.write_bytes(sign_statement(statement_for_file(unrelated, BUILD, {}), key).to_json())
    assert run("attach-attestation", envelope_path, "--to", ref, "--registry-config", config) == 2
    assert "the attestation is about sha256:" in capsys.readouterr().err
    garbage = setup / "garbage.json"
    garbage.write_text("{")
    assert run("attach-attestation", garbage, "--to", ref, "--registry-config", config) == 2
    unsigned = setup / "unsigned.json"
    payload = base64.b64encode(statement_for_file(unrelated, BUILD, {}).to_json()).decode()
    unsigned.write_text(
        json.dumps({"payloadType": "application/vnd.in-toto+json", "payload": payload, "signatures": []})
    )
    assert run("attach-attestation", unsigned, "--to", ref, "--registry-config", config) == 2
    assert "carries no signature" in capsys.readouterr().err


def test_attach_a_model_signature_refuses_what_it_cannot_read(
    registry: LocalRegistry, setup: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model signature (model_signing's key method) is pushed as a bundle referrer; one whose manifest
    trtguard never counts (a shard serialization) is refused before anything is written."""
    ref = ImageReference.parse(f"{registry.host}/cli/model-signed:v1")
    _in_registry(registry, lambda client: push_image(client, ref, tiny_image()))
    config = setup / "registries.yaml"
    model = setup / "model.onnx"
    model.write_bytes(b"\x08\x07weights")
    write_key(setup / "publisher.pem")
    signature = setup / "model.sig"
    model_signing.signing.Config().use_elliptic_key_signer(private_key=setup / "publisher.pem").sign(
        model, signature
    )
    assert run("attach-attestation", signature, "--to", ref, "--registry-config", config) == 0
    assert "attached a model signature (OpenSSF Model Signing)" in capsys.readouterr().out
    bundle = json.loads(signature.read_bytes())
    statement = json.loads(base64.b64decode(bundle["dsseEnvelope"]["payload"]))
    statement["predicate"]["serialization"]["method"] = "shards"
    bundle["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    shards = setup / "shards.sig"
    shards.write_text(json.dumps(bundle))
    assert run("attach-attestation", shards, "--to", ref, "--registry-config", config) == 2
    assert "serialization method 'shards' is not supported" in capsys.readouterr().err
    found = _in_registry(
        registry, lambda client: RegistryEvidence(client).attestations(ref, Deadline.after(10))
    )
    assert [a.bundle for a in found.elsewhere] == [signature.read_bytes()]


def test_sign_notation_pushes_a_referrer_that_verifies_with_the_ca(
    registry: LocalRegistry, setup: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref = ImageReference.parse(f"{registry.host}/cli/notation:v1")
    digest = _in_registry(registry, lambda client: push_image(client, ref, tiny_image()))
    pki = make_pki("rsa-2048")
    cert, key = pki.leaf.write(setup, "signer")  # a plain PKCS#8 key: no password asked for
    chain = setup / "chain.pem"
    chain.write_bytes(pki.intermediate.pem() + pki.root.pem())
    config = setup / "registries.yaml"
    common = ["--key", key, "--registry-config", config]
    assert run("sign", ref, "--format", "notation", *common) == 2
    assert "--format notation needs --certificate" in capsys.readouterr().err
    assert run("sign", ref, "--certificate", cert, *common) == 2
    assert "go with --format notation" in capsys.readouterr().err
    assert (
        run("sign", ref, "--format", "notation", "--certificate", cert, "--certificate-chain", chain, *common)
        == 0
    )
    assert "(Notary Project, application/jose+json)" in capsys.readouterr().out
    material = _material(registry, ref)
    assert material.digest == digest and len(material.notation) == 1
    trust = NotationTrust(stores={"ca": (pki.root.certificate,)}, identities=(TrustedIdentity.parse("*"),))
    result = verify_image_signatures(
        digest,
        TrustPolicy(notation={"ci": trust}),
        notation=material.notation,
        notation_target=material.descriptor,
    )
    assert result.identities == ("ci (CN=Release Signer,OU=Builds,O=Example,L=Seattle,ST=WA,C=US)",)
    # A COSE signature of the same image by the same certificate: a second referrer, one signer.
    assert (
        run(
            "sign",
            ref,
            "--format",
            "notation",
            "--certificate",
            cert,
            "--certificate-chain",
            chain,
            "--envelope",
            "cose",
            *common,
        )
        == 0
    )
    material = _material(registry, ref)
    assert sorted(s.media_type for s in material.notation) == ["application/cose", "application/jose+json"]
    assert (
        verify_image_signatures(
            digest,
            TrustPolicy(notation={"ci": trust}),
            notation=material.notation,
            notation_target=material.descriptor,
        ).verified
        == 1
    )

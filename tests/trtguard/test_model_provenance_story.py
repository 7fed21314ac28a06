"""Issue 30's governance story: the ONNX model signed by its publisher and the calibration dataset by the data
team (OpenSSF Model Signing, signed here by the real ``model_signing`` library) → the engine built from them
and its build manifest signed by the build key → admitted by ``trtguard check`` and by a real ``trtguard
serve`` over TLS; the same engine built from an ONNX model (or calibrated on a dataset) no publisher signed →
denied, naming the file and the rule."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import shutil
from pathlib import Path
from typing import Any

import model_signing
import pytest
import yaml

from tests.conftest import DATA
from tests.policies.conftest import Material, manifest_data, pod
from tests.support.harness import SERVICE, WebhookProcess, review, verify_admission_response
from tests.support.images import push_image, tiny_image
from tests.support.localregistry import LocalRegistry, plain_config
from tests.verifier.model_signing.conftest import write_key
from trtguard.cli import main
from verifier.base._digests import sha256_bytes
from verifier.base._references import ImageReference
from verifier.crypto._dsse import sign_envelope
from verifier.crypto._intoto import PAYLOAD_TYPE
from verifier.crypto._keys import encrypt_private_key, generate_private_key
from verifier.manifest import EngineBuildManifest, manifest_statement
from verifier.registry.client import RegistryClient

POLICY = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: model-provenance}
spec:
  match: {namespaces: [prod]}
  models:
    buildManifest:
      keys: [platform/build-signer]
      onnxSignedBy: {keys: [publishers/publisher]}
      calibrationSignedBy: {keys: [publishers/data-team]}
"""
ONNX_ONLY = POLICY.replace("      calibrationSignedBy: {keys: [publishers/data-team]}\n", "")
API = "trtguard.dev/v1alpha1"
ONNX = b"\x08\x07resnet50 weights, as the publisher released them"
DATASET = b"calibration samples: 512 ImageNet validation images, seeded"
INT8 = {"typing": "weak", "precision_flags": ["fp16", "int8"], "max_workspace_size": 1 << 30}


def _calibration(data: bytes = DATASET, **dataset: Any) -> dict[str, Any]:
    """A manifest's calibration: the dataset file it was calibrated on (and its cache)."""
    recorded = {"sha256": sha256_bytes(data), "hash_method": "file", "name": "calib.npz", **dataset}
    return {"dataset": recorded, "cache": {"sha256": "07" * 32}}


def _int8(material: Material, engine: str, *, data: bytes = DATASET, **dataset: Any) -> str:
    """An INT8 engine built from the signed ONNX model and calibrated on ``data`` (recorded with ``dataset``'s
    fields), with its signed build manifest."""
    return material.engine(
        engine,
        onnx={"sha256": sha256_bytes(ONNX), "name": "resnet50.onnx"},
        builder_config=INT8,
        calibration=_calibration(data, **dataset),
    )


def _publishers(material: Material) -> Path:
    """A TrustedKeys document with the model-signing keys (key method) of the publisher and the data team."""
    keys = [{"name": name, "modelSigning": {"file": f"{name}.pub"}} for name in ("publisher", "data-team")]
    document = {
        "apiVersion": "trtguard.dev/v1alpha1",
        "kind": "TrustedKeys",
        "metadata": {"name": "publishers"},
        "spec": {"keys": keys},
    }
    path = material.root / "keys-publishers.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def _sign(material: Material, signer: str, model: Path, signature: str) -> None:
    """``model`` signed by ``signer`` with ``model_signing``; the signature goes to the evidence."""
    key = material.root / f"{signer}.pem"
    model_signing.signing.Config().use_elliptic_key_signer(private_key=key).sign(
        model, material.attestations / signature
    )


def _publish(material: Material) -> None:
    """The publisher's model folder and the data team's calibration dataset (one file), each signed."""
    for signer in ("publisher", "data-team"):
        if not (material.root / f"{signer}.pem").exists():
            write_key(material.root / f"{signer}.pem")
    folder = material.root / "resnet50"
    folder.mkdir()
    (folder / "resnet50.onnx").write_bytes(ONNX)
    (folder / "config.json").write_text("{}")
    _sign(material, "publisher", folder, "resnet50.model-signature.json")
    dataset = material.root / "calib.npz"
    dataset.write_bytes(DATASET)
    _sign(material, "data-team", dataset, "calib.model-signature.json")


def _check(
    material: Material,
    workloads: list[dict[str, Any]],
    publishers: Path | None = None,
    policy: str = POLICY,
) -> dict[str, dict[str, Any]]:
    """``trtguard check`` of ``workloads`` against ``policy``, the build key and ``publishers`` (default:
    the publisher's and the data team's keys)."""
    source = material.root / "in.yaml"
    source.write_text(yaml.safe_dump_all(workloads))
    args = ["check", "--attestations", material.attestations, "--format", "json"]
    keys = publishers or _publishers(material)
    for document in (material.policy(policy), material.keys_file("build-signer"), keys):
        args += ["--policies", document]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([str(a) for a in [*args, source]])
    assert status in (0, 1), err.getvalue()
    return {r["name"]: r for r in json.loads(out.getvalue())}


@pytest.fixture
def material(tmp_path: Path) -> Material:
    return Material(tmp_path)


def test_an_engine_from_the_signed_onnx_is_admitted_and_one_from_another_denied(material: Material) -> None:
    signed = _int8(material, "signed")
    unsigned = material.engine(
        "unsigned",
        onnx={"sha256": "0e" * 32, "name": "resnet50-finetuned.onnx"},
        builder_config=INT8,
        calibration=_calibration(),
    )
    _publish(material)
    results = _check(material, [pod("signed", engine=signed), pod("unsigned", engine=unsigned)])
    assert results["signed"]["allowed"] is True, results["signed"]["violations"]
    assert results["unsigned"]["allowed"] is False
    (violation,) = results["unsigned"]["violations"]
    assert violation["rule"] == "models.buildManifest.onnxSignedBy"
    assert "resnet50-finetuned.onnx" in violation["message"]
    assert "covered by no model signature of [publishers/publisher]" in violation["message"]
    assert "resnet50.model-signature.json" in violation["message"]  # the signature found, listing it not


def test_an_engine_calibrated_on_a_dataset_no_one_signed_is_denied(material: Material) -> None:
    other = _int8(material, "other-data", data=b"samples nobody signed", name="calib-v2.npz")
    tree = _int8(material, "tree", data=b"a tree digest", hash_method="trtguard-tree-v1", name="calib/")
    _publish(material)
    results = _check(material, [pod("other", engine=other), pod("tree", engine=tree)])
    for name in ("other", "tree"):
        (violation,) = results[name]["violations"]
        assert violation["rule"] == "models.buildManifest.calibrationSignedBy"
        assert "covered by no model signature of [publishers/data-team]" in violation["message"]
    (other_violation,) = results["other"]["violations"]
    assert "calibration dataset calib-v2.npz" in other_violation["message"]
    assert (
        "calib.model-signature.json (signed by [publishers/data-team]) lists no file"
        in (other_violation["message"])
    )
    # The publisher's signature of the ONNX folder is refused for the dataset: not the data team's key.
    assert "resnet50.model-signature.json" in other_violation["message"]
    (tree_violation,) = results["tree"]["violations"]
    assert "trtguard-tree-v1 folder digest, which no signed file has" in tree_violation["message"]


def test_an_engine_without_calibration_has_no_dataset_to_cover(material: Material) -> None:
    fp16 = material.engine("fp16", onnx={"sha256": sha256_bytes(ONNX), "name": "resnet50.onnx"})
    _publish(material)
    results = _check(material, [pod("fp16", engine=fp16)])
    assert results["fp16"]["allowed"] is True, results["fp16"]["violations"]


def _policy_folder(material: Material) -> Path:
    """The policy, the build key and the publishers' keys in a folder of their own (what serve reads)."""
    policies = material.root / "policies"
    policies.mkdir()
    for path in (material.policy(POLICY), material.keys_file("build-signer"), _publishers(material)):
        (policies / path.name).write_bytes(path.read_bytes())
    for signer in ("publisher", "data-team"):
        (policies / f"{signer}.pub").write_bytes((material.root / f"{signer}.pub").read_bytes())
    return policies


def _serve(
    material: Material, args: list[str], engines: dict[str, str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A real ``trtguard serve ARGS`` over TLS asked about a Pod of each engine, ``signed`` then
    ``unsigned``, as the API server asks (AdmissionReview v1): the two answers."""
    workdir = material.root / "webhook"
    workdir.mkdir()
    server = WebhookProcess([*args, "--self-signed", "tls", "--san", SERVICE], workdir)
    server.start()
    try:

        async def ask(obj: dict[str, Any]) -> dict[str, Any]:
            body = review(obj=obj)
            async with server.client() as client:
                return verify_admission_response(body["request"]["uid"], await client.post(body))

        return (
            asyncio.run(ask(pod("signed", engine=engines["signed"]))),
            asyncio.run(ask(pod("unsigned", engine=engines["unsigned"]))),
        )
    finally:
        server.stop()


def test_the_story_through_serve_over_tls(material: Material) -> None:
    """The same verdicts from a real ``trtguard serve`` (TLS, AdmissionReviews as the API server sends
    them), reading the same attestation folder."""
    engines = {
        "signed": _int8(material, "signed"),
        "unsigned": material.engine(
            "unsigned",
            onnx={"sha256": "0e" * 32, "name": "resnet50-finetuned.onnx"},
            builder_config=INT8,
            calibration=_calibration(),
        ),
    }
    _publish(material)
    policies = _policy_folder(material)
    admitted, denied = _serve(
        material, ["--policies", str(policies), "--attestations", str(material.attestations)], engines
    )
    assert admitted["allowed"] is True, admitted
    assert denied["allowed"] is False
    message = denied["status"]["message"]
    assert "model-provenance/models.buildManifest.onnxSignedBy" in message
    assert "resnet50-finetuned.onnx" in message


def _cli(*argv: object) -> str:
    """``trtguard ARGV`` in this process, which must succeed: its standard output."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([str(a) for a in argv])
    assert status == 0, err.getvalue()
    return out.getvalue()


async def _push_runtime(host: str) -> str:
    """A runtime image in the test registry (what fetch-attestations fetches beside the engines)."""
    async with RegistryClient(plain_config(host)) as client:
        ref = ImageReference.parse(f"{host}/inference/tensorrt:25.01")
        return f"{ref.name}@{await push_image(client, ref, tiny_image('the runtime'))}"


def _checked(*argv: object) -> dict[str, dict[str, Any]]:
    """``trtguard check ARGV --format json`` (some workload denied): the results by workload name."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["check", "--format", "json", *map(str, argv)])
    assert status == 1, err.getvalue()
    return {r["name"]: r for r in json.loads(out.getvalue())}


def test_the_story_through_a_registry(
    material: Material, registry: LocalRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The release side through the registry only: each engine pushed with ``push-engine``, its signed build
    manifest and the publishers' model signatures attached to it with ``attach-attestation``; then
    ``check --registry`` and a real ``serve --registry`` over TLS find the model signatures attached to the
    engine artifact, with no attestation folder."""
    config = material.root / "registries.yaml"
    config.write_text(f'registries:\n  "{registry.host}":\n    plain_http: true\n')
    monkeypatch.setenv("TRTGUARD_REGISTRY_CONFIG", str(config))
    _publish(material)
    signatures = material.root / "signatures"
    material.attestations.rename(signatures)  # no folder: the registry is the only evidence
    engines = {}
    for name, onnx in (
        ("signed", {"sha256": sha256_bytes(ONNX), "name": "resnet50.onnx"}),
        ("unsigned", {"sha256": "0e" * 32, "name": "resnet50-finetuned.onnx"}),
    ):
        plan = material.root / f"{name}.plan"
        plan.write_bytes(f"the {name} resnet engine".encode())
        engines[name] = _cli("push-engine", plan, "--to", f"{registry.host}/models/resnet:{name}").strip()
        data = manifest_data(plan.read_bytes(), onnx=onnx, builder_config=INT8, calibration=_calibration())
        statement = manifest_statement(EngineBuildManifest.model_validate(data))
        envelope = material.root / f"{name}.dsse.json"
        envelope.write_bytes(
            sign_envelope(PAYLOAD_TYPE, statement.to_json(), material.key("build-signer")).to_json()
        )
        _cli("attach-attestation", envelope, "--to", engines[name])
        for signature in ("resnet50.model-signature.json", "calib.model-signature.json"):
            attached = _cli("attach-attestation", signatures / signature, "--to", engines[name])
            assert "attached a model signature (OpenSSF Model Signing)" in attached
    policies = _policy_folder(material)
    source = material.root / "in.yaml"
    runtime = asyncio.run(_push_runtime(registry.host))
    pods = [pod(name, images=(runtime,), engine=ref) for name, ref in engines.items()]
    source.write_text(yaml.safe_dump_all(pods))
    results = _checked("--registry", "--registry-config", config, "--policies", policies, source)
    assert results["signed"]["allowed"] is True, results["signed"]["violations"]
    (violation,) = results["unsigned"]["violations"]
    assert violation["rule"] == "models.buildManifest.onnxSignedBy"
    assert "resnet50-finetuned.onnx" in violation["message"]
    assert f"{registry.host}/models/resnet@sha256:" in violation["message"]  # the referrer, by digest
    # Offline, a folder filled from the registry gives the same verdicts.
    folder = material.root / "fetched"
    _cli("fetch-attestations", "--registry-config", config, "-o", folder, source)
    assert len(list(folder.rglob("model-signature-*.sigstore.json"))) == 4  # two per engine
    offline = _checked("--attestations", folder, "--policies", policies, source)
    assert {n: r["allowed"] for n, r in offline.items()} == {"signed": True, "unsigned": False}
    served = ["--policies", str(policies), "--registry", "--registry-config", str(config)]
    admitted, denied = _serve(material, [*served, "--decision-log", "sqlite:///decisions.db"], engines)
    assert admitted["allowed"] is True, admitted
    assert denied["allowed"] is False
    assert "model-provenance/models.buildManifest.onnxSignedBy" in denied["status"]["message"]

    # The evidence package of the admitted workload carries the model signatures and says what they cover.
    exporter = generate_private_key()
    key = material.root / "exporter.key"
    key.write_bytes(encrypt_private_key(exporter, b"story"))
    (material.root / "exporter.pub").write_bytes(exporter.public_key().to_pem())
    monkeypatch.setenv("TRTGUARD_PASSWORD", "story")
    package = material.root / "signed.tar.gz"
    log = f"sqlite:///{material.root / 'webhook' / 'decisions.db'}"
    exported = _cli(
        *("evidence", "export", "--workload", "prod/signed", "--decision-log", log),
        *("--policies", policies, "--registry-config", config, "--key", key, "-o", package),
    )
    assert "2 model-signature" in exported
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        status = main(
            [
                "evidence",
                "verify",
                str(package),
                "--key",
                str(material.root / "exporter.pub"),
                "--format",
                "json",
            ]
        )
    assert status == 0, out.getvalue()
    passed = [f["message"] for f in json.loads(out.getvalue())["findings"] if f["status"] == "pass"]
    [onnx] = [m for m in passed if "model signature" in m and "publishers/publisher" in m]
    assert "covering the ONNX model resnet50.onnx (signed as resnet50/resnet50.onnx)" in onnx
    [dataset] = [m for m in passed if "model signature" in m and "publishers/data-team" in m]
    assert "covering the calibration dataset calib.npz (signed as calib.npz)" in dataset
    # The auditor's report says so too.
    report = material.root / "signed.html"
    _cli("evidence", "report", package, "--key", material.root / "exporter.pub", "-o", report)
    html = report.read_text()
    assert "2 model signature(s) of the files it was built from" in html
    assert "covering the ONNX model resnet50.onnx (signed as resnet50/resnet50.onnx)" in html


def test_a_keyless_publisher_vouches_for_the_onnx_by_its_identity(material: Material) -> None:
    """sigstore/model-transparency's keyless signature (tests/data/model-transparency) of ``signme-1``:
    the publisher trusted by its Sigstore identity and OIDC issuer, under the pinned production root."""
    upstream = DATA / "model-transparency" / "v1.1.0-sigstore"
    onnx = (upstream / "signme-1").read_bytes()
    signed = material.engine("signed", onnx={"sha256": sha256_bytes(onnx), "name": "signme-1"})
    shutil.copy(upstream / "model.sig", material.attestations / "signme.model-signature.json")
    shutil.copy(DATA / "model-transparency" / "trusted_root.json", material.root / "trusted_root.json")
    publishers = material.root / "keys-publishers.yaml"
    for identity, expected in (("stefanb@us.ibm.com", True), ("someone@us.ibm.com", False)):
        keyless = {
            "issuer": "https://sigstore.verify.ibm.com/oauth2",
            "subject": identity,
            "trustedRoot": {"file": "trusted_root.json"},
        }
        keys = [{"name": "publisher", "modelSigning": {"keyless": keyless}}]
        document = {"metadata": {"name": "publishers"}, "spec": {"keys": keys}}
        publishers.write_text(yaml.safe_dump({"apiVersion": API, "kind": "TrustedKeys", **document}))
        results = _check(material, [pod("signed", engine=signed)], publishers, ONNX_ONLY)
        assert results["signed"]["allowed"] is expected, results["signed"]["violations"]
    (violation,) = results["signed"]["violations"]
    assert violation["rule"] == "models.buildManifest.onnxSignedBy"
    assert "signme.model-signature.json" in violation["message"]


def test_a_model_signature_by_another_key_does_not_count(material: Material) -> None:
    signed = _int8(material, "signed")
    _publish(material)
    write_key(material.root / "publisher.pem")  # the TrustedKeys document now names another key
    results = _check(material, [pod("signed", engine=signed)])
    (violation,) = results["signed"]["violations"]
    assert violation["rule"] == "models.buildManifest.onnxSignedBy"
    assert "another key" in violation["message"]


def test_signers_of_the_wrong_kind_are_load_errors(material: Material) -> None:
    """A build key cannot vouch for a model, nor a model publisher for a build manifest."""
    for signer in ("publisher", "data-team"):
        write_key(material.root / f"{signer}.pem")
    swapped = POLICY.replace("keys: [platform/build-signer]", "keys: [publishers/publisher]").replace(
        "onnxSignedBy: {keys: [publishers/publisher]}", "onnxSignedBy: {keys: [platform/build-signer]}"
    )
    args = ["check", "--attestations", material.attestations, "--policies", material.policy(swapped)]
    args += ["--policies", material.keys_file("build-signer"), "--policies", _publishers(material)]
    source = material.root / "in.yaml"
    source.write_text(yaml.safe_dump(pod("p")))
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        status = main([str(a) for a in [*args, source]])
    assert status == 2
    only = "it counts for onnxSignedBy and calibrationSignedBy only"
    assert f"publishers/publisher is a model-signing signer; {only}" in err.getvalue()
    assert "platform/build-signer is no model-signing signer" in err.getvalue()

"""Issue 30's governance story: the ONNX model signed by its publisher (OpenSSF Model Signing, signed here by
the real ``model_signing`` library) → the engine built from it and its build manifest signed by the build
key → admitted by ``trtguard check``; the same engine built from an ONNX model no publisher signed → denied,
naming the ONNX file and the rule."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import model_signing
import pytest
import yaml

from tests.policies.conftest import Material, pod
from tests.verifier.model_signing.conftest import write_key
from trtguard.cli import main
from verifier.base._digests import sha256_bytes

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
"""
ONNX = b"\x08\x07resnet50 weights, as the publisher released them"


def _publishers(material: Material) -> Path:
    """A TrustedKeys document with the publisher's model-signing key (key method), by file."""
    document = {
        "apiVersion": "trtguard.dev/v1alpha1",
        "kind": "TrustedKeys",
        "metadata": {"name": "publishers"},
        "spec": {"keys": [{"name": "publisher", "modelSigning": {"file": "publisher.pub"}}]},
    }
    path = material.root / "keys-publishers.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def _publish(material: Material) -> None:
    """The publisher's model folder, signed with ``model_signing``; the signature goes to the evidence."""
    write_key(material.root / "publisher.pem")
    folder = material.root / "resnet50"
    folder.mkdir()
    (folder / "resnet50.onnx").write_bytes(ONNX)
    (folder / "config.json").write_text("{}")
    signature = material.attestations / "resnet50.model-signature.json"
    config = model_signing.signing.Config().use_elliptic_key_signer(
        private_key=material.root / "publisher.pem"
    )
    config.sign(folder, signature)


def _check(material: Material, workloads: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    source = material.root / "in.yaml"
    source.write_text(yaml.safe_dump_all(workloads))
    args = ["check", "--attestations", material.attestations, "--format", "json"]
    for policy in (material.policy(POLICY), material.keys_file("build-signer"), _publishers(material)):
        args += ["--policies", policy]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([str(a) for a in [*args, source]])
    assert status in (0, 1), err.getvalue()
    return {r["name"]: r for r in json.loads(out.getvalue())}


@pytest.fixture
def material(tmp_path: Path) -> Material:
    return Material(tmp_path)


def test_an_engine_from_the_signed_onnx_is_admitted_and_one_from_another_denied(material: Material) -> None:
    signed = material.engine("signed", onnx={"sha256": sha256_bytes(ONNX), "name": "resnet50.onnx"})
    unsigned = material.engine("unsigned", onnx={"sha256": "0e" * 32, "name": "resnet50-finetuned.onnx"})
    _publish(material)
    results = _check(material, [pod("signed", engine=signed), pod("unsigned", engine=unsigned)])
    assert results["signed"]["allowed"] is True, results["signed"]["violations"]
    assert results["unsigned"]["allowed"] is False
    (violation,) = results["unsigned"]["violations"]
    assert violation["rule"] == "models.buildManifest.onnxSignedBy"
    assert "resnet50-finetuned.onnx" in violation["message"]
    assert "covered by no model signature of [publishers/publisher]" in violation["message"]
    assert "resnet50.model-signature.json" in violation["message"]  # the signature found, listing it not


def test_a_model_signature_by_another_key_does_not_count(material: Material) -> None:
    signed = material.engine("signed", onnx={"sha256": sha256_bytes(ONNX), "name": "resnet50.onnx"})
    _publish(material)
    write_key(material.root / "publisher.pem")  # the TrustedKeys document now names another key
    results = _check(material, [pod("signed", engine=signed)])
    (violation,) = results["signed"]["violations"]
    assert violation["rule"] == "models.buildManifest.onnxSignedBy"
    assert "another key" in violation["message"]


def test_signers_of_the_wrong_kind_are_load_errors(material: Material) -> None:
    """A build key cannot vouch for a model, nor a model publisher for a build manifest."""
    write_key(material.root / "publisher.pem")
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
    assert "publishers/publisher is a model-signing signer; it counts for onnxSignedBy only" in err.getvalue()
    assert "platform/build-signer is no model-signing signer" in err.getvalue()

"""verifier/registry/_oci.py: strict parsing of manifests and indexes, and the documents trtguard writes."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any

import pytest

from verifier.base._errors import InputError
from verifier.registry._auth import parse_docker_config
from verifier.registry._failures import error_detail
from verifier.registry._oci import (
    DOCKER_MANIFEST,
    DOCKER_MANIFEST_LIST,
    EMPTY_DESCRIPTOR,
    OCI_CONFIG,
    OCI_INDEX,
    OCI_MANIFEST,
    Descriptor,
    InvalidDocument,
    Manifest,
    image_index,
    image_manifest,
)

LAYER = Descriptor.for_bytes("application/octet-stream", b"layer")
CONFIG = Descriptor.for_bytes(OCI_CONFIG, b"{}")


def _parse(document: dict[str, Any], content_type: str | None = OCI_MANIFEST) -> Manifest:
    return Manifest.parse(json.dumps(document).encode(), content_type=content_type, where="m")


def _manifest(**extra: Any) -> dict[str, Any]:
    return {"schemaVersion": 2, "config": CONFIG.to_json(), "layers": [LAYER.to_json()], **extra}


def test_digest_is_of_the_bytes_as_received() -> None:
    data = json.dumps(_manifest(mediaType=OCI_MANIFEST), indent=7).encode()
    manifest = Manifest.parse(data, content_type=OCI_MANIFEST, where="m")
    assert manifest.digest == "sha256:" + hashlib.sha256(data).hexdigest()
    assert manifest.layers == (LAYER,) and manifest.config == CONFIG and manifest.subject is None


def test_media_type_from_document_or_header_or_shape() -> None:
    assert _parse(_manifest(mediaType=DOCKER_MANIFEST), content_type=None).media_type == DOCKER_MANIFEST
    assert _parse(_manifest(), content_type=DOCKER_MANIFEST).media_type == DOCKER_MANIFEST
    assert _parse(_manifest(), content_type="application/json").media_type == OCI_MANIFEST
    index = _parse({"schemaVersion": 2, "manifests": [LAYER.to_json()]}, content_type=None)
    assert index.is_index and index.media_type == OCI_INDEX
    listed = _parse(
        {"schemaVersion": 2, "mediaType": DOCKER_MANIFEST_LIST, "manifests": []}, content_type=None
    )
    assert listed.is_index


@pytest.mark.parametrize(
    ("document", "content_type", "words"),
    [
        (_manifest(mediaType=OCI_INDEX), OCI_MANIFEST, "served as"),
        (_manifest(schemaVersion=1), OCI_MANIFEST, "schemaVersion"),
        (
            {"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v1+prettyjws"},
            None,
            "not a manifest",
        ),
        (
            _manifest(layers=[{"mediaType": "x", "digest": "sha512:" + "a" * 128, "size": 1}]),
            OCI_MANIFEST,
            "layers[0].digest",
        ),
        (
            _manifest(layers=[{"mediaType": "x", "digest": LAYER.digest, "size": -1}]),
            OCI_MANIFEST,
            "layers[0].size",
        ),
        (
            _manifest(layers=[{"mediaType": "x", "digest": LAYER.digest, "size": True}]),
            OCI_MANIFEST,
            "layers[0].size",
        ),
        (_manifest(layers=[{"digest": LAYER.digest, "size": 1}]), OCI_MANIFEST, "layers[0].mediaType"),
        (_manifest(config=None), OCI_MANIFEST, "config is not an object"),
        (_manifest(layers={}), OCI_MANIFEST, "layers is not a list"),
        (
            _manifest(subject={"mediaType": OCI_MANIFEST, "digest": "sha256:zz", "size": 1}),
            OCI_MANIFEST,
            "subject.digest",
        ),
        (_manifest(layers=[{**LAYER.to_json(), "annotations": {"a": 1}}]), OCI_MANIFEST, "annotations"),
    ],
)
def test_malformed_documents_name_the_field(
    document: dict[str, Any], content_type: str | None, words: str
) -> None:
    with pytest.raises(InvalidDocument, match=re.escape(words)):
        _parse(document, content_type)


def test_not_json() -> None:
    with pytest.raises(InvalidDocument, match="not JSON"):
        Manifest.parse(b"\xff", content_type=None, where="m")
    with pytest.raises(InvalidDocument, match="not a JSON object"):
        Manifest.parse(b"[]", content_type=None, where="m")


def test_artifact_type_follows_the_referrers_rule() -> None:
    assert _parse(_manifest(artifactType="application/x")).artifact_type == "application/x"
    assert _parse(_manifest()).artifact_type is None  # an image
    notation = _manifest(
        config=Descriptor.for_bytes("application/vnd.cncf.notary.signature", b"{}").to_json()
    )
    assert _parse(notation).artifact_type == "application/vnd.cncf.notary.signature"


def test_written_manifest_embeds_the_empty_config_and_round_trips() -> None:
    subject = Descriptor.for_bytes(OCI_MANIFEST, b"subject", annotations={"dropped": "yes"})
    data = image_manifest(
        config=EMPTY_DESCRIPTOR,
        layers=[LAYER],
        artifact_type="application/x",
        subject=subject,
        annotations={"k": "v"},
    )
    document = json.loads(data)
    assert document["config"]["data"] == base64.b64encode(b"{}").decode()
    assert document["subject"] == {"mediaType": OCI_MANIFEST, "digest": subject.digest, "size": subject.size}
    manifest = Manifest.parse(data, content_type=OCI_MANIFEST, where="m")
    assert manifest.artifact_type == "application/x" and manifest.annotations == {"k": "v"}
    assert manifest.subject is not None and manifest.subject.digest == subject.digest
    assert manifest.descriptor == Descriptor(OCI_MANIFEST, manifest.digest, len(data), "application/x")


def test_written_index() -> None:
    entry = Descriptor(OCI_MANIFEST, LAYER.digest, 5, artifact_type="a/b", annotations={"x": "y"})
    index = Manifest.parse(image_index([entry]), content_type=OCI_INDEX, where="i")
    assert index.manifests == (entry,)


def test_a_manifest_nested_too_deeply_is_invalid_not_a_crash() -> None:
    # Issue 24 item 11: json.loads raises RecursionError (not a ValueError) past Python's nesting limit; a
    # registry serving such a body gave a traceback instead of a refusal of that one document.
    deep = b'{"layers": [' * 100_000 + b"]}" * 100_000
    with pytest.raises(InvalidDocument, match="m is not JSON"):
        Manifest.parse(deep, content_type=OCI_MANIFEST, where="m")


def test_other_registry_json_nested_too_deeply_is_refused_not_a_crash() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    assert error_detail(deep) == ""
    with pytest.raises(InputError, match="credentials file is not JSON"):
        parse_docker_config(deep, source="config.json")

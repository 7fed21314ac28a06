"""OCI documents: media types, descriptors, manifests and indexes, parsed strictly from verified bytes."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from verifier.base import is_sha256_hex, sha256_bytes

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_EMPTY = "application/vnd.oci.empty.v1+json"
#: The OCI empty descriptor's content: ``{}``.
EMPTY_JSON = b"{}"

_IMAGE_CONFIGS = frozenset({OCI_CONFIG, "application/vnd.docker.container.image.v1+json"})
IMAGE_MANIFESTS = frozenset({OCI_MANIFEST, DOCKER_MANIFEST})
INDEXES = frozenset({OCI_INDEX, DOCKER_MANIFEST_LIST})
#: Every manifest type the client asks for and accepts (Docker schema 1 is not: its digest is not stable).
MANIFEST_TYPES = IMAGE_MANIFESTS | INDEXES


class InvalidDocument(ValueError):
    """An OCI document that does not follow the spec; the message says which field."""


@dataclass(frozen=True, slots=True)
class Descriptor:
    """An OCI content descriptor."""

    media_type: str
    digest: str
    size: int
    artifact_type: str | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)
    platform: Mapping[str, Any] | None = None

    @classmethod
    def for_bytes(
        cls,
        media_type: str,
        data: bytes,
        *,
        artifact_type: str | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> Descriptor:
        """The descriptor of ``data``."""
        return cls(
            media_type=media_type,
            digest=f"sha256:{sha256_bytes(data)}",
            size=len(data),
            artifact_type=artifact_type,
            annotations=dict(annotations or {}),
        )

    @classmethod
    def from_json(cls, value: Any, *, where: str) -> Descriptor:
        """Parse a descriptor object; raises :class:`InvalidDocument` naming ``where``."""
        if not isinstance(value, dict):
            raise InvalidDocument(f"{where} is not an object")
        media_type = value.get("mediaType")
        digest = value.get("digest")
        size = value.get("size")
        if not isinstance(media_type, str) or not media_type:
            raise InvalidDocument(f"{where}.mediaType is missing")
        if not isinstance(digest, str) or not digest.startswith("sha256:") or not is_sha256_hex(digest[7:]):
            raise InvalidDocument(f"{where}.digest {digest!r} is not a sha256 digest")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise InvalidDocument(f"{where}.size is not a non-negative integer")
        artifact_type = value.get("artifactType")
        if artifact_type is not None and not isinstance(artifact_type, str):
            raise InvalidDocument(f"{where}.artifactType is not a string")
        annotations = value.get("annotations") or {}
        if not isinstance(annotations, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in annotations.items()
        ):
            raise InvalidDocument(f"{where}.annotations is not a map of strings")
        platform = value.get("platform")
        if platform is not None and not isinstance(platform, dict):
            raise InvalidDocument(f"{where}.platform is not an object")
        return cls(media_type, digest, size, artifact_type, annotations, platform)

    def to_json(self) -> dict[str, Any]:
        """The descriptor as a JSON object (members in the order the OCI examples use)."""
        value: dict[str, Any] = {"mediaType": self.media_type, "digest": self.digest, "size": self.size}
        if self.artifact_type:
            value["artifactType"] = self.artifact_type
        if self.annotations:
            value["annotations"] = dict(self.annotations)
        if self.platform:
            value["platform"] = dict(self.platform)
        return value


EMPTY_DESCRIPTOR = Descriptor.for_bytes(OCI_EMPTY, EMPTY_JSON)


@dataclass(frozen=True, slots=True)
class Manifest:
    """A manifest or index exactly as received, with the digest of those bytes and its parsed parts."""

    media_type: str
    digest: str
    data: bytes
    document: Mapping[str, Any]

    @classmethod
    def parse(cls, data: bytes, *, content_type: str | None, where: str) -> Manifest:
        """Parse manifest bytes; the media type comes from the document, else from ``content_type``.

        A document whose ``mediaType`` contradicts the Content-Type header is refused: a client must not be
        talked into reading an index as an image manifest or the other way round.
        """
        try:
            document = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
            raise InvalidDocument(f"{where} is not JSON: {error}") from error
        if not isinstance(document, dict):
            raise InvalidDocument(f"{where} is not a JSON object")
        if document.get("schemaVersion") != 2:
            raise InvalidDocument(f"{where} has schemaVersion {document.get('schemaVersion')!r}, not 2")
        declared = document.get("mediaType")
        header = (content_type or "").split(";", 1)[0].strip().lower() or None
        if declared is not None and not isinstance(declared, str):
            raise InvalidDocument(f"{where}.mediaType is not a string")
        if declared and header and header in MANIFEST_TYPES and declared != header:
            raise InvalidDocument(f"{where} says mediaType {declared} but was served as {header}")
        media_type = declared or header
        if media_type not in MANIFEST_TYPES:
            # OCI lets mediaType be absent: tell an index from a manifest by its members.
            if "manifests" in document and "layers" not in document:
                media_type = OCI_INDEX
            elif "layers" in document or "config" in document:
                media_type = OCI_MANIFEST
            else:
                raise InvalidDocument(f"{where} has media type {media_type!r}, not a manifest or index")
        manifest = cls(media_type, f"sha256:{sha256_bytes(data)}", data, document)
        manifest._check()
        return manifest

    def _check(self) -> None:
        # Parse every descriptor now, so that later accessors work on checked data and cannot raise.
        if self.is_index:
            self._descriptors("manifests")
        else:
            Descriptor.from_json(self.document.get("config"), where="config")
            self._descriptors("layers")
        if self.document.get("subject") is not None:
            Descriptor.from_json(self.document["subject"], where="subject")

    @property
    def is_index(self) -> bool:
        """True for an OCI index or Docker manifest list."""
        return self.media_type in INDEXES

    @property
    def descriptor(self) -> Descriptor:
        """A descriptor pointing at this manifest."""
        return Descriptor(self.media_type, self.digest, len(self.data), self.artifact_type)

    @property
    def artifact_type(self) -> str | None:
        """``artifactType``, else (for an image manifest) the config media type when it is not an image's.

        This is the rule the OCI referrers API applies to manifests without ``artifactType``.
        """
        value = self.document.get("artifactType")
        if isinstance(value, str) and value:
            return value
        if self.is_index:
            return None
        config_type = self.config.media_type
        return None if config_type in _IMAGE_CONFIGS else config_type

    @property
    def annotations(self) -> Mapping[str, str]:
        """Manifest annotations (empty when absent or malformed members are left out)."""
        value = self.document.get("annotations") or {}
        if not isinstance(value, dict):
            return {}
        return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}

    @property
    def config(self) -> Descriptor:
        """The config descriptor of an image manifest."""
        if self.is_index:
            raise InvalidDocument("an index has no config")
        return Descriptor.from_json(self.document.get("config"), where="config")

    @property
    def layers(self) -> tuple[Descriptor, ...]:
        """The layer descriptors of an image manifest."""
        return self._descriptors("layers")

    @property
    def manifests(self) -> tuple[Descriptor, ...]:
        """The manifest descriptors of an index."""
        return self._descriptors("manifests")

    @property
    def subject(self) -> Descriptor | None:
        """The OCI 1.1 ``subject`` this manifest refers to, if any."""
        value = self.document.get("subject")
        return None if value is None else Descriptor.from_json(value, where="subject")

    def _descriptors(self, member: str) -> tuple[Descriptor, ...]:
        value = self.document.get(member, [])
        if not isinstance(value, list):
            raise InvalidDocument(f"{member} is not a list")
        return tuple(Descriptor.from_json(item, where=f"{member}[{i}]") for i, item in enumerate(value))


def encode_json(document: Mapping[str, Any]) -> bytes:
    """Compact JSON bytes (the form pushed to registries; its digest is what gets referred to)."""
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


def image_manifest(
    *,
    config: Descriptor,
    layers: Sequence[Descriptor],
    artifact_type: str | None = None,
    subject: Descriptor | None = None,
    annotations: Mapping[str, str] | None = None,
) -> bytes:
    """The bytes of an OCI image manifest."""
    document: dict[str, Any] = {"schemaVersion": 2, "mediaType": OCI_MANIFEST}
    if artifact_type:
        document["artifactType"] = artifact_type
    config_json = config.to_json()
    if config.media_type == OCI_EMPTY and config.digest == EMPTY_DESCRIPTOR.digest:
        # The spec recommends embedding the two bytes, which spares registries and clients a round trip.
        config_json["data"] = base64.b64encode(EMPTY_JSON).decode()
    document["config"] = config_json
    document["layers"] = [layer.to_json() for layer in layers]
    if subject is not None:
        document["subject"] = Descriptor(subject.media_type, subject.digest, subject.size).to_json()
    if annotations:
        document["annotations"] = dict(annotations)
    return encode_json(document)


def image_index(manifests: Sequence[Descriptor], *, annotations: Mapping[str, str] | None = None) -> bytes:
    """The bytes of an OCI image index."""
    document: dict[str, Any] = {
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [m.to_json() for m in manifests],
    }
    if annotations:
        document["annotations"] = dict(annotations)
    return encode_json(document)

"""Where signatures and attestations for an artifact come from.

An :class:`EvidenceSource` answers four questions about an OCI reference: which digest a tag points at, which
digests stand for the artifact (its manifest digest and, for an engine artifact, its layer digests, which are
the engine file's sha256), which DSSE attestations are attached to it, and which image signatures exist. It
returns unverified material; the policy evaluator verifies it against the keys a policy names.

:class:`LocalEvidence` serves a folder of files for offline checks (``trtguard check --attestations DIR``):
DSSE envelopes (``*.json``, ``*.dsse``, ``*.intoto.jsonl`` with one envelope per line), Sigstore bundles that
carry a DSSE envelope, and engine artifact manifests (which map an artifact digest to its layer digests).
Files it cannot use (a message-signature bundle, an envelope that carries no in-toto statement, an OCI
manifest of another kind of artifact) are left out and listed in :attr:`LocalEvidence.skipped`; files that
are broken (not JSON, a malformed envelope or statement) are an :class:`~verifier.errors.InputError`.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from verifier._private.files import read_limited
from verifier.deadline import Deadline
from verifier.dsse import Envelope
from verifier.errors import EvidenceUnavailable, InputError
from verifier.intoto import PAYLOAD_TYPE, statement_from_envelope
from verifier.references import ImageReference
from verifier.registry.oci import InvalidDocument, Manifest
from verifier.registry.push import ENGINE_ARTIFACT_TYPE, InvalidEngineArtifact, engine_layers
from verifier.signatures import COSIGN_SIGN_PREDICATE, CosignSignature

__all__ = [
    "COSIGN_SIGN_PREDICATE",
    "MAX_EVIDENCE_BYTES",
    "Attestation",
    "EvidenceSource",
    "ImageSignatures",
    "LocalEvidence",
    "SkippedFile",
]

_log = logging.getLogger(__name__)

_OCI_MANIFEST_TYPES = frozenset(
    {"application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json"}
)
#: Largest signature or attestation document read, from a folder or a registry (real ones are a few KiB).
MAX_EVIDENCE_BYTES: Final = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Attestation:
    """A DSSE envelope with the subjects and predicate type of the statement it carries (unverified)."""

    envelope: Envelope
    predicate_type: str
    subjects: frozenset[str]
    origin: str


@dataclass(frozen=True, slots=True)
class SkippedFile:
    """A file of an attestation folder that was left out, and why (it never counts as evidence)."""

    location: str  # the file, or "file:line" in a JSON-lines file
    reason: str


@dataclass(frozen=True, slots=True)
class ImageSignatures:
    """Unverified signature material found for one image digest, as ``verify_image_signatures`` takes it."""

    digest: str
    #: Layers of the classic ``sha256-<digest>.sig`` manifest (cosign ≤ 2, ``trtguard sign``).
    classic: tuple[CosignSignature, ...] = ()
    #: Sigstore bundles (JSON) carrying a cosign v3 signature: keyed, or keyless with a certificate.
    bundles: tuple[bytes, ...] = ()
    #: Bare DSSE envelopes of ``https://sigstore.dev/cosign/sign/v1`` statements (attestation folders).
    statements: tuple[Attestation, ...] = ()
    origin: str = ""

    @property
    def count(self) -> int:
        """How many signatures were found, of all kinds."""
        return len(self.classic) + len(self.bundles) + len(self.statements)


class EvidenceSource(Protocol):
    """A source of digests, attestations and signatures for OCI artifacts."""

    @property
    def description(self) -> str:
        """Where the evidence comes from, for messages ("attestation folder ./att", "registry")."""
        ...

    @property
    def concurrent_lookups(self) -> bool:
        """True when look-ups wait on the network, so that starting several at once pays off."""
        ...

    async def resolve_digest(self, reference: ImageReference, deadline: Deadline) -> str:
        """The ``sha256:…`` digest ``reference`` points at (its own digest when it has one)."""
        ...

    async def subject_digests(self, reference: ImageReference, deadline: Deadline) -> frozenset[str]:
        """Digests that stand for the artifact: the manifest digest and, for artifacts, the layer digests."""
        ...

    async def attestations(self, reference: ImageReference, deadline: Deadline) -> Sequence[Attestation]:
        """DSSE attestations whose statement subject is one of :meth:`subject_digests`."""
        ...

    async def image_signatures(self, reference: ImageReference, deadline: Deadline) -> ImageSignatures:
        """Signatures over the image digest (``reference`` carries a digest)."""
        ...


class LocalEvidence:
    """Evidence from a folder of files; offline, so it cannot resolve tags or read a registry."""

    def __init__(self, folder: Path | None = None) -> None:
        """Read every evidence file under ``folder``; with no folder there is no evidence at all."""
        self._folder = folder
        self._by_subject: dict[str, list[Attestation]] = defaultdict(list)
        self._signature_bundles: dict[str, list[bytes]] = defaultdict(list)
        self._layers: dict[str, frozenset[str]] = {}
        self._malformed_artifacts: dict[str, str] = {}
        self._skipped: list[SkippedFile] = []
        if folder is None:
            return
        if not folder.is_dir():
            raise InputError(f"attestation folder {folder} does not exist or is not a folder")
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            self._load(path)

    @property
    def description(self) -> str:
        """Human-readable origin."""
        if self._folder is None:
            return "no attestation folder given (--attestations)"
        return f"attestation folder {self._folder}"

    @property
    def concurrent_lookups(self) -> bool:
        """Answers come from memory: nothing is gained by starting them together."""
        return False

    @property
    def skipped(self) -> tuple[SkippedFile, ...]:
        """Evidence files that were left out because trtguard cannot use them, each with the reason."""
        return tuple(self._skipped)

    def _skip(self, location: str, reason: str) -> None:
        _log.warning("skipping %s: %s", location, reason)
        self._skipped.append(SkippedFile(location, reason))

    def _load(self, path: Path) -> None:
        if path.name.startswith(".") or path.suffix not in (".json", ".dsse", ".jsonl"):
            return
        raw = read_limited(path, MAX_EVIDENCE_BYTES, "the evidence file")
        if path.suffix == ".jsonl":
            for number, line in enumerate(raw.splitlines(), start=1):
                if line.strip():
                    self._add_json(line, f"{path}:{number}")
            return
        self._add_json(raw, str(path))

    def _add_json(self, raw: bytes, location: str) -> None:
        try:
            document: Any = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise InputError(
                "not JSON", location=location, hint="the folder holds JSON evidence files"
            ) from None
        if isinstance(document, dict) and document.get("mediaType") in _OCI_MANIFEST_TYPES:
            self._add_manifest(raw, location)
            return
        bundle = (
            raw if isinstance(document, dict) and isinstance(document.get("dsseEnvelope"), dict) else None
        )
        if bundle is not None:
            document = document["dsseEnvelope"]  # a Sigstore bundle: the statement is in its envelope
        elif isinstance(document, dict) and "messageSignature" in document:
            self._skip(
                location,
                "a Sigstore bundle with a message signature, not a statement: an attestation folder holds "
                "bundles that carry a DSSE statement",
            )
            return
        if not (isinstance(document, dict) and "payloadType" in document):
            raise InputError(
                "neither a DSSE envelope, a Sigstore bundle nor an OCI image manifest",
                location=location,
                hint="remove unrelated files from the attestation folder",
            )
        envelope = Envelope.from_dict(document, location=location)
        if envelope.payload_type != PAYLOAD_TYPE:
            self._skip(
                location,
                f"a DSSE envelope of payload type {envelope.payload_type!r}, not an in-toto statement",
            )
            return
        statement = statement_from_envelope(envelope, location=location)
        attestation = Attestation(
            envelope=envelope,
            predicate_type=statement.predicate_type,
            subjects=statement.subject_digests(),
            origin=location,
        )
        for digest in attestation.subjects:
            if bundle is not None and attestation.predicate_type == COSIGN_SIGN_PREDICATE:
                # Kept whole: a keyless bundle's certificate and log entry are part of the signature.
                self._signature_bundles[digest].append(bundle)
            else:
                self._by_subject[digest].append(attestation)

    def _add_manifest(self, raw: bytes, location: str) -> None:
        """Map an engine artifact's digest to its layer digests; other manifests stand only for themselves."""
        try:
            manifest = Manifest.parse(raw, content_type=None, where=location)
        except InvalidDocument as error:
            raise InputError(f"not a valid OCI manifest: {error}", location=location) from error
        if manifest.artifact_type != ENGINE_ARTIFACT_TYPE:
            # Only the strictly checked engine layout may let a layer digest (a file's sha256) stand for the
            # artifact: the layers of anything else could carry any file next to a signed engine.
            self._skip(
                location,
                f"an OCI manifest of artifact type {manifest.artifact_type!r}, not an engine artifact"
                f" ({ENGINE_ARTIFACT_TYPE}): its layers do not stand for it",
            )
            return
        try:
            layers = engine_layers(manifest)
        except InvalidEngineArtifact as error:
            self._malformed_artifacts[manifest.digest] = f"{error} ({location})"
            return
        self._layers[manifest.digest] = frozenset(layer.digest for layer in layers if layer is not None)

    async def resolve_digest(self, reference: ImageReference, deadline: Deadline) -> str:
        """The reference's own digest; a tag cannot be resolved offline."""
        if reference.digest is not None:
            return reference.digest
        raise EvidenceUnavailable(
            f"{reference} has no digest and the tag cannot be resolved offline",
            transient=False,
            hint="pin the image by digest, or check against a registry (--registry)",
        )

    async def subject_digests(self, reference: ImageReference, deadline: Deadline) -> frozenset[str]:
        """The reference's digest plus, for an engine artifact whose manifest the folder holds, its layers.

        An engine artifact manifest that does not follow the layout ``trtguard push-engine`` writes is
        refused, as :class:`~verifier.registry.evidence.RegistryEvidence` refuses it.
        """
        digest = await self.resolve_digest(reference, deadline)
        malformed = self._malformed_artifacts.get(digest)
        if malformed is not None:
            raise EvidenceUnavailable(
                f"{reference.name}@{digest} is not a well-formed engine artifact: {malformed}",
                transient=False,
                location=f"engine {reference.name}@{digest}",
                hint="push the engine with trtguard push-engine",
            )
        return frozenset({digest}) | self._layers.get(digest, frozenset())

    async def attestations(self, reference: ImageReference, deadline: Deadline) -> Sequence[Attestation]:
        """Attestations in the folder whose subject is one of the artifact's digests."""
        found: dict[int, Attestation] = {}
        for digest in await self.subject_digests(reference, deadline):
            for attestation in self._by_subject.get(digest, ()):
                found[id(attestation)] = attestation
        return tuple(found.values())

    async def image_signatures(self, reference: ImageReference, deadline: Deadline) -> ImageSignatures:
        """cosign v3 signatures for the image digest: Sigstore bundles and bare signing statements."""
        digest = await self.resolve_digest(reference, deadline)
        statements = tuple(
            a for a in self._by_subject.get(digest, ()) if a.predicate_type == COSIGN_SIGN_PREDICATE
        )
        return ImageSignatures(
            digest=digest,
            bundles=tuple(self._signature_bundles.get(digest, ())),
            statements=statements,
            origin=self.description,
        )

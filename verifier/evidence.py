"""Where signatures and attestations for an artifact come from.

An :class:`EvidenceSource` answers four questions about an OCI reference: which digest a tag points at,
which digests stand for the artifact (:class:`ArtifactSubjects`: its manifest digest and, for an engine
artifact, the digest of its engine layer, which is the engine file's sha256), which DSSE attestations are
attached to it, and which image signatures exist. It returns unverified material; the policy evaluator
verifies it against the keys a policy names, and :meth:`ArtifactSubjects.require_describes` decides whether a
verified statement is about this artifact's engine at all.

:class:`~verifier.evidence_folder.LocalEvidence` serves a folder of files for offline checks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from verifier.base import Deadline, ImageReference, VerificationError
from verifier.crypto import Envelope, Statement
from verifier.manifest import EngineBuildManifest
from verifier.registry import Descriptor, Manifest
from verifier.registry.engine_artifact import (
    ENGINE_ARTIFACT_TYPE,
    ENGINE_LAYER,
    InvalidEngineArtifact,
    engine_layers,
)
from verifier.signatures import COSIGN_SIGN_PREDICATE, CosignSignature

if TYPE_CHECKING:  # Notation's verifier loads when a Notation signature is found (start-up time, issue 15)
    from verifier.signatures.notation import NotationSignature

__all__ = [
    "COSIGN_SIGN_PREDICATE",
    "ArtifactAttestations",
    "ArtifactSubjects",
    "Attestation",
    "EvidenceSource",
    "ImageSignatures",
    "SkippedFile",
    "UncheckedStatement",
]

_UNKNOWN_ENGINE = (
    "push the engine with `trtguard push-engine` (offline: put the artifact's OCI manifest into the "
    "attestation folder, as `trtguard fetch-attestations` does), or sign the statement with the artifact "
    "digest as a subject"
)


@dataclass(frozen=True, slots=True)
class ArtifactSubjects:
    """Which digest of an artifact is which: what may find attestations about it, and what they must describe.

    ``artifact`` is the manifest digest D the reference names. ``engine_file`` is the digest L of the engine
    layer of an engine artifact (``application/vnd.trtguard.engine.v1``, the file's sha256), or None when it
    is unknown: the reference is not an engine artifact, or offline the folder lacks its OCI manifest.
    Only D and L find attestations (:attr:`digests`). ``onnx_file`` and ``calibration_cache_file`` are the
    engine artifact's other layers: they never find an attestation, and a build manifest must name them as
    its inputs (:meth:`require_build_manifest`), since they are mounted beside the engine.
    """

    artifact: str
    engine_file: str | None = None
    onnx_file: str | None = None
    calibration_cache_file: str | None = None
    #: What the artifact is, for messages ("an engine artifact", "an image index", ...).
    layout: str = "an artifact whose manifest was not read"

    @classmethod
    def of_manifest(cls, manifest: Manifest) -> ArtifactSubjects:
        """The subjects of the artifact ``manifest`` is the manifest of.

        Only the strictly checked engine layout (:func:`~verifier.registry.engine_artifact.engine_layers`)
        has an engine layer; any other manifest stands for its own digest only, since its layers could carry
        any file. Raises :class:`~verifier.registry.engine_artifact.InvalidEngineArtifact` for an engine
        artifact that breaks the layout, and for an artifact type that differs from the engine type only in
        case or white space (no reader should have to guess which one was meant).
        """
        if manifest.is_index:
            return cls(manifest.digest, layout="an image index, whose platform manifests are what runs")
        artifact_type = manifest.artifact_type
        if artifact_type != ENGINE_ARTIFACT_TYPE:
            if artifact_type is not None and artifact_type.strip().lower() == ENGINE_ARTIFACT_TYPE:
                raise InvalidEngineArtifact(
                    f"its artifact type {artifact_type!r} is not exactly {ENGINE_ARTIFACT_TYPE}"
                )
            layout = f"an OCI artifact of type {artifact_type}" if artifact_type else "an image manifest"
            return cls(manifest.digest, layout=f"{layout}, not an engine artifact")
        engine, calibration_cache, onnx = engine_layers(manifest)
        return cls(
            manifest.digest,
            engine.digest,
            onnx.digest if onnx is not None else None,
            calibration_cache.digest if calibration_cache is not None else None,
            layout="an engine artifact",
        )

    @property
    def digests(self) -> frozenset[str]:
        """The digests whose attestations are about this artifact: D and, for an engine artifact, L."""
        return frozenset({self.artifact} if self.engine_file is None else {self.artifact, self.engine_file})

    def require_describes(self, engine_sha256: str, statement_subjects: frozenset[str], what: str) -> None:
        """Raise :class:`VerificationError` unless a statement that describes ``engine_sha256`` counts here.

        With the engine layer L known, the described engine file must be L, whichever of D and L found the
        statement. Without it, only a statement whose subject is D itself counts: its signer vouched for
        exactly these bytes, and what it says about the files inside D cannot be compared with anything.
        ``engine_sha256`` is bare hex or ``sha256:<hex>``; ``what`` names the statement ("the build
        manifest").
        """
        described = engine_sha256 if engine_sha256.startswith("sha256:") else f"sha256:{engine_sha256}"
        if self.engine_file is not None:
            if described != self.engine_file:
                raise VerificationError(
                    f"{what} describes the engine file {described}, not the engine layer "
                    f"{self.engine_file} of artifact {self.artifact}",
                    hint="attach the statement made for the engine file this artifact carries (its "
                    f"{ENGINE_LAYER} layer); a statement about another file, or about the artifact's ONNX "
                    "or calibration-cache layer, never counts for the engine",
                )
            return
        if self.artifact not in statement_subjects:
            named = ", ".join(sorted(statement_subjects)) or "no sha256 digest"
            raise VerificationError(f"{what} is about {named}{self._unknown_engine()}", hint=_UNKNOWN_ENGINE)

    def not_found(self, what: str, where: str | None = None) -> VerificationError:
        """The error for finding no ``what`` (in ``where``); it says why when the engine layer is unknown."""
        message = f"no {what} found" + (f" ({where})" if where else "")
        if self.engine_file is not None:
            return VerificationError(message)
        return VerificationError(message + self._unknown_engine(), hint=_UNKNOWN_ENGINE)

    def _unknown_engine(self) -> str:
        return (
            f"; the engine layer of {self.artifact} is unknown ({self.layout}), so only a statement whose "
            "subject is the artifact digest itself counts"
        )

    def require_build_manifest(
        self, manifest: EngineBuildManifest, statement_subjects: frozenset[str]
    ) -> None:
        """Raise :class:`VerificationError` unless ``manifest`` describes this artifact's engine and files.

        The engine as :meth:`require_describes` says; and an engine artifact's ONNX and calibration-cache
        layers, which are mounted beside the engine under names the pusher chose, must be the inputs the
        manifest records: a file no signer recorded could be loaded in place of the engine.
        """
        what = "the build manifest"
        self.require_describes(manifest.output_engine.sha256, statement_subjects, what)
        cache = manifest.calibration.cache if manifest.calibration is not None else None
        for layer, recorded, field in (
            (self.onnx_file, f"sha256:{manifest.onnx.sha256}", "onnx.sha256"),
            (
                self.calibration_cache_file,
                f"sha256:{cache.sha256}" if cache else None,
                "calibration.cache.sha256",
            ),
        ):
            if layer is not None and layer != recorded:
                raise VerificationError(
                    f"artifact {self.artifact} carries the file {layer} beside its engine, but {what} "
                    f"records {field} = {recorded or 'none'}",
                    hint="push the engine with the ONNX model and calibration cache it was built from (the "
                    "ones its build manifest records), or without them",
                )


@dataclass(frozen=True, slots=True)
class Attestation:
    """A DSSE envelope with the subjects and predicate type of the statement it carries (unverified).

    ``subjects`` are the statement's own subject digests (what its signer says it is about), not the
    artifact's: see :class:`ArtifactSubjects` for those. ``openpgp_signatures`` are detached OpenPGP
    signatures over the statement's exact bytes (``envelope.payload``): a statement signed that way arrives
    as an envelope without DSSE signatures, so that nothing that verifies DSSE alone can count it.
    """

    envelope: Envelope
    predicate_type: str
    subjects: frozenset[str]
    origin: str
    openpgp_signatures: tuple[bytes, ...] = ()
    #: The Sigstore bundle the envelope came in, whole, where it came in one: its verification material
    #: (certificate chain, key hint) is part of formats that sign so (model-signing).
    bundle: bytes | None = None
    #: Other detached signatures over the statement's exact bytes, each with the kind it was filed as (the
    #: suffix of a folder's ``X.json.<kind>`` beside ``X.json``, without the dot): a statement signature
    #: format picks its own kind, so that a reader need not know which formats exist.
    detached: tuple[tuple[str, bytes], ...] = ()

    @classmethod
    def of(
        cls,
        envelope: Envelope,
        statement: Statement,
        origin: str,
        *,
        openpgp_signatures: tuple[bytes, ...] = (),
        bundle: bytes | None = None,
        detached: tuple[tuple[str, bytes], ...] = (),
    ) -> Attestation:
        """The attestation of ``envelope``, whose payload is ``statement``: its subjects and type are the
        statement's."""
        return cls(
            envelope,
            statement.predicate_type,
            statement.subject_digests(),
            origin,
            openpgp_signatures,
            bundle,
            detached,
        )


@dataclass(frozen=True, slots=True)
class UncheckedStatement:
    """A statement left unread before its signature could be checked: larger than the evidence limit, or
    nested deeper than the parser goes. It may be signed evidence, perhaps the newest, so a rule of the type
    it claims cannot tell what the image's documents say (docs/scans.md), rather than judge the others as
    if it were not there. ``predicate_type`` and ``subjects`` are what it claims (unverified), None where
    they could not be read: then it may be of any type, about any digest."""

    origin: str
    reason: str
    predicate_type: str | None = None
    subjects: frozenset[str] | None = None

    def about(self, digests: frozenset[str]) -> bool:
        """Whether it may be about one of ``digests``."""
        return self.subjects is None or bool(self.subjects & digests)

    def describe(self) -> str:
        """``origin: why`` with the type it claims, for a rule's "cannot tell"."""
        claimed = f"; it claims type {self.predicate_type}" if self.predicate_type else ""
        return f"{self.origin}: {self.reason}, so its signature could not be checked{claimed}"


@dataclass(frozen=True, slots=True)
class ArtifactAttestations:
    """The attestations found for an artifact, with the subjects that found them (read together)."""

    subjects: ArtifactSubjects
    attestations: tuple[Attestation, ...] = ()
    #: Statements found beside the artifact (attached to it in a registry, in its scope of a folder) that are
    #: about other digests: they never count, but a message that finds none about the artifact names them.
    elsewhere: tuple[Attestation, ...] = ()
    #: Statements that may be about the artifact but could not be read to check (:class:`UncheckedStatement`).
    unchecked: tuple[UncheckedStatement, ...] = ()

    def about_other_digests(
        self, predicate_type: str, shown: int = 3, *, counts: Callable[[str], bool] | None = None
    ) -> str:
        """``; found N about other digests: ORIGIN (about sha256:…), …`` for ``predicate_type`` (or the
        types ``counts`` accepts: a family of SBOM or scan types), or ``""``."""
        accepts = counts or predicate_type.__eq__
        other = [a for a in self.elsewhere if accepts(a.predicate_type)]
        if not other:
            return ""
        named = ", ".join(
            f"{a.origin} (about {', '.join(sorted(a.subjects)) or 'no sha256 digest'})" for a in other[:shown]
        )
        more = f" and {len(other) - shown} more" if len(other) > shown else ""
        return f"; found {len(other)} signed about other digests, which never count: {named}{more}"


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
    #: Notary Project signature envelopes (referrers of type ``application/vnd.cncf.notary.signature``).
    notation: tuple[NotationSignature, ...] = ()
    #: The image manifest's descriptor (media type, digest, size), which a Notation signature's payload
    #: must name exactly; None when unknown (no Notation signature was found, or a folder lacks the manifest).
    descriptor: Descriptor | None = None

    @property
    def count(self) -> int:
        """How many signatures were found, of all kinds."""
        return len(self.classic) + len(self.bundles) + len(self.statements) + len(self.notation)


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

    async def subjects(self, reference: ImageReference, deadline: Deadline) -> ArtifactSubjects:
        """Which digest is which: the manifest digest and, for an engine artifact, its layers.

        Raises :class:`VerificationError` for an engine artifact that breaks the engine layout (and
        :meth:`attestations` does too): that is an answer about the artifact, not a failure to look.
        """
        ...

    async def attestations(self, reference: ImageReference, deadline: Deadline) -> ArtifactAttestations:
        """DSSE attestations whose statement names one of :attr:`ArtifactSubjects.digests` of the artifact."""
        ...

    async def image_signatures(self, reference: ImageReference, deadline: Deadline) -> ImageSignatures:
        """Signatures over the image digest (``reference`` carries a digest)."""
        ...

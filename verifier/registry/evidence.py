"""Evidence from OCI registries: the :class:`~verifier.evidence.EvidenceSource` of the webhook and of
``trtguard check --registry``.

Everything returned is fetched through :class:`~verifier.registry.client.RegistryClient` (so every byte is
digest-checked) but not yet verified: the evaluator verifies signatures and envelopes against the keys a
policy names (``verifier.signatures``).

Where evidence is looked for, for the artifact digest ``D`` in repository ``R``:

* image signatures: the classic ``R:sha256-D.sig`` manifest (cosign ≤ 2) and Sigstore bundle referrers of
  ``D`` that carry a signature (cosign v3: a ``https://sigstore.dev/cosign/sign/v1`` statement or a
  message signature);
  and Notary Project signature referrers of ``D`` (``application/vnd.cncf.notary.signature``, one JWS or COSE
  envelope layer);
* attestations: the DSSE envelopes of ``R:sha256-D.att``, DSSE envelope referrers of ``D`` (what
  ``trtguard attach-attestation`` writes), Sigstore bundle referrers carrying any other statement, and
  statements signed with OpenPGP (referrers of type ``application/vnd.trtguard.statement.openpgp.v1``: the
  statement's bytes and detached signatures over them, all of one statement counted together); a
  statement counts only when its subject is ``D`` or, for an engine artifact, the engine layer ``L``
  (never the ONNX or calibration-cache layer: :class:`~verifier.evidence.ArtifactSubjects`); the
  statements about other digests are returned apart (``elsewhere``), a bundle whole: a model signature
  (OpenSSF Model Signing) attached to an engine is about the model it was built from, and counts only
  through the digest its signed build manifest records.

Referrers come from the OCI 1.1 referrers API, or from the ``sha256-D`` fallback index where the registry
has none. A document that does not parse (another tool's attachment, garbage under a tag) is skipped and
logged: missing evidence can only lead to a violation, never to an allow. A DSSE envelope whose statement is
nested too deeply to read (so its signature cannot be checked) is returned apart, as an
:class:`~verifier.evidence.UncheckedStatement`: it may be the newest SBOM or scan, so the rules of the type
it claims cannot tell rather than judge an older one.

Signature and attestation blobs are read up to :data:`~verifier.base.MAX_DOCUMENT_BYTES` (16 MiB, the
limit of an attestation folder's files too; real ones are a few KiB) and parsed in a worker thread, so that
a large one cannot hold up the event loop that serves admissions.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from verifier.base import (
    MAX_DOCUMENT_BYTES,
    Deadline,
    EvidenceUnavailable,
    ImageReference,
    InputError,
    VerificationError,
)
from verifier.crypto import (
    PAYLOAD_TYPE,
    Envelope,
    Statement,
    StatementTooDeep,
    claimed_by_statement,
    statement_from_envelope,
)
from verifier.evidence import (
    COSIGN_SIGN_PREDICATE,
    ArtifactAttestations,
    ArtifactSubjects,
    Attestation,
    ImageSignatures,
    UncheckedStatement,
)
from verifier.registry._cosign_layout import (
    DSSE_ENVELOPE,
    IN_TOTO_JSON,
    OPENPGP_STATEMENT,
    SIGSTORE_BUNDLE,
    ReferrerArtifact,
    list_referrers,
    read_attestations,
    read_referrer,
    read_signatures,
)
from verifier.registry._oci import Descriptor
from verifier.registry._tasks import task_group
from verifier.registry.engine_artifact import InvalidEngineArtifact
from verifier.signatures import CosignSignature, NotationSignature
from verifier.signatures.notation import ARTIFACT_TYPE as NOTATION_SIGNATURE
from verifier.signatures.notation import (
    COSE_MEDIA_TYPE,
    JWS_MEDIA_TYPE,
    MAX_ENVELOPE_BYTES,
    MAX_NOTATION_SIGNATURES,
)

__all__ = ["RegistryEvidence"]

if TYPE_CHECKING:  # the client (httpx) is imported when a registry is used: offline checks start faster
    from verifier.registry.client import RegistryClient

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Statement:
    """A DSSE envelope and the in-toto statement it carries (parsed once), with where it was found, and the
    detached OpenPGP signatures over the statement's bytes (for a statement signed that way)."""

    envelope: Envelope
    statement: Statement
    origin: str
    openpgp_signatures: tuple[bytes, ...] = ()
    #: The Sigstore bundle the envelope came in, whole (formats that sign so read its verification
    #: material: a model signature found beside an engine).
    bundle: bytes | None = None


@dataclass(frozen=True, slots=True)
class _Bundle:
    data: bytes
    signed: _Statement | None  # None for a message signature

    @property
    def predicate_type(self) -> str | None:
        return self.signed.statement.predicate_type if self.signed is not None else None


class RegistryEvidence:
    """An evidence source backed by OCI registries through one shared :class:`RegistryClient`."""

    def __init__(self, client: RegistryClient) -> None:
        self._client = client

    @property
    def description(self) -> str:
        """Where the evidence comes from, for messages."""
        return "registry"

    @property
    def concurrent_lookups(self) -> bool:
        """Look-ups wait on registries, so the evaluator should start several at once."""
        return True

    async def resolve_digest(self, reference: ImageReference, deadline: Deadline) -> str:
        """The digest of ``reference``: its own, or the one its tag points at now (from the bytes)."""
        return await self._client.resolve(reference, deadline)

    async def subjects(self, reference: ImageReference, deadline: Deadline) -> ArtifactSubjects:
        """The manifest digest; for an engine artifact also its engine layer (the engine file's sha256).

        An engine artifact (``application/vnd.trtguard.engine.v1``) must follow the layout that
        ``trtguard push-engine`` writes; one that does not (extra files, two engines) is refused with
        :class:`VerificationError` (the artifact is bad: a policy's ``onError`` must not let it pass). Any
        other manifest, an index included, stands only for itself: its layers could hold any file.
        """
        digest = await self.resolve_digest(reference, deadline)
        manifest = await self._client.get_manifest(reference, deadline, reference=digest)
        try:
            return ArtifactSubjects.of_manifest(manifest)
        except InvalidEngineArtifact as error:
            raise VerificationError(
                f"{reference.name}@{digest} is not a well-formed engine artifact: {error}",
                location=f"engine {reference.name}@{digest}",
                hint="push the engine with trtguard push-engine",
            ) from error

    async def attestations(self, reference: ImageReference, deadline: Deadline) -> ArtifactAttestations:
        """DSSE attestations attached to the artifact whose statement names its digest or its engine file's.

        They are read from the ``.att`` tag and the referrers of the artifact digest only; a statement is
        kept when one of its subjects is one of :attr:`ArtifactSubjects.digests`.
        """
        digest = await self.resolve_digest(reference, deadline)
        pinned = reference.with_digest(digest)
        async with task_group() as group:
            subjects_task = group.create_task(self.subjects(pinned, deadline))
            classic_task = group.create_task(
                read_attestations(self._client, pinned, digest, deadline, max_bytes=MAX_DOCUMENT_BYTES)
            )
            referrers_task = group.create_task(self._referrer_envelopes(pinned, digest, deadline))
            openpgp_task = group.create_task(self._openpgp_statements(pinned, digest, deadline))
        subjects = subjects_task.result()
        classic = [
            (layer.payload, f"{pinned.name}:{_tag(digest, 'att')} layer {layer.digest}")
            for layer in classic_task.result()
        ]
        found: dict[Envelope, Attestation] = {}
        elsewhere: list[Attestation] = []
        attached, unchecked = await asyncio.to_thread(_statements, classic)
        referred, unchecked_referrers = referrers_task.result()
        signed_statements = [*attached, *referred, *openpgp_task.result()]
        for signed in signed_statements:
            if not _add(found, signed, subjects.digests):
                elsewhere.append(_about_another_digest(signed))
        about = tuple(u for u in (*unchecked, *unchecked_referrers) if u.about(subjects.digests))
        return ArtifactAttestations(subjects, tuple(found.values()), tuple(elsewhere), about)

    async def _openpgp_statements(
        self, pinned: ImageReference, digest: str, deadline: Deadline
    ) -> list[_Statement]:
        """Statements with detached OpenPGP signatures, from referrers of :data:`OPENPGP_STATEMENT`."""
        artifacts = await self._referrers(pinned, digest, OPENPGP_STATEMENT, deadline, all_layers=True)
        found = []
        for descriptor, artifact in artifacts:
            if artifact.layer.media_type != IN_TOTO_JSON or not artifact.rest:
                continue
            origin = f"{pinned.name}@{descriptor.digest} (OpenPGP-signed referrer)"
            signed = await asyncio.to_thread(_statement, Envelope(PAYLOAD_TYPE, artifact.blob, ()), origin)
            if signed is not None:
                found.append(_Statement(signed.envelope, signed.statement, origin, artifact.rest))
        return found

    async def image_signatures(self, reference: ImageReference, deadline: Deadline) -> ImageSignatures:
        """Classic ``.sig`` signatures and cosign v3 signature bundles of the image digest, digest-checked."""
        digest = await self.resolve_digest(reference, deadline)
        pinned = reference.with_digest(digest)
        async with task_group() as group:
            classic_task = group.create_task(
                read_signatures(self._client, pinned, digest, deadline, max_bytes=MAX_DOCUMENT_BYTES)
            )
            bundles_task = group.create_task(self._bundles(pinned, digest, deadline))
            notation_task = group.create_task(self._notation(pinned, digest, deadline))
        classic = tuple(
            CosignSignature.from_layer(layer.payload, layer.media_type, layer.annotations)
            for layer in classic_task.result()
        )
        # The bundles carry the signing statements too; they are not handed in again as bare statements.
        bundles = tuple(
            bundle.data
            for _, bundle in bundles_task.result()
            if bundle.predicate_type in (None, COSIGN_SIGN_PREDICATE)
        )
        notation = notation_task.result()
        # A Notation payload names the manifest's whole descriptor, compared with what the registry serves.
        descriptor = (
            (await self._client.get_manifest(pinned, deadline, reference=digest)).descriptor
            if notation
            else None
        )
        return ImageSignatures(
            digest=digest,
            classic=classic,
            bundles=bundles,
            origin=f"registry {pinned.registry}",
            notation=notation,
            descriptor=descriptor,
        )

    async def _notation(
        self, pinned: ImageReference, digest: str, deadline: Deadline
    ) -> tuple[NotationSignature, ...]:
        """The envelopes of Notary Project signature referrers (JWS or COSE layers; others are skipped): at
        most :data:`MAX_NOTATION_SIGNATURES` signature manifests, each envelope at most
        :data:`~verifier.signatures.notation.MAX_ENVELOPE_BYTES` (a larger one is left out, unread)."""
        found = await self._referrers(
            pinned,
            digest,
            NOTATION_SIGNATURE,
            deadline,
            max_bytes=MAX_ENVELOPE_BYTES,
            at_most=MAX_NOTATION_SIGNATURES,
        )
        return tuple(
            NotationSignature(
                artifact.blob,
                artifact.layer.media_type,
                f"{pinned.name}@{descriptor.digest} (Notary Project signature)",
            )
            for descriptor, artifact in found
            if artifact.layer.media_type in (JWS_MEDIA_TYPE, COSE_MEDIA_TYPE)
        )

    async def _bundles(
        self, pinned: ImageReference, digest: str, deadline: Deadline
    ) -> list[tuple[str, _Bundle]]:
        blobs = await self._referrer_blobs(pinned, digest, SIGSTORE_BUNDLE, deadline)
        return await asyncio.to_thread(_bundles, blobs)

    async def _referrer_envelopes(
        self, pinned: ImageReference, digest: str, deadline: Deadline
    ) -> tuple[list[_Statement], list[UncheckedStatement]]:
        """Statements of DSSE referrers, and of bundle referrers with a statement other than a signature;
        with those too deep to read (:func:`_statements`)."""
        async with task_group() as group:
            plain_task = group.create_task(self._referrer_blobs(pinned, digest, DSSE_ENVELOPE, deadline))
            bundles_task = group.create_task(self._bundles(pinned, digest, deadline))
        found, unchecked = await asyncio.to_thread(
            _statements, [(data, origin) for origin, data in plain_task.result()]
        )
        for _, bundle in bundles_task.result():
            if bundle.signed is not None and bundle.predicate_type != COSIGN_SIGN_PREDICATE:
                found.append(bundle.signed)
        return found, unchecked

    async def _referrer_blobs(
        self, pinned: ImageReference, digest: str, artifact_type: str, deadline: Deadline
    ) -> list[tuple[str, bytes]]:
        return [
            (f"{pinned.name}@{descriptor.digest} (referrer)", artifact.blob)
            for descriptor, artifact in await self._referrers(pinned, digest, artifact_type, deadline)
        ]

    async def _referrers(
        self,
        pinned: ImageReference,
        digest: str,
        artifact_type: str,
        deadline: Deadline,
        *,
        all_layers: bool = False,
        max_bytes: int = MAX_DOCUMENT_BYTES,
        at_most: int | None = None,
    ) -> list[tuple[Descriptor, ReferrerArtifact]]:
        """The referrers of ``digest`` of ``artifact_type``, read concurrently; unreadable ones left out.

        More than ``at_most`` of them is refused (definitively, naming the count) before any is read.
        """
        descriptors = await list_referrers(
            self._client, pinned, digest, deadline, artifact_types=[artifact_type]
        )
        if at_most is not None and len(descriptors) > at_most:
            raise EvidenceUnavailable(
                f"{len(descriptors)} referrers of type {artifact_type} for {digest}; at most {at_most} are "
                "read",
                transient=False,
                location=f"image {pinned.name}",
                hint="remove stale signatures from the registry",
            )
        async with task_group() as group:
            tasks = [
                group.create_task(
                    read_referrer(
                        self._client,
                        pinned,
                        descriptor,
                        digest,
                        deadline,
                        max_bytes=max_bytes,
                        all_layers=all_layers,
                    )
                )
                for descriptor in descriptors
            ]
        return [
            (descriptor, artifact)
            for descriptor, task in zip(descriptors, tasks, strict=True)
            if (artifact := task.result()) is not None
        ]


def _tag(digest: str, suffix: str) -> str:
    return f"sha256-{digest.removeprefix('sha256:')}.{suffix}"


def _statements(blobs: Sequence[tuple[bytes, str]]) -> tuple[list[_Statement], list[UncheckedStatement]]:
    """The envelopes among ``(blob, origin)`` that carry a readable in-toto statement, and those whose
    statement is nested too deeply to read, so that its signature cannot be checked: it may be signed
    evidence, which the rules of the type it claims cannot tell without (runs in a thread)."""
    found = []
    unchecked = []
    for data, origin in blobs:
        try:
            envelope = Envelope.from_json(data, location=origin)
        except InputError as error:
            _log.warning("skipping an attachment that is not a DSSE envelope: %s", error)
            continue
        try:
            statement = statement_from_envelope(envelope, location=origin)
        except StatementTooDeep as error:
            _log.warning("an attestation cannot be read to check: %s", error)
            predicate_type, subjects = claimed_by_statement(envelope.payload)
            unchecked.append(UncheckedStatement(origin, error.message, predicate_type, subjects))
            continue
        except (InputError, VerificationError) as error:
            _log.warning("skipping an attestation without a readable in-toto statement: %s", error)
            continue
        found.append(_Statement(envelope, statement, origin))
    return found, unchecked


def _statement(envelope: Envelope, origin: str) -> _Statement | None:
    try:
        statement = statement_from_envelope(envelope, location=origin)
    except (InputError, VerificationError) as error:
        _log.warning("skipping an attestation without a readable in-toto statement: %s", error)
        return None
    return _Statement(envelope, statement, origin)


def _bundles(blobs: Sequence[tuple[str, bytes]]) -> list[tuple[str, _Bundle]]:
    """The readable Sigstore bundles among ``(origin, blob)`` (runs in a thread)."""
    found = []
    for origin, data in blobs:
        bundle = _bundle(data, origin)
        if bundle is not None:
            found.append((origin, bundle))
    return found


def _bundle(data: bytes, origin: str) -> _Bundle | None:
    """Parse just enough of a Sigstore bundle to route it: a DSSE statement's type, or a message signature."""
    try:
        document: Any = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        _log.warning("skipping a bundle referrer that is not JSON: %s", origin)
        return None
    if not isinstance(document, dict):
        _log.warning("skipping a bundle referrer that is not a JSON object: %s", origin)
        return None
    if "messageSignature" in document:
        return _Bundle(data, None)
    try:
        envelope = Envelope.from_dict(document.get("dsseEnvelope"), location=origin)
    except InputError as error:
        _log.warning("skipping a bundle referrer without a DSSE envelope: %s", error)
        return None
    signed = _statement(envelope, origin)
    return _Bundle(data, replace(signed, bundle=data)) if signed is not None else None


def _about_another_digest(signed: _Statement) -> Attestation:
    return Attestation.of(signed.envelope, signed.statement, signed.origin, bundle=signed.bundle)


def _add(found: dict[Envelope, Attestation], signed: _Statement, subjects: frozenset[str]) -> bool:
    """Keep ``signed`` in ``found`` when it is about one of ``subjects`` (False when it is not)."""
    named = signed.statement.subject_digests()
    if not named & subjects:
        return False
    known = found.get(signed.envelope)
    if known is not None:
        # The same envelope under .att and as a referrer (attach-attestation writes both), or one statement
        # in several OpenPGP referrers (one per signer): their signatures count together.
        extra = tuple(s for s in signed.openpgp_signatures if s not in known.openpgp_signatures)
        if extra:
            found[signed.envelope] = replace(known, openpgp_signatures=known.openpgp_signatures + extra)
        return True
    found[signed.envelope] = Attestation.of(
        signed.envelope,
        signed.statement,
        signed.origin,
        openpgp_signatures=signed.openpgp_signatures,
        bundle=signed.bundle,
    )
    return True

"""An attestation folder as an evidence source (``trtguard check --attestations DIR``): LocalEvidence.

It serves a folder of files for offline checks (``trtguard check --attestations DIR``,
docs/attestation-folder.md; ``trtguard fetch-attestations`` fills one from registries): DSSE envelopes
(``*.json``, ``*.dsse``, ``*.intoto.jsonl`` with one envelope per line), Sigstore bundles (a DSSE statement,
or a message signature over an image digest), classic cosign signatures (one ``.sig`` layer as a JSON
document, :mod:`verifier.evidence_documents`), OCI manifests (an engine artifact's says which layer is its
engine; any manifest gives the descriptor a Notary Project signature names) and Notary Project signature
envelopes (``*.jws``, ``*.cose`` in a ``sha256-<hex>`` folder: signatures of that digest). An in-toto
statement ``X.json`` with a detached OpenPGP signature ``X.json.asc`` beside it is a statement signed with
OpenPGP (over its exact bytes); any other file ``X.json.<kind>`` beside a bare statement is a detached
signature of that kind (:attr:`~verifier.evidence.Attestation.detached`), for whichever statement signature
format signs so: the folder names no format. Files it cannot use (a message-signature bundle over another
digest algorithm, a classic signature whose payload names no image digest, an envelope that carries no in-toto
statement, a Notation envelope outside a ``sha256-<hex>`` folder) are left out and listed in
:attr:`LocalEvidence.skipped`, and so are files that are broken or hostile (not JSON, a malformed envelope,
statement or signature document, a file over the size limit), as a registry's unreadable attachments are:
such a file fails only itself (issue 24 item 11), so that it cannot take the verdicts of the others with it.
But a statement too large (over the size limit) or nested too deeply to read before its signature could be
checked may be signed evidence, perhaps the newest: it is also kept as an
:class:`~verifier.evidence.UncheckedStatement` of the type and subjects it claims, and the rules of that
type cannot tell (docs/scans.md) rather than judge the older documents as if it were not there.
A file in a folder ``<registry>/<repository>/sha256-<hex>/`` of the
attestation folder (the layout ``fetch-attestations`` writes) counts only for that repository, as a
registry keeps evidence per repository; any other file counts for whatever its subjects name.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections import defaultdict
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from verifier.base import (
    MAX_DOCUMENT_BYTES,
    Deadline,
    EvidenceUnavailable,
    ImageReference,
    InputError,
    VerificationError,
    read_limited,
)
from verifier.crypto import (
    PAYLOAD_TYPE,
    Envelope,
    Statement,
    StatementTooDeep,
    claimed_by_envelope,
    claimed_by_statement,
    statement_from_envelope,
)
from verifier.evidence import (
    ArtifactAttestations,
    ArtifactSubjects,
    Attestation,
    ImageSignatures,
    SkippedFile,
    UncheckedStatement,
)
from verifier.evidence_documents import classic_signature_from_document, message_digest, signed_image_digest
from verifier.registry import MANIFEST_TYPES, Descriptor, InvalidDocument, Manifest
from verifier.registry.engine_artifact import (
    ENGINE_ARTIFACT_TYPE,
    InvalidEngineArtifact,
)
from verifier.signatures import COSIGN_SIGN_PREDICATE, MAX_SIGNATURE_BYTES, CosignSignature

if TYPE_CHECKING:  # Notation's verifier loads when a Notation envelope is found (start-up time, issue 15)
    from verifier.signatures.notation import NotationSignature

_log = logging.getLogger(__name__)
T = TypeVar("T")

#: The folder of one artifact's evidence in the layout ``fetch-attestations`` writes.
_ARTIFACT_FOLDER = re.compile(r"sha256-[0-9a-f]{64}")
_OCI_MANIFEST_TYPES = MANIFEST_TYPES
#: How much of a file over the size limit is read for the type and subjects its statement claims.
_CLAIM_PREFIX_BYTES = 1024 * 1024
#: Notary Project envelopes by file suffix (what ``fetch-attestations`` writes): JWS and COSE.
_NOTATION_SUFFIXES = {".jws": "application/jose+json", ".cose": "application/cose"}
#: The suffixes of the files read as evidence of their own; any other file ``X.json.<kind>`` is a detached
#: signature over the bytes of ``X.json``.
_EVIDENCE_SUFFIXES = (".json", ".dsse", ".jsonl", *_NOTATION_SUFFIXES)


def _detached_signatures(files: list[Path]) -> dict[Path, list[Path]]:
    """Each ``X.json`` of ``files`` → the files ``X.json.<kind>`` beside it (not themselves evidence)."""
    named = set(files)
    found: dict[Path, list[Path]] = defaultdict(list)
    for path in files:
        statement = path.with_suffix("")
        if path.suffix not in _EVIDENCE_SUFFIXES and statement.suffix == ".json" and statement in named:
            found[statement].append(path)
    return found


def _bare_statement(raw: bytes) -> bool:
    """Whether ``raw`` is a JSON object that is an in-toto statement rather than an envelope or bundle."""
    try:
        document = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False
    return isinstance(document, dict) and "_type" in document and "payloadType" not in document


def _is_manifest(document: Any) -> bool:
    """An OCI or Docker manifest or index: by its media type, or (OCI lets it leave that out) by its shape."""
    if not isinstance(document, dict):
        return False
    media_type = document.get("mediaType")
    if isinstance(media_type, str) and media_type in _OCI_MANIFEST_TYPES:  # a list is unhashable
        return True
    return (
        "mediaType" not in document
        and document.get("schemaVersion") == 2
        and ("layers" in document or "manifests" in document)
    )


class LocalEvidence:
    """Evidence from a folder of files; offline, so it cannot resolve tags or read a registry."""

    def __init__(self, folder: Path | None = None) -> None:
        """Read every evidence file under ``folder``; with no folder there is no evidence at all."""
        self._folder = folder
        # Each piece of evidence with the repository it is scoped to (None: any), by the digest it names.
        self._by_subject: dict[str, list[tuple[str | None, Attestation]]] = defaultdict(list)
        self._signature_bundles: dict[str, list[tuple[str | None, bytes]]] = defaultdict(list)
        self._classic: dict[str, list[tuple[str | None, CosignSignature]]] = defaultdict(list)
        self._notation: dict[str, list[tuple[str | None, NotationSignature]]] = defaultdict(list)
        self._descriptors: dict[str, Descriptor] = {}
        self._scope: str | None = None
        self._artifacts: dict[str, ArtifactSubjects] = {}
        self._malformed_artifacts: dict[str, str] = {}
        self._skipped: list[SkippedFile] = []
        self._unchecked: list[tuple[str | None, UncheckedStatement]] = []
        self._sidecars: dict[Path, list[Path]] = {}
        if folder is None:
            return
        if not folder.is_dir():
            raise InputError(f"attestation folder {folder} does not exist or is not a folder")
        files = sorted(p for p in folder.rglob("*") if p.is_file())
        self._sidecars = _detached_signatures(files)
        for path in files:
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

    def _unreadable(
        self, location: str, reason: str, claimed: tuple[str | None, frozenset[str] | None]
    ) -> None:
        """A statement too large or too deep to check: left out, and kept as :class:`UncheckedStatement`
        for the rules of the type it claims to say they cannot tell (it may be the newest evidence)."""
        self._skip(location, f"{reason}; rules of the type it claims cannot tell")
        predicate_type, subjects = claimed
        self._unchecked.append((self._scope, UncheckedStatement(location, reason, predicate_type, subjects)))

    def _load(self, path: Path) -> None:
        if path.name.startswith(".") or path.suffix not in _EVIDENCE_SUFFIXES:
            return
        self._scope = self._repository_scope(path)
        with contextlib.suppress(OSError):  # an unreadable file is refused by read_limited below
            if path.suffix not in _NOTATION_SUFFIXES and path.stat().st_size > MAX_DOCUMENT_BYTES:
                with path.open("rb") as stream:
                    prefix = stream.read(_CLAIM_PREFIX_BYTES)
                limit = f"larger than {MAX_DOCUMENT_BYTES // (1024 * 1024)} MiB (the evidence limit)"
                self._unreadable(str(path), f"the evidence file is {limit}", claimed_by_envelope(prefix))
                return
        if path.suffix == ".jsonl":
            lines: list[bytes] = []
            with self._refusing(str(path)):
                lines = read_limited(path, "the evidence file").splitlines()
            for number, line in enumerate(lines, start=1):
                if line.strip():
                    with self._refusing(f"{path}:{number}"):
                        self._add_json(line, f"{path}:{number}")
            return
        with self._refusing(str(path)):
            raw = read_limited(path, "the evidence file")
            sidecars = self._sidecars.get(path, [])
            signature = path.with_name(path.name + ".asc")
            if path.suffix in _NOTATION_SUFFIXES:
                self._add_notation(raw, path)
            elif signature in sidecars or (sidecars and _bare_statement(raw)):
                openpgp: tuple[bytes, ...] = ()
                if signature in sidecars:
                    openpgp = (read_limited(signature, "the OpenPGP signature", limit=MAX_SIGNATURE_BYTES),)
                self._add_detached(raw, openpgp, [s for s in sidecars if s != signature], path)
            else:
                self._add_json(raw, str(path))

    @contextlib.contextmanager
    def _refusing(self, location: str) -> Iterator[None]:
        """Leave out the evidence file (or line) at ``location`` when it turns out broken, with why."""
        try:
            yield
        except (InputError, VerificationError) as error:
            self._skip(error.location or location, f"refused, it counts for nothing: {error.message}")

    def _repository_scope(self, path: Path) -> str | None:
        """``registry/repository`` for a file in ``<registry>/<repository>/sha256-<hex>/``, else None."""
        assert self._folder is not None  # noqa: S101 - only files under the folder are loaded
        parts = path.relative_to(self._folder).parts
        if len(parts) >= 4 and _ARTIFACT_FOLDER.fullmatch(parts[-2]):
            return "/".join(parts[:-2])
        return None

    def _scoped(self, entries: list[tuple[str | None, T]], reference: ImageReference) -> tuple[T, ...]:
        """The entries that count for ``reference``: unscoped ones and those of its repository."""
        return tuple(item for scope, item in entries if scope is None or scope == reference.name)

    def _add_json(self, raw: bytes, location: str) -> None:
        try:
            document: Any = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise InputError(
                "not JSON", location=location, hint="the folder holds JSON evidence files"
            ) from None
        except RecursionError:  # nested deeper than Python's parser goes: hostile, not evidence
            raise InputError("JSON nested too deeply", location=location) from None
        if _is_manifest(document):
            self._add_manifest(raw, location)
            return
        if isinstance(document, dict) and {"payload", "signature", "media_type"} <= set(document):
            self._add_classic(document, location)
            return
        bundle = (
            raw if isinstance(document, dict) and isinstance(document.get("dsseEnvelope"), dict) else None
        )
        if bundle is not None:
            document = document["dsseEnvelope"]  # a Sigstore bundle: the statement is in its envelope
        elif isinstance(document, dict) and "messageSignature" in document:
            # A message signature over an image digest (cosign v3 signs some images so): kept whole, by the
            # digest it signs; verifying it checks that digest again.
            signed = message_digest(document)
            if signed is None:
                self._skip(location, "a Sigstore bundle with a message signature over no sha256 digest")
                return
            self._signature_bundles[signed].append((self._scope, raw))
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
        statement = self._statement(envelope, location)
        if statement is None:
            return
        attestation = Attestation.of(envelope, statement, location, bundle=bundle)
        for digest in attestation.subjects:
            if bundle is not None and attestation.predicate_type == COSIGN_SIGN_PREDICATE:
                # Kept whole: a keyless bundle's certificate and log entry are part of the signature.
                self._signature_bundles[digest].append((self._scope, bundle))
            else:
                self._by_subject[digest].append((self._scope, attestation))

    def _statement(self, envelope: Envelope, location: str) -> Statement | None:
        """The envelope's statement; None (kept as unchecked) when it is nested too deeply to read."""
        try:
            return statement_from_envelope(envelope, location=location)
        except StatementTooDeep as error:
            self._unreadable(location, error.message, claimed_by_statement(envelope.payload))
            return None

    def _add_notation(self, raw: bytes, path: Path) -> None:
        """A Notary Project envelope, kept (unread) for the digest of the ``sha256-<hex>`` folder it is in;
        verifying it checks that its payload names that digest's manifest."""
        if not _ARTIFACT_FOLDER.fullmatch(path.parent.name):
            self._skip(
                str(path), "a Notary Project envelope outside a sha256-<hex> folder (whose digest it signs)"
            )
            return
        from verifier.signatures.notation import NotationSignature  # noqa: PLC0415 - see TYPE_CHECKING

        digest = path.parent.name.replace("-", ":", 1)
        signature = NotationSignature(
            raw, _NOTATION_SUFFIXES[path.suffix], f"{path} (Notary Project signature)"
        )
        self._notation[digest].append((self._scope, signature))

    def _add_classic(self, document: Mapping[str, Any], location: str) -> None:
        """A classic signature, kept under the image digest its payload names (checked when verified)."""
        signature = classic_signature_from_document(document, location)
        digest = signed_image_digest(signature.payload)
        if digest is None:
            self._skip(location, "a classic cosign signature whose payload names no sha256 image digest")
            return
        self._classic[digest].append((self._scope, signature))

    def _add_detached(self, raw: bytes, openpgp: tuple[bytes, ...], sidecars: list[Path], path: Path) -> None:
        """An in-toto statement ``X.json`` with detached signatures beside it: its OpenPGP one
        ``X.json.asc``, and each other ``X.json.<kind>`` as a signature of that kind (a sidecar that cannot
        be read fails only itself)."""
        envelope = Envelope(PAYLOAD_TYPE, raw, ())
        statement = self._statement(envelope, str(path))
        if statement is None:
            return
        detached: list[tuple[str, bytes]] = []
        for sidecar in sidecars:
            with self._refusing(str(sidecar)):
                data = read_limited(sidecar, "the detached signature", limit=MAX_SIGNATURE_BYTES)
                detached.append((sidecar.suffix[1:], data))
        if sidecars:
            named = ([f"{path.name}.asc"] if openpgp else []) + [s.name for s in sidecars]
            origin = f"{path} (detached signatures {', '.join(named)})"
        else:
            origin = f"{path} (OpenPGP signature {path.name}.asc)"
        attestation = Attestation.of(
            envelope, statement, origin, openpgp_signatures=openpgp, detached=tuple(detached)
        )
        for digest in attestation.subjects:
            self._by_subject[digest].append((self._scope, attestation))

    def _add_manifest(self, raw: bytes, location: str) -> None:
        """Record the manifest's descriptor (what a Notation signature names) and which layer of an engine
        artifact is which; other manifests stand only for themselves."""
        try:
            manifest = Manifest.parse(raw, content_type=None, where=location)
        except InvalidDocument as error:
            raise InputError(f"not a valid OCI manifest: {error}", location=location) from error
        self._descriptors[manifest.digest] = manifest.descriptor
        try:
            subjects = ArtifactSubjects.of_manifest(manifest)
        except InvalidEngineArtifact as error:
            self._malformed_artifacts[manifest.digest] = f"{error} ({location})"
            return
        if subjects.engine_file is None:
            # Only the strictly checked engine layout has an engine layer: the layers of anything else could
            # carry any file next to a signed engine. The manifest still gives its descriptor (above).
            _log.debug(
                "%s: an OCI manifest of artifact type %r, not an engine artifact (%s): its layers do not "
                "stand for it",
                location,
                manifest.artifact_type,
                ENGINE_ARTIFACT_TYPE,
            )
            return
        self._artifacts[manifest.digest] = subjects

    async def resolve_digest(self, reference: ImageReference, deadline: Deadline) -> str:
        """The reference's own digest; a tag cannot be resolved offline."""
        if reference.digest is not None:
            return reference.digest
        raise EvidenceUnavailable(
            f"{reference} has no digest and the tag cannot be resolved offline",
            transient=False,
            hint="pin the image by digest, or check against a registry (--registry)",
        )

    async def subjects(self, reference: ImageReference, deadline: Deadline) -> ArtifactSubjects:
        """The reference's digest and, for an engine artifact whose manifest the folder holds, its layers.

        An engine artifact manifest that does not follow the layout ``trtguard push-engine`` writes is
        refused with :class:`VerificationError`, as :class:`~verifier.registry.evidence.RegistryEvidence`
        refuses it: a definitive answer about the artifact, not a failure to check it.
        """
        digest = await self.resolve_digest(reference, deadline)
        malformed = self._malformed_artifacts.get(digest)
        if malformed is not None:
            raise VerificationError(
                f"{reference.name}@{digest} is not a well-formed engine artifact: {malformed}",
                location=f"engine {reference.name}@{digest}",
                hint="push the engine with trtguard push-engine",
            )
        known = self._artifacts.get(digest)
        if known is not None:
            return known
        return ArtifactSubjects(
            digest, layout="the attestation folder holds no engine artifact manifest for it"
        )

    async def attestations(self, reference: ImageReference, deadline: Deadline) -> ArtifactAttestations:
        """Attestations in the folder whose subject is the artifact's digest or its engine file's."""
        subjects = await self.subjects(reference, deadline)
        found: dict[int, Attestation] = {}
        for digest in sorted(subjects.digests):
            for attestation in self._scoped(self._by_subject.get(digest, []), reference):
                found[id(attestation)] = attestation
        elsewhere: dict[int, Attestation] = {}
        for digest, entries in self._by_subject.items():
            if digest not in subjects.digests:
                for attestation in self._scoped(entries, reference):
                    if id(attestation) not in found:
                        elsewhere[id(attestation)] = attestation
        unchecked = tuple(u for u in self._scoped(self._unchecked, reference) if u.about(subjects.digests))
        return ArtifactAttestations(subjects, tuple(found.values()), tuple(elsewhere.values()), unchecked)

    async def image_signatures(self, reference: ImageReference, deadline: Deadline) -> ImageSignatures:
        """Signatures of the image digest: classic ones, Sigstore bundles and bare signing statements."""
        digest = await self.resolve_digest(reference, deadline)
        statements = tuple(
            a
            for a in self._scoped(self._by_subject.get(digest, []), reference)
            if a.predicate_type == COSIGN_SIGN_PREDICATE
        )
        return ImageSignatures(
            digest=digest,
            classic=self._scoped(self._classic.get(digest, []), reference),
            bundles=self._scoped(self._signature_bundles.get(digest, []), reference),
            statements=statements,
            origin=self.description,
            notation=self._scoped(self._notation.get(digest, []), reference),
            descriptor=self._descriptors.get(digest),
        )

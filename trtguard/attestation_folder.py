"""An attestation folder filled from registries, for ``trtguard check --attestations DIR`` where no registry
can be reached (air-gapped CI): ``trtguard fetch-attestations``.

For every image and engine of the given workloads (and the previous engine each engine's build manifest
declares, which change control compares it with), what the registry evidence source would read is copied,
unverified, into one folder per artifact (docs/attestation-folder.md)::

    DIR/<registry>/<repository>/sha256-<hex>/
        manifest.json               the OCI manifest of an engine artifact (which layer is the engine), or of
                                    an artifact with Notation signatures (the descriptor they name)
        signature-<n>.cosign.json   a classic cosign signature (one layer of the .sig manifest)
        bundle-<n>.sigstore.json    a Sigstore bundle carrying an image signature
        signature-<n>.notation.jws  a Notary Project signature envelope (JWS, or .notation.cose for COSE),
                                    its RFC 3161 countersignature inside
        attestation-<n>.dsse.json   a DSSE attestation (.att layers, DSSE and bundle referrers)
        model-signature-<n>.sigstore.json
                                    an OpenSSF Model Signing signature attached to an engine (a bundle
                                    referrer about the model the engine was built from)

Nothing is verified here: the folder is evidence, judged by ``check`` against the policies' keys exactly as
the registry's would be. Statements of cosign's signing predicate found among the attestations are left out,
since a bare signing statement in a folder counts as an image signature and the registry does not count it
so. Tags are resolved to digests only to find the evidence: the folder cannot say what a tag pointed at, so
workloads checked offline name their images by digest (``trtguard digest IMAGE``).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from verifier.base import Deadline, ImageReference, InputError, TrtguardError, VerificationError
from verifier.crypto import Envelope, statement_from_envelope
from verifier.evidence import COSIGN_SIGN_PREDICATE
from verifier.evidence_documents import classic_signature_document
from verifier.manifest import ENGINE_BUILD_PREDICATE_TYPE, load_manifest
from verifier.model_signing import MODEL_SIGNING_PREDICATE
from verifier.registry.client import RegistryClient
from verifier.registry.engine_artifact import ENGINE_ARTIFACT_TYPE
from verifier.registry.evidence import RegistryEvidence
from verifier.signatures.notation import JWS_MEDIA_TYPE


@dataclass
class FetchSummary:
    """What was written, and what could not be fetched."""

    folder: Path
    artifacts: int = 0
    manifests: int = 0
    signatures: int = 0
    attestations: int = 0
    unpinned: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def artifact_folder(root: Path, reference: ImageReference, digest: str) -> Path:
    """``root/<registry>/<repository>/sha256-<hex>``."""
    return root / reference.registry / reference.repository / digest.replace(":", "-")


def prepare(folder: Path, *, replace: bool) -> None:
    """Make ``folder`` ready to be filled: absent or empty, or emptied with ``replace``."""
    if folder.exists() and not folder.is_dir():
        raise InputError("not a folder", location=str(folder), hint="give a folder to fill (-o DIR)")
    if folder.is_dir() and any(folder.iterdir()):
        if not replace:
            raise InputError(
                "the folder is not empty",
                location=str(folder),
                hint="give an empty or new folder, or --force to empty it first",
            )
        shutil.rmtree(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(f"cannot make the folder: {error.strerror}", location=str(folder)) from None


async def fetch_folder(
    references: Sequence[str],
    evidence: RegistryEvidence,
    client: RegistryClient,
    folder: Path,
    deadline: Deadline,
) -> FetchSummary:
    """Copy the evidence of every artifact in ``references`` (and of the previous engines their build
    manifests declare) into ``folder``, which :func:`prepare` made ready."""
    summary = FetchSummary(folder)
    done: set[tuple[str, str]] = set()
    queue: list[tuple[str, bool]] = [(text, True) for text in dict.fromkeys(references)]
    while queue:
        text, follow = queue.pop(0)
        try:
            reference = ImageReference.parse(text)
        except InputError as error:
            summary.problems.append(f"{text}: {error.message}")
            continue
        if reference.digest is None:
            summary.unpinned.append(str(reference))
        try:
            digest = await evidence.resolve_digest(reference, deadline)
            if (reference.name, digest) in done:
                continue
            done.add((reference.name, digest))
            previous = await _fetch_one(
                reference.with_digest(digest), evidence, client, folder, deadline, summary
            )
        except TrtguardError as error:
            summary.problems.append(f"{reference}: {error.message}")
            continue
        except OSError as error:  # the folder, not the registry: a full disk stops the copy, named
            location = error.filename or str(folder)
            raise InputError(f"cannot write the evidence: {error.strerror}", location=location) from None
        if follow:
            queue += [(engine, False) for engine in previous]
    return summary


async def _fetch_one(
    pinned: ImageReference,
    evidence: RegistryEvidence,
    client: RegistryClient,
    root: Path,
    deadline: Deadline,
    summary: FetchSummary,
) -> list[str]:
    """Write one artifact's evidence; returns the previous engines its build manifests declare."""
    digest = pinned.digest or ""
    target = artifact_folder(root, pinned, digest)
    target.mkdir(parents=True, exist_ok=True)
    summary.artifacts += 1
    manifest = await client.get_manifest(pinned, deadline, reference=digest)
    signatures = await evidence.image_signatures(pinned, deadline)
    # A malformed engine artifact's too: offline, its manifest makes `check` refuse it as a registry would.
    # With Notation signatures, the manifest is the descriptor (media type, size) their payloads must name.
    if _engine_like(manifest.artifact_type) or signatures.notation:
        (target / "manifest.json").write_bytes(manifest.data)
        summary.manifests += 1
    for number, classic in enumerate(signatures.classic, start=1):
        (target / f"signature-{number}.cosign.json").write_bytes(classic_signature_document(classic))
        summary.signatures += 1
    for number, bundle in enumerate(signatures.bundles, start=1):
        (target / f"bundle-{number}.sigstore.json").write_bytes(bundle)
        summary.signatures += 1
    for number, notation in enumerate(signatures.notation, start=1):
        suffix = "jws" if notation.media_type == JWS_MEDIA_TYPE else "cose"
        (target / f"signature-{number}.notation.{suffix}").write_bytes(notation.envelope)
        summary.signatures += 1
    try:
        attached = await evidence.attestations(pinned, deadline)
    except VerificationError:
        return []  # a malformed engine artifact: nothing about it counts, its manifest says why
    previous: list[str] = []
    number = 0
    for attestation in attached.attestations:
        if attestation.predicate_type == COSIGN_SIGN_PREDICATE:
            continue
        number += 1
        (target / f"attestation-{number}.dsse.json").write_bytes(attestation.envelope.to_json() + b"\n")
        summary.attestations += 1
        if attestation.predicate_type == ENGINE_BUILD_PREDICATE_TYPE:
            previous += _previous_engine(attestation.envelope, attestation.origin)
    # About the model's files, not the artifact: found among the statements about other digests, kept whole.
    models = [a.bundle for a in attached.elsewhere if a.predicate_type == MODEL_SIGNING_PREDICATE]
    for number, bundle in enumerate(filter(None, models), start=1):
        (target / f"model-signature-{number}.sigstore.json").write_bytes(bundle)
        summary.attestations += 1
    return previous


def _engine_like(artifact_type: str | None) -> bool:
    """An engine artifact, or one that claims to be (case or white space aside): see ArtifactSubjects."""
    return artifact_type is not None and artifact_type.strip().lower() == ENGINE_ARTIFACT_TYPE


def _previous_engine(envelope: Envelope, origin: str) -> list[str]:
    """The previous engine an (unverified) build manifest declares, if it is readable."""
    try:
        declared = load_manifest(statement_from_envelope(envelope, location=origin), origin).previous_engine
    except TrtguardError:
        return []
    return [declared] if declared else []

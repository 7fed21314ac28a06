"""Building an evidence package: decisions and their chain, engine evidence and the policy snapshot."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from decisionlog import ChainReport, DecisionStore
from trtguard.audit.package._deflate import DeflatingSpool
from trtguard.audit.package._model_signatures import model_signature_files, model_signatures_in
from trtguard.audit.package._records import EngineNames, RecordCollector
from trtguard.audit.package.archive import Member, refuse_overwrite, write_archive
from trtguard.audit.package.contents import (
    ATTESTATION_KINDS,
    NO_SOURCE,
    RECORDS,
    AttestationFile,
    ChainReportInfo,
    ChainScope,
    EngineInfo,
    EvidencePackagePredicate,
    Exporter,
    ImageInfo,
    LogInfo,
    PolicyInfo,
    RevisionCount,
    SelectionInfo,
    SignatureFile,
    SignatureKind,
    SignedManifest,
    engine_folder,
    image_folder,
    seal,
)
from trtguard.audit.package.policy import PolicySnapshot, take_snapshot
from trtguard.audit.package.selection import Selection
from verifier.base import (
    Deadline,
    EvidenceUnavailable,
    ImageReference,
    InputError,
    TrtguardError,
    VerificationError,
    hash_file,
    sha256_bytes,
)
from verifier.crypto import PrivateKey, statement_from_envelope
from verifier.evidence import Attestation, EvidenceSource, ImageSignatures
from verifier.evidence_documents import classic_signature_document
from verifier.manifest import ENGINE_BUILD_PREDICATE_TYPE, load_manifest
from verifier.signatures import COSIGN_SIGN_PREDICATE
from verifier.signatures.notation import JWS_MEDIA_TYPE

#: Engines looked up at once from a source that waits on the network.
_CONCURRENT_LOOKUPS = 8
#: Bytes of deflated records.jsonl buffered before they are written to its spool file.
_SPOOL_BUFFER = 1 << 20


@dataclass(frozen=True, slots=True)
class ExportSummary:
    """What went into a package, for the person who ran the export."""

    output: Path
    size: int
    sha256: str
    files: int
    decisions: int
    chain: ChainScope
    chain_records: int
    first_seq: int
    last_seq: int
    head_seq: int
    engines: int
    attestations: Mapping[str, int]
    signatures: int
    images: int
    image_signatures: int
    policy_revision: str
    policy_in_force: bool
    problems: tuple[str, ...]


@dataclass(slots=True)
class _Found:
    """What the evidence source returned for one engine."""

    subjects: frozenset[str]
    attestations: tuple[Attestation, ...] = ()
    model_signatures: tuple[Attestation, ...] = ()
    signatures: ImageSignatures | None = None
    problems: list[str] = field(default_factory=list)


class _EngineEvidence:
    """Evidence per engine digest, each engine looked up once."""

    def __init__(self, source: EvidenceSource | None, deadline: Deadline) -> None:
        self._source = source
        self._deadline = deadline
        self.found: dict[str, _Found] = {}

    async def fetch(self, engines: Mapping[str, str], *, images: bool = False) -> None:
        """Look up every engine (digest → a reference naming it) not looked up yet; with ``images``, they
        are images: only their signatures are looked up."""
        todo = [(digest, reference) for digest, reference in engines.items() if digest not in self.found]
        if self._source is not None and self._source.concurrent_lookups:
            gate = asyncio.Semaphore(_CONCURRENT_LOOKUPS)

            async def gated(digest: str, reference: str) -> _Found:
                async with gate:
                    return await self._lookup(digest, reference, images)

            results = await asyncio.gather(*(gated(d, r) for d, r in todo))
        else:
            results = [await self._lookup(d, r, images) for d, r in todo]
        self.found.update(zip((d for d, _ in todo), results, strict=True))

    async def _lookup(self, digest: str, reference: str, image: bool) -> _Found:
        source = self._source
        if source is None:
            return _Found(frozenset({digest}), problems=["no evidence source was given to the export"])
        try:
            pinned = ImageReference.parse(reference).with_digest(digest)
        except InputError as error:
            return _Found(frozenset({digest}), problems=[f"reference {reference!r}: {error.message}"])
        found = _Found(frozenset({digest}))
        try:
            if not image:
                attached = await source.attestations(pinned, self._deadline)
                # The digests that may find statements about the engine: the artifact's and its engine file's.
                found.subjects = attached.subjects.digests
                found.attestations = attached.attestations
                found.model_signatures = model_signatures_in(attached.elsewhere)
        except (EvidenceUnavailable, VerificationError) as error:  # unreachable, or a malformed artifact
            found.problems.append(f"attestations unavailable from {source.description}: {error.message}")
        try:
            found.signatures = await source.image_signatures(pinned, self._deadline)
        except EvidenceUnavailable as error:
            found.problems.append(f"signatures unavailable from {source.description}: {error.message}")
        return found

    def audit_ids(self, digest: str) -> set[str]:
        """Audit IDs of the build manifests found for ``digest`` (unverified: the verifier checks them)."""
        ids = set()
        for attestation in self.found[digest].attestations:
            if attestation.predicate_type != ENGINE_BUILD_PREDICATE_TYPE:
                continue
            try:
                statement = statement_from_envelope(attestation.envelope, location=attestation.origin)
                ids.add(load_manifest(statement, attestation.origin).audit_id)
            except TrtguardError:
                continue
        return ids


async def export_evidence_package(
    store: DecisionStore,
    selection: Selection,
    *,
    policies: Sequence[Path],
    evidence: EvidenceSource | None,
    key: PrivateKey,
    output: Path,
    chain: ChainScope = ChainScope.SEGMENT,
    deadline: Deadline | None = None,
    overwrite: bool = False,
    now: datetime | None = None,
) -> ExportSummary:
    """Write the evidence package for ``selection`` to ``output``, signed with ``key``.

    ``store`` is an opened decision store (read-only is enough); ``policies`` the policy files or folders in
    force; ``evidence`` where engine attestations and signatures come from (``None``: none are included,
    and the package says so). Evidence that cannot be fetched is recorded in the package as a problem, not
    left out silently. Raises :class:`~verifier.base.VerificationError` when the log's chain is broken,
    :class:`~verifier.base.InputError` when nothing matches or an input is unusable.
    """
    deadline = deadline or Deadline.never()
    now = now or datetime.now(UTC)
    if selection.kind == "audit_id" and evidence is None:
        raise InputError(
            "selecting by audit ID needs the engines' build manifests",
            location="--audit-id",
            hint="give --attestations DIR or --registry-config FILE",
        )
    refuse_overwrite(output, overwrite)
    engines = _EngineEvidence(evidence, deadline)
    images = _EngineEvidence(evidence, deadline)
    # The records.jsonl lines wait beside the archive (a large log's are not held in memory, nor in /tmp).
    with _spool_beside(output) as spool:
        # Loading the policies (CEL compilation included) overlaps with reading the log; both are waited
        # for, so that neither is left running when the other fails.
        snapshot, read = await asyncio.gather(
            asyncio.to_thread(take_snapshot, policies),
            _read_log(store, selection, chain, engines, spool),
            return_exceptions=True,
        )
        if isinstance(read, VerificationError):  # a broken log is the finding, whatever else failed
            raise read
        if isinstance(snapshot, BaseException):
            raise snapshot
        if isinstance(read, BaseException):
            raise read
        report, collected, problems = read
        return await _write_package(
            store,
            selection,
            report,
            collected,
            problems,
            snapshot,
            engines,
            images,
            evidence=evidence,
            key=key,
            output=output,
            chain=chain,
            overwrite=overwrite,
            now=now,
        )


@contextlib.contextmanager
def _spool_beside(output: Path) -> Iterator[DeflatingSpool]:
    """A spool deflating into an unnamed temporary file in the folder of ``output``, gone when closed."""
    try:
        # Closed by the with below, once it is made: an error making it is the one to convert.
        spool = tempfile.TemporaryFile(  # noqa: SIM115
            prefix=f".{output.name}.records.", dir=output.parent, buffering=_SPOOL_BUFFER
        )
    except OSError as error:
        raise InputError(f"cannot write the archive: {error.strerror}", location=str(output)) from error
    try:
        with spool, DeflatingSpool(spool) as deflating:
            yield deflating
    except OSError as error:  # the spool's volume filled up (written on the spool's own thread)
        raise InputError(
            f"cannot write the archive: {error.strerror}",
            location=str(output),
            hint="free space in the package's folder (records.jsonl is spooled there), or write it elsewhere",
        ) from None


async def _write_package(
    store: DecisionStore,
    selection: Selection,
    report: ChainReport,
    collected: RecordCollector,
    problems: list[str],
    snapshot: PolicySnapshot,
    engines: _EngineEvidence,
    images: _EngineEvidence,
    *,
    evidence: EvidenceSource | None,
    key: PrivateKey,
    output: Path,
    chain: ChainScope,
    overwrite: bool,
    now: datetime,
) -> ExportSummary:
    """Look up the evidence of what the selected decisions name, then seal and write the package."""
    references = collected.references
    problems += [
        f"engine {reference} is named without a digest (decisions seq {', '.join(map(str, seqs))}): "
        "no evidence can be looked up for it"
        for reference, seqs in collected.undigested.items()
    ]
    # An image that is also an engine somewhere in the selection is the engine's (its signatures go there).
    image_references = {d: refs for d, refs in collected.image_references.items() if d not in references}
    await asyncio.gather(
        engines.fetch({digest: refs[0] for digest, refs in references.items()}),
        images.fetch({digest: refs[0] for digest, refs in image_references.items()}, images=True),
    )

    files: dict[str, Member] = {RECORDS: collected.member(report), **snapshot.contents}
    engine_infos = [_engine_files(d, references[d], engines.found[d], files) for d in sorted(references)]
    image_infos = [
        ImageInfo(
            digest=digest,
            references=image_references[digest],
            signatures=_signature_files(image_folder(digest), images.found[digest].signatures, files),
            problems=images.found[digest].problems,
        )
        for digest in sorted(image_references)
    ]
    predicate = EvidencePackagePredicate(
        exporter=Exporter(name="trtguard", version=_version()),
        exported_at=now,
        selection=SelectionInfo(
            by=selection.kind,
            value=selection.value,
            rule=selection.rule(),
            records=collected.selected,
        ),
        log=LogInfo(
            description=store.description,
            chain=chain,
            file=RECORDS,
            first_seq=collected.first_seq,
            last_seq=collected.last_seq,
            records=collected.records,
            report=ChainReportInfo(
                ok=report.ok, records=report.records, head_seq=report.head_seq, head_hash=report.head_hash
            ),
        ),
        policy=_policy_info(snapshot, collected.revisions),
        evidence_source=evidence.description if evidence is not None else NO_SOURCE,
        engines=engine_infos,
        images=image_infos,
        problems=problems,
    )
    members = await asyncio.to_thread(seal, files, predicate, key)
    size = await asyncio.to_thread(
        write_archive, output, members, mtime=int(now.timestamp()), overwrite=overwrite
    )
    written = await asyncio.to_thread(hash_file, output)
    kinds: Counter[str] = Counter(att.kind for info in engine_infos for att in info.attestations)
    kinds.update(signature.kind for info in engine_infos for signature in info.model_signatures)
    return ExportSummary(
        output=output,
        size=size,
        sha256=written.sha256,
        files=len(members),
        decisions=len(collected.selected),
        chain=chain,
        chain_records=collected.records,
        first_seq=collected.first_seq,
        last_seq=collected.last_seq,
        head_seq=report.head_seq,
        engines=len(engine_infos),
        attestations=dict(kinds),
        signatures=sum(len(info.signatures) for info in engine_infos),
        images=len(image_infos),
        image_signatures=sum(len(info.signatures) for info in image_infos),
        policy_revision=snapshot.revision,
        policy_in_force=predicate.policy.in_force,
        problems=tuple(
            problems
            + [f"engine {i.digest}: {p}" for i in engine_infos for p in i.problems]
            + [f"image {i.digest}: {p}" for i in image_infos for p in i.problems]
        ),
    )


async def _read_log(
    store: DecisionStore,
    selection: Selection,
    chain: ChainScope,
    engines: _EngineEvidence,
    spool: DeflatingSpool,
) -> tuple[ChainReport, RecordCollector, list[str]]:
    """The verified chain's report, what was collected of its records, and what could not be searched.

    One pass verifies the whole log and collects the records (``_records``); an audit-ID selection reads it
    once before, for the engines whose build manifests are to be searched.
    """
    problems: list[str] = []
    audit_engines: frozenset[str] = frozenset()
    if selection.kind == "audit_id":
        names = EngineNames()
        _verified(store, await store.verify(names))
        await engines.fetch(names.named)
        audit_engines = frozenset(d for d in names.named if selection.value in engines.audit_ids(d))
        unsearched = sorted(d for d in names.named if engines.found[d].problems)
        if unsearched:
            problems.append(
                f"{len(unsearched)} of the {len(names.named)} engines in the log could not be searched for "
                f"the audit ID (their evidence was unavailable): {', '.join(unsearched)}"
            )
    collected = RecordCollector(selection, chain, spool, audit_engines)
    report = _verified(store, await store.verify(collected))
    if not collected.selected:
        raise InputError(
            f"no decision in {store.description} (seq 1 to {report.head_seq}) matches: {selection.rule()}",
            hint="check the selection with `trtguard audit query`",
        )
    return report, collected, problems


def _verified(store: DecisionStore, report: ChainReport) -> ChainReport:
    """``report`` of a log that verifies and is not empty; raises otherwise."""
    if not report.ok:
        raise VerificationError(
            f"the decision log does not verify, so it cannot prove anything: {report.summary()}",
            location=store.description,
            hint="investigate with `trtguard audit verify`; a broken chain is itself the finding",
        )
    if report.head_seq == 0:
        raise InputError("the decision log is empty", location=store.description)
    return report


def _policy_info(snapshot: PolicySnapshot, counts: Counter[str | None]) -> PolicyInfo:
    return PolicyInfo(
        revision=snapshot.revision,
        files=list(snapshot.policy_files),
        key_files=list(snapshot.key_files),
        decision_revisions=[
            RevisionCount(revision=revision, decisions=count) for revision, count in counts.most_common()
        ],
        in_force=set(counts) == {snapshot.revision},
    )


def _engine_files(digest: str, references: list[str], found: _Found, files: dict[str, Member]) -> EngineInfo:
    """Add one engine's attestations and signatures to ``files``; its entry in the predicate."""
    folder = engine_folder(digest)
    attestations: list[AttestationFile] = []
    numbers: Counter[str] = Counter()
    others: Counter[str] = Counter()
    seen: set[tuple[bytes, tuple[bytes, ...]]] = set()
    for attestation in sorted(found.attestations, key=lambda a: sha256_bytes(a.envelope.to_json())):
        kind = ATTESTATION_KINDS.get(attestation.predicate_type)
        data = attestation.envelope.to_json() + b"\n"
        openpgp = attestation.openpgp_signatures
        if kind is None:
            # Signing statements come again as signatures; other predicates are not this package's subject.
            if attestation.predicate_type != COSIGN_SIGN_PREDICATE:
                others[attestation.predicate_type] += 1
            continue
        if (data, openpgp) in seen:
            continue
        seen.add((data, openpgp))
        numbers[kind] += 1
        path = f"{folder}/{kind}-{numbers[kind]}.dsse.json"
        files[path] = data
        # Statements signed with OpenPGP: the envelope carries the exact bytes, each .asc a signature of them.
        signatures = [f"{folder}/{kind}-{numbers[kind]}.{index}.asc" for index in range(1, len(openpgp) + 1)]
        files.update(zip(signatures, openpgp, strict=True))
        attestations.append(
            AttestationFile(path=path, kind=kind, origin=attestation.origin, openpgp_signatures=signatures)
        )
    problems = list(found.problems)
    if others:
        listed = ", ".join(f"{count} x {kind}" for kind, count in sorted(others.items()))
        problems.append(f"attestations of other predicate types not included: {listed}")
    return EngineInfo(
        digest=digest,
        references=references,
        subjects=sorted(found.subjects),
        attestations=attestations,
        signatures=_signature_files(folder, found.signatures, files),
        problems=problems,
        model_signatures=model_signature_files(folder, found.model_signatures, files),
    )


def _signature_files(
    folder: str, signatures: ImageSignatures | None, files: dict[str, Member]
) -> list[SignatureFile]:
    if signatures is None:
        return []
    entries: list[SignatureFile] = []
    origin = signatures.origin

    def add(kind: SignatureKind, data: bytes, extension: str, manifest: SignedManifest | None = None) -> None:
        path = f"{folder}/signatures/{len(entries) + 1}-{kind}.{extension}"
        files[path] = data
        entries.append(SignatureFile(path=path, kind=kind, origin=origin, manifest=manifest))

    for classic in signatures.classic:
        add("cosign-classic", classic_signature_document(classic), "json")
    for bundle in signatures.bundles:
        add("sigstore-bundle", bundle, "sigstore.json")
    for statement in signatures.statements:
        add("cosign-sign-dsse", statement.envelope.to_json() + b"\n", "dsse.json")
    served = signatures.descriptor
    signed = SignedManifest(media_type=served.media_type, size=served.size) if served is not None else None
    for notation in signatures.notation:
        if notation.media_type == JWS_MEDIA_TYPE:
            add("notation-jws", notation.envelope, "jws.json", signed)
        else:
            add("notation-cose", notation.envelope, "cose", signed)
    return entries


def _version() -> str:
    try:
        return importlib.metadata.version("trtguard")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"

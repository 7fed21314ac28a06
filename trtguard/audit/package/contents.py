"""The evidence package format: member layout, the index, the signed statement and its predicate.

```
index.json                      {"version": 1, "files": [{"path", "sha256", "size"}, …]}: every other file
index.dsse.json                 DSSE envelope of an in-toto Statement: subjects = index.json and every file,
                                predicate (EVIDENCE_PACKAGE_PREDICATE_TYPE) = EvidencePackagePredicate below
decisions/records.jsonl         {"seq", "prev_hash", "hash", "record"} per line, in seq order; "record" is the
                                canonical JSON the log hashed (decisionlog._record.chain_hash)
policies/…                      policy and key files, laid out relative to their common folder
engines/sha256-<hex>/…          attestations (<kind>-<n>.dsse.json), signatures (signatures/…) and model
                                signatures (model-signature-<n>.sigstore.json: of the files it was built
                                from, OpenSSF Model Signing) per engine
images/sha256-<hex>/signatures/…  the signatures of each image (runtime and sidecar images) the selected
                                decisions name
```
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trtguard.audit.package._deflate import Deflated
from trtguard.audit.package.archive import Member
from verifier.attestations import (
    CHANGE_APPROVAL_PREDICATE_TYPE,
    ENGINE_BUILD_PREDICATE_TYPE,
    ENGINE_VERIFICATION_PREDICATE_TYPE,
)
from verifier.base import InputError, sha256_bytes
from verifier.crypto import PrivateKey, ResourceDescriptor, Statement, sign_statement

#: Predicate type of the statement that signs a package's index.
EVIDENCE_PACKAGE_PREDICATE_TYPE: Final = "https://trtguard.dev/attestations/evidence-package/v1"
INDEX: Final = "index.json"
SIGNATURE: Final = "index.dsse.json"
RECORDS: Final = "decisions/records.jsonl"
INDEX_VERSION: Final = 1
#: ``evidence_source`` of a package exported without one.
NO_SOURCE: Final = "no evidence source"

AttestationKind = Literal["build-manifest", "change-approval", "engine-verification"]
#: Attestation kinds a package carries, by predicate type.
ATTESTATION_KINDS: Final[Mapping[str, AttestationKind]] = {
    ENGINE_BUILD_PREDICATE_TYPE: "build-manifest",
    CHANGE_APPROVAL_PREDICATE_TYPE: "change-approval",
    ENGINE_VERIFICATION_PREDICATE_TYPE: "engine-verification",
}
SignatureKind = Literal[
    "cosign-classic", "sigstore-bundle", "cosign-sign-dsse", "notation-jws", "notation-cose"
]

Sha256Hex = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
Digest = Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]
Seq = Annotated[int, Field(ge=1)]


class ChainScope(StrEnum):
    """How much of the decision log's hash chain a package carries beside the selected decisions."""

    SEGMENT = "segment"
    """Every record from the first selected one to the log head: the default."""
    FULL = "full"
    """Every record from the genesis record to the log head."""
    SELECTED = "selected"
    """The selected records only (other workloads' decisions stay out; their links are not shown)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class IndexEntry(_Model):
    """One file of the package."""

    path: str
    sha256: Sha256Hex
    size: Annotated[int, Field(ge=0)]


class Index(_Model):
    """``index.json``."""

    version: Literal[1]
    files: list[IndexEntry]


class Exporter(_Model):
    """The program that wrote the package."""

    name: str
    version: str


class SelectionInfo(_Model):
    """What was selected, by which rule, and the ``seq`` of every selected decision."""

    by: Literal["audit_id", "engine", "workload"]
    value: str
    rule: str
    records: list[Seq]


class ChainReportInfo(_Model):
    """The exporter's recomputation of the whole log just before it read the records."""

    ok: bool
    records: Annotated[int, Field(ge=0)]
    head_seq: Annotated[int, Field(ge=0)]
    head_hash: Sha256Hex


class LogInfo(_Model):
    """The decision log and the part of its chain the package carries."""

    description: str
    chain: ChainScope
    file: str
    first_seq: Seq
    last_seq: Seq
    records: Annotated[int, Field(ge=1)]
    report: ChainReportInfo


class RevisionCount(_Model):
    """How many selected decisions name one policy revision (``None``: decided without policies)."""

    revision: str | None
    decisions: Annotated[int, Field(ge=1)]


class PolicyInfo(_Model):
    """The policy files included and whether they are the ones the decisions were made under."""

    revision: str
    files: list[str]
    key_files: list[str]
    decision_revisions: list[RevisionCount]
    in_force: bool


class AttestationFile(_Model):
    """One attestation envelope of an engine, and the detached OpenPGP signatures over its statement's bytes
    (the envelope's payload) when it was signed that way (an envelope without DSSE signatures then)."""

    path: str
    kind: AttestationKind
    origin: str
    openpgp_signatures: list[str] = Field(default_factory=list)


class ModelSignatureFile(_Model):
    """An OpenSSF Model Signing signature found beside an engine (a Sigstore bundle, whole): about the model
    files the engine was built from, it counts where a build manifest records the digest of one of them."""

    path: str
    origin: str
    kind: Literal["model-signature"] = "model-signature"


class SignedManifest(_Model):
    """The media type and size of the artifact's manifest as the registry served it at export (a Notary
    Project signature names the manifest's whole descriptor, which verification compares)."""

    media_type: str
    size: int = Field(ge=0)


class SignatureFile(_Model):
    """One signature of an engine artifact; a Notation signature with the manifest descriptor it is for."""

    path: str
    kind: SignatureKind
    origin: str
    manifest: SignedManifest | None = None


class EngineInfo(_Model):
    """The attestations and signatures of one engine named by the selected decisions."""

    digest: Digest
    references: list[str]
    subjects: list[Digest]
    attestations: list[AttestationFile]
    signatures: list[SignatureFile]
    problems: list[str]
    #: Absent from packages exported before model signatures were carried.
    model_signatures: list[ModelSignatureFile] = Field(default_factory=list)


class ImageInfo(_Model):
    """The signatures of one image (other than an engine) named by the selected decisions."""

    digest: Digest
    references: list[str]
    signatures: list[SignatureFile]
    problems: list[str]


class EvidencePackagePredicate(_Model):
    """The predicate of the statement that signs the index."""

    exporter: Exporter
    exported_at: datetime
    selection: SelectionInfo
    log: LogInfo
    policy: PolicyInfo
    evidence_source: str
    engines: list[EngineInfo]
    problems: list[str]
    #: Absent from packages written before images were included.
    images: list[ImageInfo] = Field(default_factory=list)


def engine_folder(digest: str) -> str:
    """``engines/sha256-<hex>`` for an engine digest."""
    return "engines/" + digest.replace(":", "-")


def image_folder(digest: str) -> str:
    """``images/sha256-<hex>`` for an image digest."""
    return "images/" + digest.replace(":", "-")


def seal(
    files: Mapping[str, Member], predicate: EvidencePackagePredicate, key: PrivateKey
) -> list[tuple[str, Member]]:
    """Every member of the package, index and signature first, then ``files`` by name."""
    names = sorted(files)
    entries = [_entry(name, files[name]) for name in names]
    index = Index(version=INDEX_VERSION, files=entries).model_dump_json(indent=1).encode() + b"\n"
    subjects = [ResourceDescriptor(name=INDEX, digest={"sha256": sha256_bytes(index)})]
    subjects += [ResourceDescriptor(name=entry.path, digest={"sha256": entry.sha256}) for entry in entries]
    statement = Statement(
        subject=subjects,
        predicate_type=EVIDENCE_PACKAGE_PREDICATE_TYPE,
        predicate=predicate.model_dump(mode="json"),
    )
    envelope = sign_statement(statement, key)
    return [(INDEX, index), (SIGNATURE, envelope.to_json() + b"\n"), *((name, files[name]) for name in names)]


def _entry(name: str, data: Member) -> IndexEntry:
    if isinstance(data, Deflated):
        return IndexEntry(path=name, sha256=data.sha256, size=data.size)
    return IndexEntry(path=name, sha256=sha256_bytes(data), size=len(data))


def parse_index(data: bytes) -> Index:
    """``index.json``; raises :class:`InputError` when it is not one."""
    try:
        return Index.model_validate_json(data)
    except ValidationError as error:
        raise InputError(f"malformed: {_problems(error)}", location=INDEX) from None


def parse_predicate(data: Mapping[str, Any]) -> EvidencePackagePredicate:
    """The statement's predicate; raises :class:`InputError` when it is not an evidence-package predicate."""
    try:
        return EvidencePackagePredicate.model_validate(data)
    except ValidationError as error:
        raise InputError(f"malformed predicate: {_problems(error)}", location=SIGNATURE) from None


def record_line(seq: int, prev_hash: str, digest: str, canonical_record: bytes) -> bytes:
    """One line of ``decisions/records.jsonl``, the record in the canonical form the chain hashed.

    ``prev_hash`` and ``digest`` are hex (checked by the caller), so they need no JSON escaping.
    """
    return b'{"seq": %d, "prev_hash": "%s", "hash": "%s", "record": %s}\n' % (
        seq,
        prev_hash.encode(),
        digest.encode(),
        canonical_record,
    )


def _problems(error: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(part) for part in item['loc']) or 'document'}: {item['msg']}"
        for item in error.errors(include_url=False)[:5]
    )

"""The JSON Schema of a decision record (format 2), as ``trtguard schema decision`` prints it.

The models below describe the JSON object the log stores and hashes (:meth:`DecisionRecord.to_json`), field
by field: what the admission flow puts in (``webhook._admission``) and, in ``images`` and ``engines``, what
the policies counted (``policies.results.ArtifactRecord``). They are a description for readers and
validators, not the writer's code: docs/decision-log.md is the specification they follow, and the tests
check every record the webhook writes against this schema.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

Digest = Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]
#: Integers beyond ±2^53 are written as decimal text (RFC 8785 cannot write them exactly).
LargeInt = int | str


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Omitted(_Model):
    """Ends a list that was cut to its bound: how many entries were left out."""

    omitted: Annotated[int, Field(ge=1)]


class KeySigner(_Model):
    """A trusted key: its name in the policies' TrustedKeys and its key id (hex SHA-256 of the SPKI DER)."""

    key: str
    key_id: str | None


class IdentitySigner(_Model):
    """A keyless signer: the certificate subject and the OIDC issuer."""

    identity: str
    issuer: str


Signers = list[KeySigner | IdentitySigner | Omitted]


class Logged(_Model):
    """A check of a counted signature that failed and that the signer's verification level only logs."""

    signer: Annotated[str, Field(description="the Notation signer's name in the policies")]
    check: Annotated[str, Field(description="Notation's name of the check: expiry, authenticTimestamp")]
    level: Literal["permissive", "audit"]
    message: str


class Signature(_Model):
    """An image signature that counted."""

    format: Literal["cosign-classic", "sigstore-bundle", "dsse", "notation"]
    digest: Annotated[
        Digest,
        Field(description="the payload layer, the bundle's bytes, the statement, or the Notation envelope"),
    ]
    signers: Signers
    tlog_index: LargeInt | None
    logged: Annotated[
        list[Logged | Omitted],
        Field(description="written only when not empty (a field added in format 2; absent before)"),
    ] = []


class Attestation(_Model):
    """An image attestation that counted."""

    predicate_type: str
    digest: Annotated[Digest, Field(description="SHA-256 of the in-toto statement (the DSSE payload)")]
    signers: Signers


class Image(_Model):
    """An image of the object."""

    reference: Annotated[str, Field(description="as written in the object")]
    digest: Annotated[Digest | None, Field(description="pinned, or resolved from the tag; null if unknown")]
    path: str
    container: Annotated[str | None, Field(description="the container (or volume) that uses it")]
    signatures: list[Signature | Omitted]
    attestations: list[Attestation | Omitted]
    pinned: Annotated[
        str | None,
        Field(
            description="the reference /mutate pinned it to (name:tag@sha256:…, the digest a pinDigest rule "
            "verified), the patch's replacement at `path`; written only by /mutate records that pinned it"
        ),
    ] = None


class BuildManifest(_Model):
    """The signed build manifest an engine was judged by."""

    digest: Annotated[Digest, Field(description="manifest_digest: SHA-256 of the signed statement")]
    signers: Signers
    audit_id: str
    tensorrt_version: str
    precisions: list[str]


class AdmittedBy(_Model):
    """The decision-log record that admitted an engine."""

    record_id: str
    seq: LargeInt | None


class Baseline(_Model):
    """A build manifest the engine's changes were computed against."""

    kind: Literal["declared-previous-manifest", "previous-engine", "last-admitted-engine"]
    manifest_digest: Digest
    engine: str | None
    admitted_by: AdmittedBy | None


class Change(_Model):
    """A change kind and the baselines (indexes into ``baselines``) it was found against."""

    kind: str
    against: list[LargeInt]


class Approval(_Model):
    """A change approval that counted."""

    approver: str
    signers: Signers
    digest: Annotated[Digest, Field(description="SHA-256 of the approval's in-toto statement")]
    changes: list[str]


class ChangeControl(_Model):
    """One policy's change control of an engine."""

    policy: str
    baselines: list[Baseline | Omitted]
    changes: list[Change]
    gated: list[str]
    approvals: list[Approval | Omitted]


class Verification(_Model):
    """The GPU verification attestation that counted."""

    digest: Digest
    signers: Signers


class ConfirmedBuild(_Model):
    """What one confirming policy judged an engine by."""

    model: Annotated[
        str | None, Field(description="hex SHA-256 of the ONNX model", pattern=r"^[0-9a-f]{64}$")
    ] = None
    manifest: Annotated[Digest | None, Field(description="the build manifest it judged the engine by")] = None


class Engine(_Model):
    """An engine of the object."""

    reference: str
    digest: Digest | None
    path: str
    name: str | None
    containers: list[str]
    build_manifests: list[BuildManifest | Omitted]
    change_control: list[ChangeControl | Omitted]
    verifications: list[Verification | Omitted]
    confirmed_by: Annotated[
        list[str],
        Field(
            description="the policies with changeControl that confirmed the engine in this decision, by "
            "name: change control's history for a policy is the last admission it confirmed engines in; "
            "absent in records written before it was recorded, which count as confirmed by every policy"
        ),
    ] = []
    model: Annotated[
        str | None,
        Field(
            description="hex SHA-256 of the ONNX model the build manifest the first change-control policy "
            "judged the engine by names (each confirming policy's own: confirmed)",
            pattern=r"^[0-9a-f]{64}$",
        ),
    ] = None
    manifest: Annotated[
        Digest | None,
        Field(
            description="the build manifest change control judged the engine by: its baseline once admitted"
        ),
    ] = None
    confirmed: Annotated[
        dict[str, ConfirmedBuild],
        Field(
            description="for each policy of confirmed_by, the ONNX model and the build manifest that policy "
            "judged the engine by (each reads its own signers' manifests): that policy's history keeps the "
            "engine's model by these; absent in records written before schema 7, whose model and manifest "
            "count for every policy"
        ),
    ] = {}


class Violation(_Model):
    """A Deny, Warn or Audit finding; ``image``, ``engine`` and ``path`` only where they apply."""

    policy: str
    rule: str
    message: str
    fix: str
    action: Literal["Deny", "Warn", "Audit"]
    error: bool
    indeterminate: bool = False
    image: str | None = None
    engine: str | None = None
    path: str | None = None


class DecisionRecordDocument(_Model):
    """One decision record, format 2 (docs/decision-log.md)."""

    format: Literal[2]
    record_id: Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]
    time: Annotated[str, Field(pattern=r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")]
    uid: str
    operation: str
    kind: str
    api_version: str
    sub_resource: str | None
    namespace: str | None
    name: str | None
    user: str | None
    groups: list[str]
    dry_run: bool
    allowed: bool
    reason: str
    message: str | None
    violations: list[Violation | Omitted]
    warnings: list[str]
    images: list[Image | Omitted]
    engines: list[Engine | Omitted]
    policy_revision: str | None
    latency_us: int
    replica: str | None


def decision_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a format-2 decision record."""
    schema: dict[str, Any] = TypeAdapter(DecisionRecordDocument).json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://trtguard.dev/schemas/decision-record/v2",
        **schema,
    }

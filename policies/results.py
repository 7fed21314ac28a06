"""What a policy evaluation produces: violations and the decision for one resource."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from verifier.base import quick_init

if TYPE_CHECKING:
    from verifier.verification import LoggedCheck


class Action(StrEnum):
    """What a violation of a policy does."""

    DENY = "Deny"
    WARN = "Warn"
    AUDIT = "Audit"


@dataclass(frozen=True, slots=True)
class Violation:
    """One rule of one policy not met by one image or engine (or by the workload as a whole).

    ``error`` is true when the rule could not be checked at all (offline, registry down, out of time); its
    ``action`` then comes from the policy's ``onError`` rather than its ``action``. ``indeterminate`` is
    true when the evidence was fetched but cannot tell (an unrated finding, a scan that skipped packages,
    an empty SBOM): its ``action`` is the policy's ``onIndeterminate`` (or the rule's ``unknown``).
    """

    policy: str
    rule: str
    message: str
    fix: str
    action: Action
    image: str | None = None
    engine: str | None = None
    path: str | None = None
    error: bool = False
    indeterminate: bool = False

    def one_line(self) -> str:
        """``policy/rule: [image|engine] message; fix`` on one line, for logs and admission messages."""
        subject = self.image or self.engine
        where = f" {subject}:" if subject else ""
        return f"{self.policy}/{self.rule}:{where} {self.message}; fix: {self.fix}"

    def to_json(self) -> dict[str, Any]:
        """The machine-readable form used by ``check --format json`` and the decision log."""
        data: dict[str, Any] = {
            "policy": self.policy,
            "rule": self.rule,
            "message": self.message,
            "fix": self.fix,
            "action": self.action.value,
            "error": self.error,
        }
        if self.indeterminate:
            data["indeterminate"] = True
        for key in ("image", "engine", "path"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        return data


#: Most entries kept in each list of evidence an artifact record holds; more end in ``{"omitted": N}``.
MAX_COUNTED: Final = 16
#: Most violations of one kind (denials, warnings, audits) ``check`` lists for one resource; the others are
#: counted (``violations_not_listed`` in JSON): a workload built to make thousands must not make a report
#: of megabytes.
MAX_LISTED: Final = 1000

SignatureFormat = Literal["cosign-classic", "sigstore-bundle", "dsse", "notation"]


@dataclass(frozen=True, slots=True)
class SignerRecord:
    """Who made a signature that counted: a trusted key (its name in the policies and its key id, the hex
    SHA-256 of the public key's DER), or a keyless identity (certificate subject and OIDC issuer)."""

    key: str | None = None
    key_id: str | None = None
    identity: str | None = None
    issuer: str | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"key", "key_id"}`` or ``{"identity", "issuer"}``."""
        if self.identity is not None:
            return {"identity": self.identity, "issuer": self.issuer}
        return {"key": self.key, "key_id": self.key_id}


@dataclass(frozen=True, slots=True)
class SignatureRecord:
    """An image signature that counted.

    ``digest`` names the object: a classic signature's payload layer, a Sigstore bundle's bytes, a bare
    DSSE envelope's statement (its payload); ``tlog_index`` is the verified transparency-log entry's index;
    ``logged`` the checks that failed and that the signer's verification level only logs (Notation's
    ``permissive`` and ``audit``), written only when there are some.
    """

    format: SignatureFormat
    digest: str
    signers: tuple[SignerRecord, ...]
    tlog_index: int | None = None
    logged: tuple[LoggedCheck, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The record's JSON form."""
        data: dict[str, Any] = {
            "format": self.format,
            "digest": self.digest,
            "signers": _bounded(self.signers),
            "tlog_index": self.tlog_index,
        }
        if self.logged:
            data["logged"] = _bounded(self.logged)
        return data


@dataclass(frozen=True, slots=True)
class AttestationRecord:
    """An attestation that counted for an image: its predicate type, statement digest and signers."""

    predicate_type: str
    digest: str
    signers: tuple[SignerRecord, ...]

    def to_json(self) -> dict[str, Any]:
        """The record's JSON form."""
        return {
            "predicate_type": self.predicate_type,
            "digest": self.digest,
            "signers": _bounded(self.signers),
        }


@dataclass(frozen=True, slots=True)
class BuildManifestRecord:
    """The signed build manifest an engine was judged by (``manifest_digest``: SHA-256 of its statement)."""

    digest: str
    signers: tuple[SignerRecord, ...]
    audit_id: str
    tensorrt_version: str
    precisions: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """The record's JSON form."""
        return {
            "digest": self.digest,
            "signers": _bounded(self.signers),
            "audit_id": self.audit_id,
            "tensorrt_version": self.tensorrt_version,
            "precisions": list(self.precisions),
        }


BaselineKind = Literal["declared-previous-manifest", "previous-engine", "last-admitted-engine"]


@dataclass(frozen=True, slots=True)
class BaselineRecord:
    """A build manifest an engine's changes were computed against, and where it came from.

    ``kind`` says how it was chosen: the manifest the engine's own build manifest declares as its
    predecessor, else the newest manifest of the previous engine it declares, or the manifest of the engine
    it replaces in the workload's last admission (``admitted_by``: that decision's record id and seq).
    """

    kind: BaselineKind
    manifest_digest: str
    engine: str | None = None
    admitted_by: AdmittingDecision | None = None

    def to_json(self) -> dict[str, Any]:
        """The record's JSON form."""
        return {
            "kind": self.kind,
            "manifest_digest": self.manifest_digest,
            "engine": self.engine,
            "admitted_by": self.admitted_by.to_json() if self.admitted_by is not None else None,
        }


@dataclass(frozen=True, slots=True)
class AdmittingDecision:
    """The decision-log record that admitted an engine: its ``record_id`` and place in the chain."""

    record_id: str
    seq: int | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"record_id", "seq"}``."""
        return {"record_id": self.record_id, "seq": self.seq}


@dataclass(frozen=True, slots=True)
class ApprovalRecord:
    """A change approval that counted: who approved, with which key, the attestation, the kinds it covers."""

    approver: str
    signers: tuple[SignerRecord, ...]
    digest: str
    changes: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """The record's JSON form."""
        return {
            "approver": self.approver,
            "signers": _bounded(self.signers),
            "digest": self.digest,
            "changes": list(self.changes),
        }


@dataclass(frozen=True, slots=True)
class ChangeControlRecord:
    """One policy's change control of an engine: baselines, the change kinds found against which of them
    (indexes into ``baselines``; none for ``FirstInt8`` without a baseline), the gated ones, the approvals
    counted."""

    policy: str
    baselines: tuple[BaselineRecord, ...]
    changes: tuple[tuple[str, tuple[int, ...]], ...]
    gated: tuple[str, ...]
    approvals: tuple[ApprovalRecord, ...]

    def to_json(self) -> dict[str, Any]:
        """The record's JSON form."""
        return {
            "policy": self.policy,
            "baselines": _bounded(self.baselines),
            "changes": [{"kind": kind, "against": list(against)} for kind, against in self.changes],
            "gated": list(self.gated),
            "approvals": _bounded(self.approvals),
        }


@dataclass(frozen=True, slots=True)
class VerificationRecord:
    """The GPU verification attestation that counted for an engine (statement digest and signers)."""

    digest: str
    signers: tuple[SignerRecord, ...]

    def to_json(self) -> dict[str, Any]:
        """The record's JSON form."""
        return {"digest": self.digest, "signers": _bounded(self.signers)}


@quick_init
@dataclass(frozen=True, slots=True)
class ArtifactRecord:
    """An image or engine the decision was about, with its digest where it is known, and what counted.

    For an image, ``container`` names the container (or volume) that runs it, and ``signatures`` and
    ``attestations`` are those its image rules counted. For an engine, ``name`` (the image volume's or
    annotation entry's name) and ``containers`` (those that may run it) say which engine of the workload it
    is, so that its successor is found whatever repository it comes from; ``build_manifests``,
    ``change_control`` and ``verifications`` are what its model rules counted, and ``confirmed_by`` names the
    change-control policies that confirmed it (:attr:`confirmed_by`).
    """

    reference: str
    digest: str | None
    path: str
    name: str | None = None
    containers: tuple[str, ...] = ()
    engine: bool = False
    container: str | None = None
    signatures: tuple[SignatureRecord, ...] = ()
    attestations: tuple[AttestationRecord, ...] = ()
    build_manifests: tuple[BuildManifestRecord, ...] = ()
    change_control: tuple[ChangeControlRecord, ...] = ()
    verifications: tuple[VerificationRecord, ...] = ()
    confirmed_by: tuple[str, ...] = ()
    """For an engine: the policies with ``changeControl`` that confirmed it in this decision, by name. A
    policy confirms an engine it judged when its change control found nothing missing (every gated change
    approved, nothing that could not be checked), whatever the policy's action; and an engine it did not
    judge again (unchanged by an UPDATE) when it had confirmed that engine in its own last admission here.
    Change control's history for a policy is the last admission that policy confirmed engines in
    (policies/README.md, "Change control")."""
    model: str | None = None
    """For an engine change control judged: the hex SHA-256 of the ONNX model the build manifest the first
    policy judged it by names (for people: each confirming policy's own is in :attr:`confirmed`)."""
    manifest: str | None = None
    """For an engine change control judged: the digest of the signed build manifest the first policy judged
    it by."""
    confirmed: tuple[tuple[str, str | None, str | None], ...] = ()
    """For an engine: (policy, model, manifest) of each policy of :attr:`confirmed_by`: the ONNX model and
    the build manifest that policy judged it by, its baseline manifest once admitted (another manifest signed
    later for the same file replaces it never). Each policy reads the manifests its own signers signed, so
    each keeps the engine's model by its own: the model identity change control keeps that policy's last
    confirmed build of, per workload."""
    pinned: str | None = None
    """For an image a ``pinDigest`` rule verified by tag: the reference it is pinned to
    (``name:tag@sha256:…``, the digest verified), as the mutating webhook's patch writes it at ``path`` (a
    storage URI keeps its scheme there: ``oci://name:tag@sha256:…``)."""

    def to_json(self) -> dict[str, Any]:
        """JSON form for the decision log and check output."""
        data: dict[str, Any] = {"reference": self.reference, "digest": self.digest, "path": self.path}
        if self.engine:
            data["name"] = self.name
            data["containers"] = list(self.containers)
            data["build_manifests"] = _bounded(self.build_manifests)
            data["change_control"] = _bounded(self.change_control)
            data["verifications"] = _bounded(self.verifications)
            data["confirmed_by"] = list(self.confirmed_by)
            if self.model is not None:
                data["model"] = self.model
            if self.manifest is not None:
                data["manifest"] = self.manifest
            data["confirmed"] = {
                policy: {k: v for k, v in (("model", model), ("manifest", manifest)) if v is not None}
                for policy, model, manifest in self.confirmed
            }
        else:
            data["container"] = self.container
            data["signatures"] = _bounded(self.signatures)
            data["attestations"] = _bounded(self.attestations)
            if self.pinned is not None:
                data["pinned"] = self.pinned
        return data


class _Recorded(Protocol):
    def to_json(self) -> dict[str, Any]: ...


def _bounded(items: Sequence[_Recorded]) -> list[dict[str, Any]]:
    """The JSON forms of ``items``, at most :data:`MAX_COUNTED`; more end in ``{"omitted": N}``."""
    kept = [item.to_json() for item in items[:MAX_COUNTED]]
    if len(items) > MAX_COUNTED:
        kept.append({"omitted": len(items) - MAX_COUNTED})
    return kept


@dataclass(frozen=True, slots=True)
class AdmittedEngine:
    """An engine a workload ran (of its last real admission, or the last build of its model a policy
    confirmed there), as the decision log recorded it."""

    reference: str
    #: The image volume's or annotation entry's name; None in records written before names were kept.
    name: str | None = None
    containers: tuple[str, ...] = ()
    #: The record that admitted it.
    admitted_by: AdmittingDecision | None = None
    #: The ONNX model's hex SHA-256 and the build manifest it was admitted with (``ArtifactRecord.model``,
    #: ``ArtifactRecord.manifest``); None in records written before they were kept.
    model: str | None = None
    manifest: str | None = None


@quick_init
@dataclass(frozen=True, slots=True)
class Decision:
    """The verdict for one resource under one policy set."""

    kind: str
    namespace: str | None
    name: str | None
    policy_revision: str
    matched_policies: tuple[str, ...] = ()
    violations: tuple[Violation, ...] = ()
    images: tuple[ArtifactRecord, ...] = ()
    engines: tuple[ArtifactRecord, ...] = ()
    notes: tuple[str, ...] = field(default=())
    unjudged: str | None = None
    """Why nothing was judged: the object names no image of a known workload, or trtguard does not know
    its kind and was not asked to judge it (its images are in ``images``, unchecked)."""

    @property
    def allowed(self) -> bool:
        """False as soon as one violation's action is Deny; Warn and Audit never deny."""
        return not any(v.action is Action.DENY for v in self.violations)

    @property
    def pins(self) -> tuple[ArtifactRecord, ...]:
        """The images to pin (:attr:`ArtifactRecord.pinned`), each at its path."""
        return tuple(i for i in self.images if i.pinned is not None)

    @property
    def denials(self) -> tuple[Violation, ...]:
        """Violations whose action is Deny."""
        return tuple(v for v in self.violations if v.action is Action.DENY)

    @property
    def warnings(self) -> tuple[Violation, ...]:
        """Violations whose action is Warn."""
        return tuple(v for v in self.violations if v.action is Action.WARN)

    @property
    def audits(self) -> tuple[Violation, ...]:
        """Violations whose action is Audit (recorded, never shown to the user as a warning)."""
        return tuple(v for v in self.violations if v.action is Action.AUDIT)

    def to_json(
        self, *, artifact_json: Callable[[ArtifactRecord], dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """One object per resource, as ``trtguard check --format json`` prints it.

        ``artifact_json`` gives the JSON form of each image and engine (``ArtifactRecord.to_json`` unless
        given): a report of many decisions passes one that keeps the forms of records met before.
        """
        artifact = artifact_json or ArtifactRecord.to_json
        denials, warnings, audits = self.denials, self.warnings, self.audits
        unlisted = {
            f"{key}_not_listed": len(found) - MAX_LISTED
            for key, found in (("violations", denials), ("warnings", warnings), ("audit", audits))
            if len(found) > MAX_LISTED
        }
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "allowed": self.allowed,
            "violations": [v.to_json() for v in denials[:MAX_LISTED]],
            "warnings": [v.one_line() for v in warnings[:MAX_LISTED]],
            "audit": [v.to_json() for v in audits[:MAX_LISTED]],
            **unlisted,
            "policies": list(self.matched_policies),
            "policy_revision": self.policy_revision,
            "images": [artifact(i) for i in self.images],
            "engines": [artifact(e) for e in self.engines],
            "notes": list(self.notes),
            **({"skipped": self.unjudged} if self.unjudged is not None else {}),
        }

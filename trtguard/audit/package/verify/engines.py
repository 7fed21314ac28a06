"""The engines of an evidence package: every engine the selected decisions name is there, with its evidence
(attestations, signatures and the model signatures of its inputs) checked against the included TrustedKeys."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from policies.loader import PolicySet
from trtguard.audit.package.contents import EngineInfo, EvidencePackagePredicate
from trtguard.audit.package.selection import engine_digests
from trtguard.audit.package.verify._entries import named_by_selection, package_entries
from trtguard.audit.package.verify.attestations import build_inputs, check_attestation, check_model_signature
from trtguard.audit.package.verify.decisions import RecordLine
from trtguard.audit.package.verify.findings import Findings
from trtguard.audit.package.verify.signatures import check_entry_signatures, signer_keys, trust_policies
from verifier.verification import PublicKey, StatementTrust


def check_engines(
    predicate: EvidencePackagePredicate,
    lines: list[RecordLine],
    policy_set: PolicySet | None,
    members: Mapping[str, bytes],
    findings: Findings,
) -> frozenset[str]:
    """Check every engine's evidence; returns the engines whose build manifest carries the audit ID."""
    named = named_by_selection(lines, set(predicate.selection.records), engine_digests)
    entries = package_entries("engines", predicate.engines, named, findings, missing="an incomplete export")
    keys = signer_keys(policy_set)
    audit_engines: set[str] = set()
    for entry in entries.values():
        if _engine(members, entry, keys, policy_set, predicate.selection.value, findings):
            audit_engines.add(entry.digest)
    return frozenset(audit_engines)


def _engine(
    members: Mapping[str, bytes],
    entry: EngineInfo,
    keys: Mapping[str, PublicKey],
    policy_set: PolicySet | None,
    audit_id: str,
    findings: Findings,
) -> bool:
    """Check one engine's files; True when one of its build manifests carries ``audit_id``."""
    name = f"engine {entry.digest[:19]}…"
    if entry.digest not in entry.subjects:
        findings.fail("engines", f"{name}: its own digest is not among its subject digests")
    for problem in entry.problems:
        findings.note("engines", f"{name}: {problem}")
        findings.limits.append(f"Evidence for engine {entry.digest}: {problem}.")
    kinds = Counter(attestation.kind for attestation in entry.attestations)
    if not kinds["build-manifest"]:
        findings.note("engines", f"{name}: the package has no build manifest for it")
        findings.limits.append(f"How engine {entry.digest} was built: no build manifest was found at export.")
    carries = False
    # Who may sign a statement: every signer of the included policies, in every statement format.
    trust = StatementTrust.of(policy_set.signers if policy_set is not None else {})
    for attestation in entry.attestations:
        found = check_attestation(
            members, attestation, name=name, entry=entry, trust=trust, findings=findings
        )
        carries = found == audit_id or carries
    model_trust = StatementTrust.of(
        policy_set.signers if policy_set is not None else {}, formats=["model-signing"]
    )
    inputs = build_inputs(members, entry) if entry.model_signatures else {}
    for model_signature in entry.model_signatures:
        check_model_signature(
            members, model_signature, name=name, inputs=inputs, trust=model_trust, findings=findings
        )
    signers = trust_policies(keys, policy_set)
    check_entry_signatures(members, entry, name=name, trust=signers, findings=findings, topic="engines")
    return carries

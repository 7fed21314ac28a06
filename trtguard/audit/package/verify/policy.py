"""The policy set in an evidence package: it recomputes its revision; which decisions were made under it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from policies.loader import PolicySet
from trtguard.audit.package.contents import EvidencePackagePredicate
from trtguard.audit.package.policy import load_snapshot
from trtguard.audit.package.verify.decisions import RecordLine
from trtguard.audit.package.verify.findings import Findings
from verifier.base import TrtguardError, VerificationError


def check_policy(
    predicate: EvidencePackagePredicate,
    lines: list[RecordLine],
    members: Mapping[str, bytes],
    findings: Findings,
) -> PolicySet | None:
    """The included policy set, loaded from the package (None when it does not load)."""
    info = predicate.policy
    try:
        policy_set = load_snapshot(members, info.files, info.key_files)
    except VerificationError as error:
        findings.fail("policy", str(error))
        return None
    except TrtguardError as error:
        findings.fail("policy", f"the included policies do not load: {error.diagnostics()}")
        return None
    if policy_set.revision != info.revision:
        findings.fail(
            "policy",
            f"the included policy files recompute to revision {policy_set.revision}, not {info.revision}",
        )
        return policy_set
    findings.ok(
        "policy",
        f"revision {info.revision} recomputes from the {len(info.files)} included policy files and "
        f"{len(info.key_files)} key files",
    )
    chosen = set(predicate.selection.records)
    counts = Counter(line.record.policy_revision for line in lines if line.seq in chosen)
    stated = {entry.revision: entry.decisions for entry in info.decision_revisions}
    if lines and stated != dict(counts):
        findings.fail("policy", "the package misstates which policy revisions the selected decisions name")
    in_force = set(counts) == {info.revision}
    if info.in_force and not in_force:
        findings.fail(
            "policy",
            "the package claims its policies were in force for every decision, but they were not",
        )
    elif in_force:
        findings.ok(
            "policy",
            f"the included policy set is the one all {counts.total()} selected decisions were made under",
        )
    elif lines:
        others = ", ".join(
            f"{revision or 'none'} ({count} decision{'s' if count != 1 else ''})"
            for revision, count in counts.most_common()
            if revision != info.revision
        )
        findings.note("policy", f"the included policies are not the ones these decisions name: {others}")
        findings.limits.append(
            f"The policies in force for the decisions naming other revisions ({others}): their files are "
            "not in the package; the included policy set is the one current at export."
        )
    return policy_set

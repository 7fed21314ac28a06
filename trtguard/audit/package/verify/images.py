"""The images of an evidence package: every image (other than an engine) the selected decisions name is
there with its signatures, each checked against the included TrustedKeys."""

from __future__ import annotations

from collections.abc import Mapping

from policies.loader import PolicySet
from trtguard.audit.package.contents import EvidencePackagePredicate
from trtguard.audit.package.selection import engine_digests, image_digests
from trtguard.audit.package.verify._entries import named_by_selection, package_entries
from trtguard.audit.package.verify.decisions import RecordLine
from trtguard.audit.package.verify.findings import Findings
from trtguard.audit.package.verify.signatures import check_entry_signatures, signer_keys, trust_policies


def check_images(
    predicate: EvidencePackagePredicate,
    lines: list[RecordLine],
    policy_set: PolicySet | None,
    members: Mapping[str, bytes],
    findings: Findings,
) -> None:
    """Check that every image of the selected decisions is in the package, and each signature of each."""
    chosen = set(predicate.selection.records)
    engines = set(named_by_selection(lines, chosen, engine_digests))
    named = named_by_selection(
        lines, chosen, lambda record: [digest for digest in image_digests(record) if digest not in engines]
    )
    entries = package_entries(
        "images",
        predicate.images,
        named,
        findings,
        missing="an incomplete export, or one written before images were included",
    )
    trust = trust_policies(signer_keys(policy_set), policy_set)
    for entry in entries.values():
        name = f"image {entry.digest[:19]}…"
        for problem in entry.problems:
            findings.note("images", f"{name}: {problem}")
            findings.limits.append(f"Signatures of image {entry.digest}: {problem}.")
        if not entry.signatures and not entry.problems:
            findings.note("images", f"{name}: no signature was found at export")
        check_entry_signatures(members, entry, name=name, trust=trust, findings=findings, topic="images")

"""The images of an evidence package: every image (other than an engine) the selected decisions name is
there with its signatures, each checked against the included TrustedKeys."""

from __future__ import annotations

from collections.abc import Mapping

from policies.loader import PolicySet
from trtguard.audit.package.contents import EvidencePackagePredicate, ImageInfo
from trtguard.audit.package.selection import engine_digests, image_digests
from trtguard.audit.package.verify.decisions import RecordLine
from trtguard.audit.package.verify.findings import Findings, listed
from trtguard.audit.package.verify.signatures import check_signature, trust_policies
from verifier.crypto import PublicKey


def check_images(
    predicate: EvidencePackagePredicate,
    lines: list[RecordLine],
    policy_set: PolicySet | None,
    members: Mapping[str, bytes],
    findings: Findings,
) -> None:
    """Check that every image of the selected decisions is in the package, and each signature of each."""
    chosen = set(predicate.selection.records)
    engines = {digest for line in lines if line.seq in chosen for digest in engine_digests(line.record)}
    named: dict[str, list[int]] = {}
    for line in lines:
        if line.seq in chosen:
            for digest in image_digests(line.record):
                if digest not in engines:
                    named.setdefault(digest, []).append(line.seq)
    entries: dict[str, ImageInfo] = {}
    for entry in predicate.images:
        if entry.digest in entries:
            findings.fail("images", f"image {entry.digest} is listed twice")
        entries[entry.digest] = entry
    for digest, seqs in sorted(named.items()):
        if digest not in entries:
            findings.fail(
                "images",
                f"image {digest}, named by decisions seq {listed(map(str, seqs))}, is not in the package"
                " (an incomplete export, or one written before images were included)",
            )
    keys: dict[str, PublicKey] = {}
    if policy_set is not None:
        keys = {ref: s.public_key for ref, s in policy_set.signers.items() if s.public_key is not None}
    trust = trust_policies(keys, policy_set)
    for entry in entries.values():
        name = f"image {entry.digest[:19]}…"
        for problem in entry.problems:
            findings.note("images", f"{name}: {problem}")
            findings.limits.append(f"Signatures of image {entry.digest}: {problem}.")
        if not entry.signatures and not entry.problems:
            findings.note("images", f"{name}: no signature was found at export")
        for signature in entry.signatures:
            check_signature(
                members,
                signature,
                name=name,
                digest=entry.digest,
                references=entry.references,
                trust=trust,
                findings=findings,
                topic="images",
            )

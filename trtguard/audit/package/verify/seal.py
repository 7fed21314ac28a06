"""The seal of an evidence package: the index signature, the signed statement, every file against the index.

Everything inside the archive is untrusted until the signature verifies with the key the auditor gives.
"""

from __future__ import annotations

from collections.abc import Mapping

from trtguard.audit.package.contents import (
    EVIDENCE_PACKAGE_PREDICATE_TYPE,
    INDEX,
    SIGNATURE,
    EvidencePackagePredicate,
    parse_index,
    parse_predicate,
)
from trtguard.audit.package.verify.findings import Findings, error_text, listed
from verifier.base import InputError, VerificationError, sha256_bytes
from verifier.crypto import Envelope, PublicKey, Statement, statement_from_envelope, verify_envelope


def check_seal(
    members: Mapping[str, bytes], key: PublicKey, findings: Findings
) -> tuple[EvidencePackagePredicate | None, bool]:
    """The package's predicate (None when it cannot be read) and whether ``key`` signed the index."""
    signed = False
    try:
        envelope = Envelope.from_json(members[SIGNATURE], location=SIGNATURE)
    except (InputError, RecursionError) as error:
        findings.fail("package", f"{SIGNATURE} is not a DSSE envelope: {error_text(error)}")
        return None, signed
    try:
        verify_envelope(envelope, {"the given key": key})
        signed = True
        findings.ok("package", f"the index is signed by the given key (key id {key.key_id[:16]}…)")
    except VerificationError as error:
        findings.fail("package", f"the index signature does not verify with the given key: {error.message}")
    try:
        statement = statement_from_envelope(envelope, location=SIGNATURE)
    except (InputError, VerificationError, RecursionError) as error:
        findings.fail("package", f"the signed statement is unreadable: {error_text(error)}")
        return None, signed
    if statement.predicate_type != EVIDENCE_PACKAGE_PREDICATE_TYPE:
        findings.fail(
            "package", f"the signed statement is a {statement.predicate_type}, not an evidence package"
        )
        return None, signed
    if not _files(members, statement, findings):
        return None, signed
    try:
        return parse_predicate(statement.predicate), signed
    except InputError as error:
        findings.fail("package", error.message)
        return None, signed


def _files(members: Mapping[str, bytes], statement: Statement, findings: Findings) -> bool:
    """Every file against the index and the signed statement; False when the index cannot be read."""
    subjects = {subject.name or "": subject.digest.get("sha256", "") for subject in statement.subject}
    if len(subjects) != len(statement.subject):
        findings.fail("package", "the signed statement names a file twice")
    if sha256_bytes(members[INDEX]) != subjects.get(INDEX):
        findings.fail("package", f"{INDEX} is not the index that was signed (it was changed or replaced)")
    try:
        index = parse_index(members[INDEX])
    except InputError as error:
        findings.fail("package", f"{INDEX} is {error.message}")
        return False
    entries = {entry.path: entry for entry in index.files}
    if len(entries) != len(index.files):
        findings.fail("package", f"{INDEX} lists a file twice")
    covered = {INDEX, *entries}
    unsigned = sorted(covered - set(subjects))
    unlisted = sorted(set(subjects) - covered)
    differ = sorted(p for p, e in entries.items() if p in subjects and subjects[p] != e.sha256)
    if unsigned or unlisted or differ:
        findings.fail(
            "package",
            f"{INDEX} and the signed statement disagree: {listed(unsigned + unlisted + differ)}",
        )
    missing = sorted(path for path in entries if path not in members)
    changed = sorted(
        path
        for path, entry in entries.items()
        if path in members
        and (len(members[path]) != entry.size or sha256_bytes(members[path]) != entry.sha256)
    )
    extra = sorted(set(members) - covered - {SIGNATURE})
    for problem, paths in (
        ("missing from the archive", missing),
        ("changed (SHA-256 or size differ from the index)", changed),
        ("in the archive but not in the index", extra),
    ):
        if paths:
            findings.fail("package", f"files {problem}: {listed(paths)}")
    if not (missing or changed or extra):
        findings.ok(
            "package",
            f"all {len(entries)} files match the SHA-256 and size in the index; none missing, none extra",
        )
    return True

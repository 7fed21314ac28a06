"""Checking an evidence package offline, and saying what it proves and what it does not.

Everything inside the archive is untrusted until the index signature verifies with the key the auditor gives;
every later check still runs when it does not (to say what else is wrong), but then nothing counts as proven.
One module per kind of content, each adding :class:`~.findings.Finding` objects under its topic:

* ``seal``: the index signature, the signed statement, every file against the index;
* ``decisions``: each record's hash, the links between records, the chain scope the package states;
* ``policy``: the included policy set recomputes its revision; which decisions were made under it;
* ``engines``: every engine the selected decisions name, with its ``attestations`` and ``signatures``;
* ``images``: every other image they name (the runtime image, sidecars), with its ``signatures``;
* ``selection``: the selection rule applied again to every record (right and complete);
* ``anchors``: chain heads recorded outside the package;
* ``limits``: what no package shows, beside what this one proves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from trtguard.audit.package.contents import INDEX, SIGNATURE, EvidencePackagePredicate
from trtguard.audit.package.verify.anchors import Anchor, check_anchors
from trtguard.audit.package.verify.decisions import check_decisions
from trtguard.audit.package.verify.engines import check_engines
from trtguard.audit.package.verify.findings import EvidencePackageReport, Finding, Findings, by_topic
from trtguard.audit.package.verify.images import check_images
from trtguard.audit.package.verify.limits import add_known_limits
from trtguard.audit.package.verify.policy import check_policy
from trtguard.audit.package.verify.seal import check_seal
from trtguard.audit.package.verify.selection import check_selection
from verifier.base import InputError
from verifier.crypto import PublicKey

__all__ = ["Anchor", "EvidencePackageReport", "Finding", "PackageVerifier"]


class PackageVerifier:
    """Runs every check over the members of one package (read with the archive limits already applied)."""

    def __init__(
        self, archive: str, members: Mapping[str, bytes], key: PublicKey, *, archive_sha256: str | None = None
    ) -> None:
        self._archive = archive
        self._members = members
        self._key = key
        self._archive_sha256 = archive_sha256

    def run(self, anchors: Sequence[Anchor]) -> EvidencePackageReport:
        """Check the package; never raises for a content problem (it becomes a failed finding)."""
        if INDEX not in self._members or SIGNATURE not in self._members:
            raise InputError(
                f"not a trtguard evidence package: {INDEX} or {SIGNATURE} is missing",
                location=self._archive,
                hint="give the file written by `trtguard evidence export`",
            )
        findings = Findings()
        predicate, signed = check_seal(self._members, self._key, findings)
        if predicate is None:
            return self._report(None, signed, findings)
        lines = check_decisions(predicate, self._members, findings)
        policy_set = check_policy(predicate, lines, self._members, findings)
        audit_engines = check_engines(predicate, lines, policy_set, self._members, findings)
        check_images(predicate, lines, policy_set, self._members, findings)
        check_selection(predicate, lines, audit_engines, findings)
        check_anchors(predicate, lines, anchors, findings)
        add_known_limits(predicate, lines, findings)
        return self._report(predicate, signed, findings)

    def _report(
        self, predicate: EvidencePackagePredicate | None, signed: bool, findings: Findings
    ) -> EvidencePackageReport:
        proves: list[str] = []
        if predicate is not None and signed and not findings.failures("package"):
            # What the signature covers is the files: their names, bytes and number, through the signed index.
            # The tar and gzip container around them (headers, padding, the gzip header and trailer) is not
            # signed, so the claim is about the files, never "the archive exactly as exported".
            proves.append(
                f"Every file in the package (names and contents, none missing, none added) is exactly as the "
                f"holder of key {self._key.key_id[:16]}… exported it at {predicate.exported_at.isoformat()} "
                f"from {predicate.log.description}."
            )
            findings.limits.append(
                "That the archive file is byte for byte the one exported: the signature covers the files in "
                "it, not the tar and gzip container around them (headers, padding, compression), whose "
                "changes alter no evidence."
                + (
                    f" This archive's SHA-256 is {self._archive_sha256}; compare it with the one `trtguard "
                    "evidence export` printed."
                    if self._archive_sha256
                    else ""
                )
            )
            proves += [
                finding.message[0].upper() + finding.message[1:] + "."
                for finding in by_topic(findings.proven())
            ]
        else:
            findings.limits.insert(0, "Anything: the package's signature, index or files did not verify.")
        return EvidencePackageReport(
            archive=self._archive,
            key_id=self._key.key_id,
            findings=tuple(by_topic(findings.items)),
            proves=tuple(proves),
            does_not_prove=tuple(findings.limits),
            selection=predicate.selection.rule if predicate is not None else None,
            exported_at=predicate.exported_at.isoformat() if predicate is not None else None,
            archive_sha256=self._archive_sha256,
        )

"""Evidence packages: one signed archive that lets an auditor check offline what the webhook decided, and why.

:func:`export_evidence_package` selects decisions from the decision log (by engine audit ID, engine digest or
workload) and writes one tar.gz with

* the decisions with the hash-chain records that prove them (``decisions/records.jsonl``),
* the build manifests, approvals, verification attestations and signatures of the engines they name, as the
  evidence source returns them,
* the policy files in force with their revision, and
* ``index.json`` (every file, its SHA-256 and size) with ``index.dsse.json``, a DSSE-signed in-toto statement
  whose subjects are those files and whose predicate says what was selected, when, from which log, and
  the exporter's check of the whole chain.

:func:`verify_evidence_package` checks a package with the exporter's public key and reports what it proves
and what it does not. The signature covers the files inside the archive (through the signed index), not the
archive's own bytes: the report says so, and prints the archive's SHA-256 for comparison with the one the
export printed.

How strong the chain proof is (``ChainScope``):

* ``segment`` (default): every record from the first selected decision to the log head at export. The
  selected decisions are unchanged, in order, with nothing removed between them, and the selection is
  complete from its first decision on (the verifier applies the selection rule to every record).
* ``full``: every record from the genesis record: the same for the whole log.
* ``selected``: only the selected records, each with the hashes that chain it; other workloads' decisions
  stay out of the package, at the price of showing only the links between adjacent selected records.

None of them shows records removed from the *end* of the log before the export, or a log rewritten as a
whole with its hashes recomputed: a hash chain has no outside anchor of its own. ``verify`` therefore
prints the exported head (seq and hash) for comparison and takes ``--anchor SEQ:HASH``, a head recorded
earlier (``trtguard audit verify --format json``), which a segment or full package can be checked against.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from trtguard.audit.package.archive import ArchiveLimits, UnsafeArchive, read_archive
from trtguard.audit.package.contents import EVIDENCE_PACKAGE_PREDICATE_TYPE, ChainScope
from trtguard.audit.package.export import ExportSummary, export_evidence_package
from trtguard.audit.package.selection import Selection
from trtguard.audit.package.verify import Anchor, EvidencePackageReport, Finding, PackageVerifier
from verifier.base import hash_file
from verifier.crypto import PublicKey

__all__ = [
    "EVIDENCE_PACKAGE_PREDICATE_TYPE",
    "Anchor",
    "ArchiveLimits",
    "ChainScope",
    "EvidencePackageReport",
    "ExportSummary",
    "Finding",
    "Selection",
    "UnsafeArchive",
    "export_evidence_package",
    "verify_evidence_package",
]


def verify_evidence_package(
    archive: Path,
    key: PublicKey,
    *,
    anchors: Sequence[Anchor] = (),
    limits: ArchiveLimits | None = None,
) -> EvidencePackageReport:
    """Check the package at ``archive`` offline against the exporter's public ``key``.

    Content problems become failed findings in the report (``report.ok`` is False); an archive that cannot
    be read safely raises :class:`UnsafeArchive`, one that is no evidence package
    :class:`~verifier.base.InputError`. CPU-bound: async callers run it in a thread.
    """
    members = read_archive(archive, limits or ArchiveLimits())
    digest = hash_file(archive).sha256
    return PackageVerifier(str(archive), members, key, archive_sha256=digest).run(anchors)

"""Checking an evidence package offline, and saying what it proves and what it does not.

Everything inside the archive is untrusted until the index signature verifies with the key the auditor gives;
every later check still runs when it does not (to say what else is wrong), but then nothing counts as proven.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from policies.loader import PolicySet
from trtguard.audit.package._formats import (
    notation_material,
    notation_policies,
    openpgp_keys,
    statement_signers,
)
from trtguard.audit.package.contents import (
    ATTESTATION_KINDS,
    EVIDENCE_PREDICATE_TYPE,
    INDEX,
    NO_SOURCE,
    SIGNATURE,
    AttestationFile,
    ChainScope,
    EngineInfo,
    EvidencePredicate,
    SignatureFile,
    parse_index,
    parse_predicate,
)
from trtguard.audit.package.policy import load_snapshot
from trtguard.audit.package.selection import Selection, engine_digests
from verifier.attestations import load_approval, load_verification
from verifier.digests import is_sha256_hex, sha256_bytes
from verifier.dsse import Envelope, verify_envelope
from verifier.errors import InputError, TrtguardError, VerificationError
from verifier.intoto import Statement, statement_from_envelope
from verifier.keys import PublicKey
from verifier.manifest import load_manifest
from verifier.references import ImageReference
from verifier.signatures import CosignSignature, TrustPolicy, verify_image_signatures
from verifier.signatures.openpgp import OpenPGPKey
from webhook.decisionlog import GENESIS_HASH, DecisionLogError, DecisionRecord, chain_hash

Status = Literal["pass", "fail", "note"]
#: Names listed in one finding before "and N more".
_LISTED: Final = 8
#: Order in which findings are reported.
_TOPICS: Final = ("package", "decisions", "selection", "anchors", "policy", "engines")
_PREDICATE_TYPES: Final = {kind: predicate_type for predicate_type, kind in ATTESTATION_KINDS.items()}


@dataclass(frozen=True, slots=True)
class Finding:
    """One outcome: a check that passed or failed, or a note about something the package cannot show."""

    status: Status
    topic: str
    message: str

    def to_json(self) -> dict[str, str]:
        """``{"status", "topic", "message"}``."""
        return {"status": self.status, "topic": self.topic, "message": self.message}


@dataclass(frozen=True, slots=True)
class Anchor:
    """A chain head recorded independently of the package (``SEQ:HASH``), e.g. from ``audit verify``."""

    seq: int
    hash: str

    @classmethod
    def parse(cls, text: str) -> Anchor:
        """``SEQ:HASH`` with a positive seq and a 64-hex hash; raises :class:`InputError` otherwise."""
        seq, _, digest = text.partition(":")
        if not seq.isdigit() or int(seq) < 1 or not is_sha256_hex(digest):
            raise InputError(
                f"anchor {text!r} is not SEQ:HASH",
                location="--anchor",
                hint="e.g. 1042:<64 hex>: head_seq and head_hash of `trtguard audit verify --format json`",
            )
        return cls(int(seq), digest)


@dataclass(frozen=True, slots=True)
class EvidenceReport:
    """The outcome of :func:`trtguard.audit.package.verify_evidence`."""

    archive: str
    key_id: str
    findings: tuple[Finding, ...]
    proves: tuple[str, ...]
    does_not_prove: tuple[str, ...]
    selection: str | None = None
    exported_at: str | None = None

    @property
    def ok(self) -> bool:
        """True when no check failed."""
        return not any(finding.status == "fail" for finding in self.findings)

    @property
    def failures(self) -> tuple[Finding, ...]:
        """The checks that failed."""
        return tuple(finding for finding in self.findings if finding.status == "fail")

    def to_json(self) -> dict[str, Any]:
        """The report as one JSON object."""
        return {
            "archive": self.archive,
            "ok": self.ok,
            "key_id": self.key_id,
            "selection": self.selection,
            "exported_at": self.exported_at,
            "findings": [finding.to_json() for finding in self.findings],
            "proves": list(self.proves),
            "does_not_prove": list(self.does_not_prove),
        }


@dataclass(frozen=True, slots=True)
class _Line:
    """One record of ``records.jsonl``."""

    seq: int
    prev_hash: str
    hash: str
    record: DecisionRecord


class PackageVerifier:
    """Runs every check over the members of one package (read with the archive limits already applied)."""

    def __init__(self, archive: str, members: Mapping[str, bytes], key: PublicKey) -> None:
        self._archive = archive
        self._members = members
        self._key = key
        self._findings: list[Finding] = []
        self._limits: list[str] = []

    def run(self, anchors: Sequence[Anchor]) -> EvidenceReport:
        """Check the package; never raises for a content problem (it becomes a failed finding)."""
        if INDEX not in self._members or SIGNATURE not in self._members:
            raise InputError(
                f"not a trtguard evidence package: {INDEX} or {SIGNATURE} is missing",
                location=self._archive,
                hint="give the file written by `trtguard evidence export`",
            )
        predicate, signed = self._seal()
        if predicate is None:
            return self._report(None, signed)
        lines = self._records(predicate)
        policy_set = self._policy(predicate, lines)
        audit_engines = self._engines(predicate, lines, policy_set)
        self._selection(predicate, lines, audit_engines)
        self._anchors(predicate, lines, anchors)
        self._known_limits(predicate, lines)
        return self._report(predicate, signed)

    # --- the seal: signature, index, files ------------------------------------------------------------

    def _seal(self) -> tuple[EvidencePredicate | None, bool]:
        signed = False
        try:
            envelope = Envelope.from_json(self._members[SIGNATURE], location=SIGNATURE)
        except (InputError, RecursionError) as error:
            self._fail("package", f"{SIGNATURE} is not a DSSE envelope: {_message(error)}")
            return None, signed
        try:
            verify_envelope(envelope, {"the given key": self._key})
            signed = True
            self._pass("package", f"the index is signed by the given key (key id {self._key.key_id[:16]}…)")
        except VerificationError as error:
            self._fail("package", f"the index signature does not verify with the given key: {error.message}")
        try:
            statement = statement_from_envelope(envelope, location=SIGNATURE)
        except (InputError, VerificationError, RecursionError) as error:
            self._fail("package", f"the signed statement is unreadable: {_message(error)}")
            return None, signed
        if statement.predicate_type != EVIDENCE_PREDICATE_TYPE:
            self._fail(
                "package", f"the signed statement is a {statement.predicate_type}, not an evidence package"
            )
            return None, signed
        if not self._files(statement):
            return None, signed
        try:
            return parse_predicate(statement.predicate), signed
        except InputError as error:
            self._fail("package", error.message)
            return None, signed

    def _files(self, statement: Statement) -> bool:
        subjects = {subject.name or "": subject.digest.get("sha256", "") for subject in statement.subject}
        if len(subjects) != len(statement.subject):
            self._fail("package", "the signed statement names a file twice")
        if sha256_bytes(self._members[INDEX]) != subjects.get(INDEX):
            self._fail("package", f"{INDEX} is not the index that was signed (it was changed or replaced)")
        try:
            index = parse_index(self._members[INDEX])
        except InputError as error:
            self._fail("package", f"{INDEX} is {error.message}")
            return False
        entries = {entry.path: entry for entry in index.files}
        if len(entries) != len(index.files):
            self._fail("package", f"{INDEX} lists a file twice")
        covered = {INDEX, *entries}
        unsigned = sorted(covered - set(subjects))
        unlisted = sorted(set(subjects) - covered)
        differ = sorted(p for p, e in entries.items() if p in subjects and subjects[p] != e.sha256)
        if unsigned or unlisted or differ:
            self._fail(
                "package",
                f"{INDEX} and the signed statement disagree: {_names(unsigned + unlisted + differ)}",
            )
        missing = sorted(path for path in entries if path not in self._members)
        changed = sorted(
            path
            for path, entry in entries.items()
            if path in self._members
            and (len(self._members[path]) != entry.size or sha256_bytes(self._members[path]) != entry.sha256)
        )
        extra = sorted(set(self._members) - covered - {SIGNATURE})
        for problem, paths in (
            ("missing from the archive", missing),
            ("changed (SHA-256 or size differ from the index)", changed),
            ("in the archive but not in the index", extra),
        ):
            if paths:
                self._fail("package", f"files {problem}: {_names(paths)}")
        if not (missing or changed or extra):
            self._pass(
                "package",
                f"all {len(entries)} files match the SHA-256 and size in the index; none missing, none extra",
            )
        return True

    # --- decisions and their chain -------------------------------------------------------------------

    def _records(self, predicate: EvidencePredicate) -> list[_Line]:
        log = predicate.log
        data = self._members.get(log.file)
        if data is None:
            self._fail("decisions", f"the decisions file {log.file} is not in the package")
            return []
        failures = len(self._failures("decisions"))
        lines: list[_Line] = []
        for number, raw in enumerate(data.splitlines(), start=1):
            line = self._line(raw, f"{log.file}:{number}")
            if line is None:
                continue
            if lines and line.seq <= lines[-1].seq:
                self._fail("decisions", f"{log.file}:{number}: seq {line.seq} is out of order or repeated")
                continue
            lines.append(line)
        if not lines:
            self._fail("decisions", f"{log.file} holds no decision record")
            return lines
        gaps: list[tuple[int, int]] = []
        for before, after in itertools.pairwise(lines):
            if after.seq != before.seq + 1:
                gaps.append((before.seq, after.seq))
            elif after.prev_hash != before.hash:
                self._fail("decisions", f"record seq {after.seq} does not link to seq {before.seq}")
        head = log.report
        if not head.ok:
            self._fail("decisions", "the exporter's own check of the decision log failed")
        if log.chain is not ChainScope.SELECTED:
            if gaps:
                listed = ", ".join(f"{a + 1}..{b - 1}" for a, b in gaps[:_LISTED])
                self._fail("decisions", f"records are missing from the {log.chain} chain: seq {listed}")
            if (lines[-1].seq, lines[-1].hash) != (head.head_seq, head.head_hash):
                self._fail("decisions", f"the chain ends at seq {lines[-1].seq}, not at the exported head")
        elif lines[-1].seq > head.head_seq:
            self._fail("decisions", f"record seq {lines[-1].seq} lies beyond the exported head")
        if log.chain is ChainScope.FULL and (lines[0].seq, lines[0].prev_hash) != (1, GENESIS_HASH):
            self._fail("decisions", "the full chain does not start at the genesis record (seq 1)")
        if (lines[0].seq, lines[-1].seq, len(lines)) != (log.first_seq, log.last_seq, log.records):
            self._fail("decisions", f"{log.file} does not hold the seq range and count the package states")
        present = {line.seq for line in lines}
        absent = [seq for seq in predicate.selection.records if seq not in present]
        if absent:
            self._fail("decisions", f"selected decisions not in {log.file}: seq {_names(map(str, absent))}")
        if len(set(predicate.selection.records)) != len(predicate.selection.records):
            self._fail("decisions", "the selection lists a decision twice")
        if len(self._failures("decisions")) == failures:
            self._pass("decisions", self._chain_statement(predicate, lines, gaps))
        return lines

    def _line(self, raw: bytes, where: str) -> _Line | None:
        try:
            data = json.loads(raw)
            seq, prev_hash, digest, body = data["seq"], data["prev_hash"], data["hash"], data["record"]
            if not (
                isinstance(seq, int)
                and not isinstance(seq, bool)
                and isinstance(prev_hash, str)
                and isinstance(digest, str)
                and isinstance(body, dict)
            ):
                raise TypeError("a field has the wrong type")
            recomputed = chain_hash(prev_hash, body)
            record = DecisionRecord.from_json(body)
        except (ValueError, KeyError, TypeError, RecursionError) as error:
            self._fail("decisions", f"{where}: not a decision record line ({type(error).__name__}: {error})")
            return None
        except DecisionLogError as error:
            self._fail("decisions", f"{where}: {error.message}")
            return None
        if recomputed != digest:
            # Kept in the chain under its stated hash, so that this one change is not also reported as a gap.
            self._fail(
                "decisions", f"record seq {seq} does not recompute to its hash: its content was changed"
            )
        return _Line(seq, prev_hash, digest, record)

    def _chain_statement(self, predicate: EvidencePredicate, lines: list[_Line], gaps: list[Any]) -> str:
        count, first, last = len(lines), lines[0].seq, lines[-1].seq
        selected = len(predicate.selection.records)
        if predicate.log.chain is ChainScope.SELECTED:
            return (
                f"each of the {count} selected records recomputes to its stored hash; "
                f"{count - 1 - len(gaps)} links between adjacent records hold, {len(gaps)} gaps are not shown"
            )
        start = "the genesis record" if predicate.log.chain is ChainScope.FULL else f"seq {first}"
        return (
            f"the {count} records from {start} to the exported head (seq {last}) recompute and link without "
            f"a gap; the {selected} selected decisions are among them"
        )

    def _selection(
        self, predicate: EvidencePredicate, lines: list[_Line], audit_engines: frozenset[str]
    ) -> None:
        if not lines:
            return
        selection = Selection(predicate.selection.by, predicate.selection.value)
        chosen = set(predicate.selection.records)
        wrong = [
            line.seq
            for line in lines
            if line.seq in chosen and not selection.matches(line.record, audit_engines)
        ]
        missed = [
            line.seq
            for line in lines
            if line.seq not in chosen and selection.matches(line.record, audit_engines)
        ]
        if wrong:
            self._fail(
                "selection",
                f"decisions listed as selected do not match the rule: seq {_names(map(str, wrong))}",
            )
        if missed:
            self._fail(
                "selection", f"decisions that match the rule were left out: seq {_names(map(str, missed))}"
            )
        if wrong or missed:
            return
        if predicate.log.chain is ChainScope.SELECTED:
            self._note("selection", "completeness cannot be checked: only the selected records are included")
            return
        self._pass(
            "selection",
            f"complete: of the {len(lines)} records seq {lines[0].seq}..{lines[-1].seq}, exactly the "
            f"{len(chosen)} selected match the rule: {selection.rule()}",
        )

    def _anchors(self, predicate: EvidencePredicate, lines: list[_Line], anchors: Sequence[Anchor]) -> None:
        by_seq = {line.seq: line for line in lines}
        head = predicate.log.report.head_seq
        for anchor in anchors:
            line = by_seq.get(anchor.seq)
            if line is not None and line.hash == anchor.hash:
                self._pass(
                    "anchors", f"anchor seq {anchor.seq} matches: the log agreed with your record there"
                )
            elif line is not None:
                self._fail(
                    "anchors",
                    f"anchor seq {anchor.seq}: the package's record hashes to {line.hash[:16]}…, your anchor "
                    f"says {anchor.hash[:16]}…: the log was rewritten, or the anchor comes from another log",
                )
            elif anchor.seq > head:
                self._fail(
                    "anchors",
                    f"anchor seq {anchor.seq} lies beyond the log head at export (seq {head}, "
                    f"{predicate.exported_at.isoformat()}): if it was taken before the export, records were "
                    "removed from the end of the log",
                )
            else:
                self._fail(
                    "anchors",
                    f"anchor seq {anchor.seq} cannot be checked: the package does not carry that record "
                    "(export with --chain full to check anchors anywhere in the log)",
                )

    # --- policies ------------------------------------------------------------------------------------

    def _policy(self, predicate: EvidencePredicate, lines: list[_Line]) -> PolicySet | None:
        info = predicate.policy
        try:
            policy_set = load_snapshot(self._members, info.files, info.key_files)
        except VerificationError as error:
            self._fail("policy", str(error))
            return None
        except TrtguardError as error:
            self._fail("policy", f"the included policies do not load: {error.diagnostics()}")
            return None
        if policy_set.revision != info.revision:
            self._fail(
                "policy",
                f"the included policy files recompute to revision {policy_set.revision}, not {info.revision}",
            )
            return policy_set
        self._pass(
            "policy",
            f"revision {info.revision} recomputes from the {len(info.files)} included policy files and "
            f"{len(info.key_files)} key files",
        )
        chosen = set(predicate.selection.records)
        counts = Counter(line.record.policy_revision for line in lines if line.seq in chosen)
        stated = {entry.revision: entry.decisions for entry in info.decision_revisions}
        if lines and stated != dict(counts):
            self._fail("policy", "the package misstates which policy revisions the selected decisions name")
        in_force = set(counts) == {info.revision}
        if info.in_force and not in_force:
            self._fail(
                "policy",
                "the package claims its policies were in force for every decision, but they were not",
            )
        elif in_force:
            self._pass(
                "policy",
                f"the included policy set is the one all {counts.total()} selected decisions were made under",
            )
        elif lines:
            others = ", ".join(
                f"{revision or 'none'} ({count} decision{'s' if count != 1 else ''})"
                for revision, count in counts.most_common()
                if revision != info.revision
            )
            self._note("policy", f"the included policies are not the ones these decisions name: {others}")
            self._limits.append(
                f"The policies in force for the decisions naming other revisions ({others}): their files are "
                "not in the package; the included policy set is the one current at export."
            )
        return policy_set

    # --- engines ---------------------------------------------------------------------------------------

    def _engines(
        self, predicate: EvidencePredicate, lines: list[_Line], policy_set: PolicySet | None
    ) -> frozenset[str]:
        """Check every engine's evidence; returns the engines whose build manifest carries the audit ID."""
        chosen = set(predicate.selection.records)
        named: dict[str, list[int]] = {}
        for line in lines:
            if line.seq in chosen:
                for digest in engine_digests(line.record):
                    named.setdefault(digest, []).append(line.seq)
        entries: dict[str, EngineInfo] = {}
        for entry in predicate.engines:
            if entry.digest in entries:
                self._fail("engines", f"engine {entry.digest} is listed twice")
            entries[entry.digest] = entry
        for digest, seqs in sorted(named.items()):
            if digest not in entries:
                self._fail(
                    "engines",
                    f"engine {digest}, named by decisions seq {_names(map(str, seqs))}, is not in the package"
                    " (an incomplete export)",
                )
        keys = _keys(policy_set)
        audit_engines: set[str] = set()
        for entry in entries.values():
            if self._engine(entry, keys, policy_set, predicate.selection.value):
                audit_engines.add(entry.digest)
        return frozenset(audit_engines)

    def _engine(
        self,
        entry: EngineInfo,
        keys: Mapping[str, PublicKey],
        policy_set: PolicySet | None,
        audit_id: str,
    ) -> bool:
        """Check one engine's files; True when one of its build manifests carries ``audit_id``."""
        topic = "engines"
        name = f"engine {entry.digest[:19]}…"
        if entry.digest not in entry.subjects:
            self._fail(topic, f"{name}: its own digest is not among its subject digests")
        for problem in entry.problems:
            self._note(topic, f"{name}: {problem}")
            self._limits.append(f"Evidence for engine {entry.digest}: {problem}.")
        kinds = Counter(attestation.kind for attestation in entry.attestations)
        if not kinds["build-manifest"]:
            self._note(topic, f"{name}: the package has no build manifest for it")
            self._limits.append(
                f"How engine {entry.digest} was built: no build manifest was found at export."
            )
        carries = False
        openpgp = openpgp_keys(policy_set)
        for attestation in entry.attestations:
            carries = self._attestation(name, entry, attestation, keys, openpgp) == audit_id or carries
        for signature in entry.signatures:
            self._signature(name, entry, signature, keys, policy_set)
        return carries

    def _attestation(
        self,
        name: str,
        entry: EngineInfo,
        attestation: AttestationFile,
        keys: Mapping[str, PublicKey],
        openpgp: Mapping[str, OpenPGPKey],
    ) -> str | None:
        """Check one attestation file; returns a build manifest's audit ID."""
        path, kind = attestation.path, attestation.kind
        data = self._members.get(path)
        if data is None:
            self._fail("engines", f"{name}: {path} is not in the package")
            return None
        try:
            envelope = Envelope.from_json(data, location=path)
            statement = statement_from_envelope(envelope, location=path)
        except (InputError, VerificationError, RecursionError) as error:
            self._fail("engines", f"{name}: {path} is not a DSSE in-toto attestation: {_message(error)}")
            return None
        if statement.predicate_type != _PREDICATE_TYPES[kind]:
            self._fail("engines", f"{name}: {path} is filed as a {kind} but is a {statement.predicate_type}")
            return None
        if not statement.subject_digests() & set(entry.subjects):
            about = ", ".join(sorted(statement.subject_digests())) or "no sha256 digest"
            self._fail("engines", f"{name}: {path} is about {about}, not this engine")
            return None
        detail, audit_id = _describe(kind, statement, path)
        if detail is None:
            self._fail("engines", f"{name}: {path} does not hold a valid {kind} predicate")
            return None
        if not keys and not openpgp:
            self._fail(
                "engines", f"{name}: {path} cannot be checked: the included policies give no public key"
            )
            return audit_id
        signers = statement_signers(envelope, attestation, self._members, keys, openpgp)
        if not signers:
            self._fail("engines", f"{name}: {kind} {path} is not signed by a key of the included TrustedKeys")
            return audit_id
        self._pass("engines", f"{name}: {kind} ({detail}) signed by {', '.join(signers)}")
        return audit_id

    def _signature(
        self,
        name: str,
        entry: EngineInfo,
        signature: SignatureFile,
        keys: Mapping[str, PublicKey],
        policy_set: PolicySet | None,
    ) -> None:
        path = signature.path
        data = self._members.get(path)
        if data is None:
            self._fail("engines", f"{name}: {path} is not in the package")
            return
        try:
            classic, bundles, envelopes = _signature_material(signature, data)
            notation = notation_material(signature, data)
        except (InputError, ValueError, KeyError, TypeError, binascii.Error, RecursionError) as error:
            self._fail("engines", f"{name}: {path} is not a {signature.kind} signature: {_message(error)}")
            return
        repository = _repository(entry.references)
        problems = []
        for policy in _trust_policies(keys, policy_set):
            try:
                result = verify_image_signatures(
                    entry.digest,
                    policy,
                    classic=classic,
                    bundles=bundles,
                    envelopes=envelopes,
                    notation=notation,
                    repository=repository,
                    location=path,
                )
            except (VerificationError, InputError) as error:
                problems.append(error.message)
                continue
            self._pass("engines", f"{name}: signature {path} verifies ({result.summary()})")
            return
        why = problems[0] if problems else "the included policies give no key or keyless identity"
        self._fail("engines", f"{name}: signature {path} does not verify with the included trust: {why}")

    # --- what is not shown ---------------------------------------------------------------------------

    def _known_limits(self, predicate: EvidencePredicate, lines: list[_Line]) -> None:
        log = predicate.log
        report = log.report
        self._limits.insert(
            0,
            "Records removed from the end of the log before the export, or a log rewritten as a whole: a "
            "hash chain shows neither by itself. The log head at export was seq "
            f"{report.head_seq}, hash {report.head_hash}; compare it with a head recorded earlier (`trtguard "
            "audit verify --format json`) or pass one as --anchor SEQ:HASH.",
        )
        if log.chain is ChainScope.SEGMENT and lines:
            self._limits.append(
                f"Anything about the records before seq {lines[0].seq}: the package starts at the first "
                "selected decision (export with --chain full for the whole log)."
            )
        if log.chain is ChainScope.SELECTED:
            self._limits.append(
                "That the selected decisions are all there are, or that the records between them are intact: "
                "only the selected records are included; for the rest there is only the exporter's signed "
                f"statement that all {report.records} records of the log verified up to seq "
                f"{report.head_seq}."
            )
        if predicate.selection.by == "audit_id":
            self._limits.append(
                f"That no engine outside the package carries audit ID {predicate.selection.value!r}: the "
                "exporter searched the build manifests its evidence source returned for the log's engines."
            )
        if predicate.evidence_source == NO_SOURCE:
            self._limits.append(
                "Anything about how the engines were built, approved or verified: the export was given no "
                "evidence source, so the package holds no attestations or signatures."
            )
        else:
            self._limits += [
                f"That {predicate.evidence_source} held no other attestations or signatures for these "
                "engines than the package includes.",
                "That an engine artifact's digest and the engine file digest its attestations name belong "
                "together: the artifact's OCI manifest is not included (subject digests as the source "
                "reported).",
            ]
        self._limits += [
            "That the keys in the included TrustedKeys documents are the ones your organisation trusts.",
            "That the webhook judged rightly: the package shows what was decided and under which policies; "
            "it does not evaluate them again.",
        ]
        self._limits += [f"Noted at export: {problem}" for problem in predicate.problems]

    # --- bookkeeping -----------------------------------------------------------------------------------

    def _report(self, predicate: EvidencePredicate | None, signed: bool) -> EvidenceReport:
        proves: list[str] = []
        if predicate is not None and signed and not self._failures("package"):
            proves.append(
                f"The package is exactly as the holder of key {self._key.key_id[:16]}… exported it at "
                f"{predicate.exported_at.isoformat()} from {predicate.log.description}."
            )
            passed = sorted(self._passed(), key=lambda finding: _TOPICS.index(finding.topic))
            proves += [finding.message[0].upper() + finding.message[1:] + "." for finding in passed]
        else:
            self._limits.insert(0, "Anything: the package's signature, index or files did not verify.")
        return EvidenceReport(
            archive=self._archive,
            key_id=self._key.key_id,
            findings=tuple(sorted(self._findings, key=lambda finding: _TOPICS.index(finding.topic))),
            proves=tuple(proves),
            does_not_prove=tuple(self._limits),
            selection=predicate.selection.rule if predicate is not None else None,
            exported_at=predicate.exported_at.isoformat() if predicate is not None else None,
        )

    def _passed(self) -> list[Finding]:
        failed = {finding.topic for finding in self._findings if finding.status == "fail"}
        return [
            f for f in self._findings if f.status == "pass" and f.topic != "package" and f.topic not in failed
        ]

    def _failures(self, topic: str) -> list[Finding]:
        return [f for f in self._findings if f.status == "fail" and f.topic == topic]

    def _pass(self, topic: str, message: str) -> None:
        self._findings.append(Finding("pass", topic, message))

    def _fail(self, topic: str, message: str) -> None:
        self._findings.append(Finding("fail", topic, message))

    def _note(self, topic: str, message: str) -> None:
        self._findings.append(Finding("note", topic, message))


def _describe(kind: str, statement: Statement, path: str) -> tuple[str | None, str | None]:
    """A few words about a valid predicate, and a build manifest's audit ID; ``(None, None)`` when invalid."""
    try:
        if kind == "build-manifest":
            manifest = load_manifest(statement, path)
            words = f"audit ID {manifest.audit_id}, TensorRT {manifest.toolchain.tensorrt_version}"
            return words, manifest.audit_id
        if kind == "change-approval":
            approval = load_approval(statement, path)
            changes = ", ".join(approval.changes)
            return f"by {approval.approver} for audit ID {approval.audit_id}: {changes}", None
        verification = load_verification(statement, path)
        return f"GPU check {verification.result} on {verification.gpu.gpu_name}", None
    except InputError:
        return None, None


def _signature_material(
    signature: SignatureFile, data: bytes
) -> tuple[list[CosignSignature], list[bytes], list[Envelope]]:
    if signature.kind == "sigstore-bundle":
        return [], [data], []
    if signature.kind == "cosign-sign-dsse":
        return [], [], [Envelope.from_json(data, location=signature.path)]
    if signature.kind in ("notation-jws", "notation-cose"):
        return [], [], []  # notation_material
    document = json.loads(data)
    optional = {name: document.get(name) for name in ("certificate", "chain", "rekor_bundle")}
    if not all(value is None or isinstance(value, str) for value in optional.values()):
        raise TypeError("certificate, chain and rekor_bundle must be strings")
    classic = CosignSignature(
        payload=base64.b64decode(document["payload"], validate=True),
        signature=str(document["signature"]),
        media_type=str(document["media_type"]),
        **optional,
    )
    return [classic], [], []


def _trust_policies(keys: Mapping[str, PublicKey], policy_set: PolicySet | None) -> list[TrustPolicy]:
    """One policy for every key together, and one per keyless signer (each with its own trusted root)."""
    policies = [TrustPolicy(keys=dict(keys))] if keys else []
    for signer in policy_set.signers.values() if policy_set is not None else ():
        if signer.identity is not None and signer.trust_root is not None:
            rekor = (signer.rekor_key,) if signer.rekor_key is not None else ()
            policies.append(
                TrustPolicy(identities=(signer.identity,), trust_root=signer.trust_root, rekor_keys=rekor)
            )
    return policies + notation_policies(policy_set)


def _keys(policy_set: PolicySet | None) -> dict[str, PublicKey]:
    if policy_set is None:
        return {}
    return {ref: s.public_key for ref, s in policy_set.signers.items() if s.public_key is not None}


def _repository(references: Sequence[str]) -> str | None:
    for reference in references:
        try:
            return ImageReference.parse(reference).name
        except InputError:
            continue
    return None


def _names(items: Any) -> str:
    names = list(items)
    shown = ", ".join(names[:_LISTED])
    return shown + (f" and {len(names) - _LISTED} more" if len(names) > _LISTED else "")


def _message(error: BaseException) -> str:
    return error.message if isinstance(error, TrtguardError) else f"{type(error).__name__}: {error}"

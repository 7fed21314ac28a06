"""One statement, found in one or more places, verified against who may sign it: :func:`verify_statement`.

Each registered format (:data:`~verifier.verification._table.FORMATS`, read there on every call: the
table is the one place a format is registered, so nothing here keeps a copy of it) checks its own
signatures on every copy; the threshold is counted here, once, over the distinct keys that signed in any
format and any copy (a key listed under two names, in two encodings, or by a fingerprint in another case
counts once); the statement is then read and bound to its subject. A refusal is one typed error,
:class:`StatementRefused`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from verifier.base import InputError, VerificationError, sha256_bytes
from verifier.crypto import Statement, statement_from_envelope
from verifier.verification import _table
from verifier.verification._contract import SignedBy, StatementFormat

if TYPE_CHECKING:
    from verifier.crypto import PublicKey
    from verifier.evidence import Attestation


class StatementRefused(VerificationError):
    """A statement that does not count: no trusted signature, too few distinct keys, or about another subject.

    A definitive answer about the evidence (cached like a bad signature)."""


class UnreadableEvidence(StatementRefused):
    """A statement signed by enough trusted keys whose content cannot be read (not a statement, not a
    document of its type): it cannot tell what it says, nor, for the newest-wins rules, whether it is the
    newest, so a caller treats it as "cannot tell" rather than as absent."""


@dataclass(frozen=True, slots=True)
class StatementTrust:
    """Who may sign a statement: each format's trusted material by signer name, and how many distinct keys.

    Build it with :meth:`of` from a policy's signers (each format takes the material it signs with), or
    :meth:`with_keys` for public keys alone. :class:`InputError` when the threshold cannot be met.
    """

    material: Mapping[str, Mapping[str, Any]]  # format label → signer name → that format's material
    names: tuple[str, ...]  # every signer asked for, for messages
    threshold: int = 1
    #: The time signatures are judged at (the evaluation clock, ``--now``); None: the real clock.
    now: datetime | None = None

    def __post_init__(self) -> None:
        distinct = {
            fmt.identity(m) for fmt in _table.FORMATS for m in self.material.get(fmt.label, {}).values()
        }
        if self.threshold < 1 or self.threshold > max(len(distinct), 1):
            raise InputError(
                f"threshold {self.threshold} cannot be met by {len(distinct)} distinct key(s)"
                f" [{', '.join(self.names)}]",
                hint="the threshold must be between 1 and the number of distinct trusted keys",
            )

    @classmethod
    def of(
        cls,
        signers: Mapping[str, Any],
        threshold: int = 1,
        *,
        formats: Sequence[str] | None = None,
        now: datetime | None = None,
    ) -> StatementTrust:
        """The trust of ``signers`` (name → a policy's signer) in every registered format (or ``formats``),
        judged at ``now``."""
        material: dict[str, dict[str, Any]] = {}
        for fmt in _formats(formats):
            found = {name: m for name, s in signers.items() if (m := fmt.material(s)) is not None}
            if found:
                material[fmt.label] = found
        return cls(material, tuple(signers), threshold, now)

    @classmethod
    def with_keys(cls, keys: Mapping[str, PublicKey], threshold: int = 1) -> StatementTrust:
        """Public keys alone (DSSE), as ``verify-engine --key`` gives them."""
        return cls({"DSSE": dict(keys)}, tuple(keys), threshold)

    @property
    def empty(self) -> bool:
        """True when no signer signs in any format asked for."""
        return not any(self.material.values())


@dataclass(frozen=True, slots=True)
class VerifiedStatement:
    """A statement whose signatures met its trust: the statement, who signed it, and until when that holds."""

    statement: Statement
    #: Names of the trusted signers whose signature verified, in the order of the formats and the copies.
    signers: tuple[str, ...]
    #: How many distinct keys signed (what the threshold was compared with).
    distinct_keys: int
    #: Where the first copy was found.
    origin: str
    #: ``sha256:`` of the statement's bytes (the DSSE payload): how the decision log names it.
    digest: str
    #: When a counted signature stops verifying (None: none does on its own).
    valid_until: datetime | None
    payload: bytes


def _formats(labels: Sequence[str] | None) -> tuple[StatementFormat, ...]:
    formats = _table.FORMATS
    return formats if labels is None else tuple(f for f in formats if f.label in labels)


def statement_digest(payload: bytes) -> str:
    """How the decision log names a statement: ``sha256:`` of its bytes (the envelope's payload), which stays
    the same when the envelope is re-serialised (:func:`verifier.manifest.manifest_digest`)."""
    return f"sha256:{sha256_bytes(payload)}"


def signers_of(copies: Sequence[Attestation], trust: StatementTrust) -> tuple[SignedBy, ...]:
    """Every trusted signer whose signature over the statement ``copies`` carry verifies, in any registered
    format and any copy (a key may appear more than once: count :attr:`SignedBy.identity`).

    Raises :class:`StatementRefused` when none does (the first signature problem, or that the statement
    carries no signature of a format its signers sign in); :class:`InputError` when the copies are not of
    one statement."""
    if not copies:
        raise StatementRefused("no copy of the statement was found")
    payload = copies[0].envelope.payload
    if any(copy.envelope.payload != payload for copy in copies):
        raise InputError("the copies given are not of one statement (their bytes differ)")
    signed: list[SignedBy] = []
    reasons: list[str] = []
    formats = _table.FORMATS
    for copy in copies:
        for fmt in formats:
            trusted = trust.material.get(fmt.label)
            if not trusted or not fmt.carries(copy):
                continue
            verified, problems = fmt.check(copy, trusted, trust.now)
            reasons += problems
            # Counted by the key, as the format identifies it: never by the signer's name.
            for entry in verified:
                identity = entry[2] if len(entry) == 3 else fmt.identity(trusted[entry[0]])
                signed.append(SignedBy(entry[0], identity, entry[1]))
    if not signed:
        labels = [f.label for f in formats if trust.material.get(f.label)]
        raise StatementRefused(
            reasons[0]
            if reasons
            else f"it carries no {' or '.join(labels)} signature, which [{', '.join(trust.names)}] sign in"
        )
    return tuple(signed)


def verify_statement(
    copies: Sequence[Attestation], trust: StatementTrust, *, subject: str | None = None
) -> VerifiedStatement:
    """Verify one statement found as ``copies`` (the same bytes in each) against ``trust``.

    Every registered format checks its signatures on every copy; the threshold counts distinct keys across
    all of them. With ``subject`` (``sha256:<hex>``) the statement must name it among its subjects. Raises
    :class:`StatementRefused` saying why (the first signature problem when nothing verified).
    """
    signed = signers_of(copies, trust)
    names = tuple(dict.fromkeys(s.name for s in signed))
    keys = {s.identity for s in signed}
    if len(keys) < trust.threshold:
        raise StatementRefused(
            f"signed by {len(keys)} of the {trust.threshold} required distinct keys ([{', '.join(names)}])"
        )
    payload = copies[0].envelope.payload
    try:
        statement = statement_from_envelope(copies[0].envelope, location=copies[0].origin)
    except (InputError, VerificationError) as error:  # signed, but not a statement
        raise UnreadableEvidence(error.message, location=copies[0].origin) from error
    if subject is not None and subject not in statement.subject_digests():
        raise StatementRefused(
            f"the statement is not about {subject}",
            hint="re-create the statement for the artifact it describes",
        )
    ends = [s.valid_until for s in signed if s.valid_until is not None]
    return VerifiedStatement(
        statement=statement,
        signers=names,
        distinct_keys=len(keys),
        origin=copies[0].origin,
        digest=statement_digest(payload),
        valid_until=min(ends, default=None),
        payload=payload,
    )

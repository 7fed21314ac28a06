"""What a statement signature format is: its trust material and its signed-content check.

A format checks only its own signed content — whether the trusted material it is given signed the
statement's exact bytes — and says which signers did; the room counts them by their material's identity
(:class:`SignedBy`), never by the name a policy gives them. Everything else (copies of one statement, the
threshold counted once across formats and copies, subject binding, the typed refusal) is
:func:`~verifier.verification.verify_statement`'s. A format imports nothing from this room: it is typed
structurally (:class:`StatementFormat`), so a format in its own folder plugs in without an import cycle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from verifier.evidence import Attestation


@dataclass(frozen=True, slots=True)
class SignedBy:
    """One trusted signer whose signature over a statement verified.

    ``identity`` is what a threshold counts, the format's :meth:`StatementFormat.identity` of the signer's
    material: the key itself, so one key under two names, or in two encodings, counts once. ``valid_until``
    is when this signature stops verifying on its own (a signature's expiry; None: it does not).
    """

    name: str
    identity: str
    valid_until: datetime | None = None


#: One trusted signer that signed a copy: its name, when that signature stops verifying (or None), and,
#: where the format knows it, the identity of the key that signed (a certificate's leaf key: one key
#: certified by two trusted CAs is one signer); without it the signer's material's identity counts.
Signed = tuple[str, datetime | None] | tuple[str, datetime | None, str]

#: What a format's check found on one copy: each trusted signer that signed it, and why the others did not
#: verify, as text. Plain tuples: a format imports nothing from this room.
Checked = tuple[Sequence[Signed], Sequence[str]]


class StatementFormat(Protocol):
    """A statement signature format: its trust material, and its signed-content check."""

    @property
    def label(self) -> str:
        """How messages name it (``DSSE``, ``OpenPGP``)."""
        ...

    def material(self, signer: Any) -> object | None:
        """The trust material of this format a policy's signer carries (None: the signer signs otherwise)."""
        ...

    def identity(self, material: Any) -> str:
        """What a threshold counts for this material: the key itself, never the name a policy gives it."""
        ...

    def carries(self, copy: Attestation) -> bool:
        """Whether ``copy`` holds a signature of this format at all."""
        ...

    def check(self, copy: Attestation, trusted: Mapping[str, Any], now: datetime | None) -> Checked:
        """Which of ``trusted`` (name → this format's material) signed the exact bytes of ``copy``, judged at
        ``now`` (the evaluation clock; None: the real clock) where the format's signatures expire; never
        raises for a bad signature (it is a problem of the result)."""
        ...

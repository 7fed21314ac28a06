"""What a statement signature format is: its trust material and its signed-content check.

A format checks only its own signed content — whether the trusted material it is given signed the
statement's exact bytes — and says which signer that is (:class:`SignedBy`, counted by its key's identity,
never by the name a policy gives it). Everything else (copies of one statement, the threshold counted once
across formats and copies, subject binding, the typed refusal) is
:func:`~verifier.verification.verify_statement`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from verifier.evidence import Attestation


@dataclass(frozen=True, slots=True)
class SignedBy:
    """One trusted signer whose signature over a statement verified.

    ``identity`` is what a threshold counts: the key itself (``key:<DER SHA-256>``, ``openpgp:<FINGERPRINT>``,
    upper-case), so one key under two names, or in two encodings, counts once. ``valid_until`` is when this
    signature stops verifying on its own (a signature's expiry; None: it does not).
    """

    name: str
    identity: str
    valid_until: datetime | None = None


@dataclass(frozen=True, slots=True)
class Checked:
    """What one format found on one copy of a statement: the signers that verified, and why others did not."""

    signers: tuple[SignedBy, ...] = ()
    problems: tuple[str, ...] = ()


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

    def check(self, copy: Attestation, trusted: Mapping[str, Any]) -> Checked:
        """Which of ``trusted`` (name → this format's material) signed the exact bytes of ``copy``."""
        ...

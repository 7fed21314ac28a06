"""Who is trusted to sign: named keys, keyless identity rules, the threshold and the transparency logs."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from cryptography import x509

from verifier.base import InputError, VerificationError
from verifier.crypto import PublicKey
from verifier.signatures._certificate import certificate_identity
from verifier.signatures._rekor import RekorLog
from verifier.signatures._trust import TrustRoot
from verifier.signatures.notation import NotationTrust
from verifier.signatures.notation.config import NotationPolicy


def _compile(pattern: str, what: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as error:
        raise InputError(f"{what} {pattern!r} is not a valid regular expression: {error}") from error


@dataclass(frozen=True, slots=True)
class KeylessIdentity:
    """A keyless signer the policy trusts: the OIDC issuer and the certificate subject.

    Give exactly one of ``issuer`` / ``issuer_regex`` and one of ``subject`` / ``subject_regex``. Exact values
    compare as strings; regular expressions must match the whole value (``re.fullmatch``; cosign's Go
    regexps match anywhere unless anchored, which is an easy way to trust too much). The subject is compared
    with every e-mail, URI and Sigstore username SAN of the certificate.
    """

    issuer: str | None = None
    subject: str | None = None
    issuer_regex: str | None = None
    subject_regex: str | None = None
    _issuer_re: re.Pattern[str] | None = field(init=False, repr=False, compare=False, default=None)
    _subject_re: re.Pattern[str] | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        if (self.issuer is None) == (self.issuer_regex is None):
            raise InputError(
                "a keyless identity needs exactly one of issuer and issuer_regex",
                hint="name the OIDC issuer, e.g. https://token.actions.githubusercontent.com",
            )
        if (self.subject is None) == (self.subject_regex is None):
            raise InputError(
                "a keyless identity needs exactly one of subject and subject_regex",
                hint="name the certificate subject: an e-mail address or a workflow URI",
            )
        if self.issuer_regex is not None:
            object.__setattr__(self, "_issuer_re", _compile(self.issuer_regex, "issuer_regex"))
        if self.subject_regex is not None:
            object.__setattr__(self, "_subject_re", _compile(self.subject_regex, "subject_regex"))

    def _issuer_matches(self, issuer: str | None) -> bool:
        if issuer is None:
            return False
        if self._issuer_re is not None:
            return self._issuer_re.fullmatch(issuer) is not None
        return issuer == self.issuer

    def _subject_matches(self, subject: str) -> bool:
        if self._subject_re is not None:
            return self._subject_re.fullmatch(subject) is not None
        return subject == self.subject

    def match(self, certificate: x509.Certificate) -> str | None:
        """The matching ``subject (issuer)`` of ``certificate``, or None when this rule does not admit it."""
        issuer, subjects = certificate_identity(certificate)
        if not self._issuer_matches(issuer):
            return None
        for subject in subjects:
            if self._subject_matches(subject):
                return f"{subject} ({issuer})"
        return None

    def __str__(self) -> str:
        subject = self.subject if self.subject is not None else f"/{self.subject_regex}/"
        issuer = self.issuer if self.issuer is not None else f"/{self.issuer_regex}/"
        return f"{subject} ({issuer})"


@dataclass(frozen=True, slots=True)
class SignerMatch:
    """One trusted signer found on one signature."""

    kind: Literal["key", "identity", "notation"]
    label: str  # key name, "subject (issuer)", or "signer (certificate subject)" for Notation
    signer_id: str  # what the threshold counts: the key id, or the identity itself


def _describe(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


@dataclass(frozen=True, slots=True)
class TrustPolicy:
    """What a signature must satisfy: signed by ``threshold`` distinct trusted signers.

    Signers are the named ``keys`` (counted by distinct key, not by name or signature) and certificates
    admitted by ``identities`` (keyless, verified against ``trust_root``; counted by distinct subject and
    issuer). With ``require_tlog`` every counted signature must carry a Rekor entry that verifies (promise,
    inclusion proof and checkpoint, as present and required) with a log of ``trust_root`` or one of
    ``rekor_keys``; keyless signatures always need one. ``notation`` are Notary Project signers by name
    (trust stores, trusted identities, registry scopes, level), counted by distinct certificate subject under
    its trusted anchor.
    """

    keys: Mapping[str, PublicKey] = field(default_factory=dict)
    identities: tuple[KeylessIdentity, ...] = ()
    threshold: int = 1
    trust_root: TrustRoot | None = None
    rekor_keys: tuple[PublicKey, ...] = ()
    require_tlog: bool = False
    notation: Mapping[str, NotationTrust | NotationPolicy] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.keys and not self.identities and not self.notation:
            raise InputError(
                "a signature policy needs at least one trusted key, keyless identity or Notation signer"
            )
        if self.identities and self.trust_root is None:
            raise InputError(
                "keyless identities need a Sigstore trusted root",
                hint="configure the trusted_root.json of the Sigstore instance the signers use",
            )
        if self.require_tlog and not self.rekor_logs:
            raise InputError(
                "a transparency log is required but no Rekor key or trusted root is configured",
                hint="configure the Rekor public key (rekor.pub) or a trusted root",
            )
        distinct = len({key.key_id for key in self.keys.values()})
        if self.threshold < 1 or (not self.identities and not self.notation and self.threshold > distinct):
            raise InputError(
                f"threshold {self.threshold} cannot be met by {distinct} distinct key(s)"
                f" {_describe(list(self.keys))}",
                hint="the threshold must be between 1 and the number of distinct trusted keys",
            )

    @property
    def rekor_logs(self) -> tuple[RekorLog, ...]:
        """Logs whose SETs are accepted: the trusted root's and the bare Rekor keys."""
        logs = self.trust_root.rekor_logs if self.trust_root is not None else ()
        return logs + tuple(RekorLog.from_key(key) for key in self.rekor_keys)

    def describe(self) -> str:
        """``keys [a, b]``, ``identities [...]`` or both, for messages."""
        parts = []
        if self.keys:
            parts.append(f"keys {_describe(list(self.keys))}")
        if self.identities:
            parts.append(f"identities {_describe([str(i) for i in self.identities])}")
        if self.notation:
            parts.append(f"Notation signers {_describe(list(self.notation))}")
        return " or ".join(parts)

    def key_matches(self, verify: dict[str, bool]) -> list[SignerMatch]:
        """Signer matches for the key names whose verification succeeded (``verify`` maps name → result)."""
        return [
            SignerMatch(kind="key", label=name, signer_id=f"key:{self.keys[name].key_id}")
            for name, ok in verify.items()
            if ok
        ]

    def trusted_identity(self, certificate: x509.Certificate) -> SignerMatch:
        """The first identity rule that admits the keyless signing ``certificate``.

        Raises :class:`VerificationError` naming the certificate's identity when no rule admits it.
        """
        for identity in self.identities:
            label = identity.match(certificate)
            if label is not None:
                return SignerMatch(kind="identity", label=label, signer_id=f"identity:{label}")
        issuer, subjects = certificate_identity(certificate)
        raise VerificationError(
            f"the certificate identity {', '.join(subjects) or '(none)'} ({issuer}) is not trusted"
            f" (trusted: {self.describe()})"
        )

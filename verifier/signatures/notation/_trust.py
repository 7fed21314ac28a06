"""Notary Project trust, the way Notation users write it: trust stores, trusted identities, registry scopes
and a verification level (``notation`` trust policy v1.0, ``specs/trust-store-trust-policy.md``).

* **Trust stores** by type: ``ca`` certificates anchor ``notary.x509`` signatures, ``signingAuthority``
  certificates anchor ``notary.x509.signingAuthority`` signatures (each scheme uses only its own type), and
  ``tsa`` certificates anchor RFC 3161 timestamp countersignatures.
* **Trusted identities**: ``x509.subject: <DN>`` (RFC 4514; at least ``C``, ``ST`` — or its alias ``S`` —
  and ``O``) or ``*``. A signing certificate matches when every attribute of the identity appears in its
  subject with the same value.
* **Registry scopes**: ``registry/repository`` names, or ``*`` alone.
* **Verification level**: ``strict``, ``permissive`` or ``audit`` (see :data:`ENFORCED`); ``skip`` verifies
  nothing, so it cannot make a signer and is refused.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import NameOID

from verifier.base import InputError
from verifier.signatures.notation._stores import StoreType, check_store, load_certificates

__all__ = [
    "CHECKS",
    "ENFORCED",
    "Check",
    "Level",
    "NotationTrust",
    "StoreType",
    "TrustedIdentity",
    "certificate_subject",
    "load_certificates",
    "parse_distinguished_name",
    "parse_identities",
]

_log = logging.getLogger(__name__)

Level = Literal["strict", "permissive", "audit"]
Check = Literal["integrity", "authenticity", "authenticTimestamp", "expiry"]
CHECKS: Final[tuple[Check, ...]] = ("integrity", "authenticity", "authenticTimestamp", "expiry")

#: What each level enforces; the other checks are only logged (Notation's table). trtguard adds one rule of
#: its own: a signature counts toward a threshold only when its authenticity was established, whatever the
#: level, so an untrusted root or identity never passes (under ``audit`` it is logged and does not count).
ENFORCED: Final[Mapping[Level, frozenset[Check]]] = {
    "strict": frozenset(CHECKS),
    "permissive": frozenset({"integrity", "authenticity"}),
    "audit": frozenset({"integrity"}),
}

# Short names of subject attributes, as Go's pkix.Name.String() writes them (Notation parses that string).
_ATTRIBUTE_NAMES: Final = {
    NameOID.COUNTRY_NAME: "C",
    NameOID.STATE_OR_PROVINCE_NAME: "ST",
    NameOID.LOCALITY_NAME: "L",
    NameOID.ORGANIZATION_NAME: "O",
    NameOID.ORGANIZATIONAL_UNIT_NAME: "OU",
    NameOID.COMMON_NAME: "CN",
    NameOID.SERIAL_NUMBER: "SERIALNUMBER",
    NameOID.STREET_ADDRESS: "STREET",
    NameOID.POSTAL_CODE: "POSTALCODE",
}
_MANDATORY: Final = ("C", "ST", "O")
_LABEL: Final = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN: Final = re.compile(rf"{_LABEL}(?:\.{_LABEL})*(?::[0-9]+)?")
_COMPONENT: Final = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"  # distribution's, unambiguous: no backtracking
_REPOSITORY: Final = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
#: The prefix of the one kind of trusted identity Notation itself checks.
X509_SUBJECT: Final = "x509.subject"
_SPECIAL: Final = frozenset(',+"\\<>;=#')


def _split_unescaped(text: str, separator: str) -> list[str]:
    parts, current, escaped = [], [], False
    for char in text:
        if escaped:
            current.append("\\" + char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == separator:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if escaped:
        raise ValueError("it ends in an unfinished escape (a lone backslash)")
    parts.append("".join(current))
    return parts


def _unescape(value: str) -> str:
    """An RFC 4514 attribute value with ``\\,``-style and ``\\2C``-style escapes resolved."""
    raw, index = bytearray(), 0
    while index < len(value):
        char = value[index]
        if char != "\\":
            if char in '"+;<>' or (char == "#" and index == 0):
                raise ValueError(f"the character {char!r} must be escaped")
            raw += char.encode()
            index += 1
            continue
        pair = value[index + 1 : index + 3]
        if len(pair) == 2 and all(c in "0123456789abcdefABCDEF" for c in pair):
            raw.append(int(pair, 16))
            index += 3
        elif index + 1 < len(value) and (value[index + 1] in _SPECIAL or value[index + 1] == " "):
            raw += value[index + 1].encode()
            index += 2
        else:
            raise ValueError(f"{value[index : index + 2]!r} is not an RFC 4514 escape")
    return raw.decode()


def parse_distinguished_name(text: str) -> dict[str, str]:
    """An ``x509.subject`` value as Notation reads it: attribute type (upper case, ``S`` → ``ST``) → value.

    Refused as Notation refuses them: ``=#`` (hex-encoded values), multi-valued RDNs (``+``), an attribute
    type given twice, and a DN without ``C``, ``ST`` and ``O``. Raises ``ValueError`` saying why.
    """
    if "=#" in text:
        raise ValueError('values written as "=#" (hex-encoded BER) are not supported, as in Notation')
    found: dict[str, str] = {}
    for rdn in _split_unescaped(text, ","):
        if len(_split_unescaped(rdn, "+")) > 1:
            raise ValueError(f"{rdn.strip()!r} is a multi-valued RDN, which Notation does not support")
        kind, equals, value = rdn.partition("=")
        kind = kind.strip().upper()
        if not equals or not kind:
            raise ValueError(f"{rdn.strip()!r} is not TYPE=VALUE")
        kind = "ST" if kind == "S" else kind
        if kind in found:
            raise ValueError(f"the attribute {kind} is given twice")
        stripped = value.strip(" ")
        if value.endswith("\\ ") and not stripped.endswith("\\"):
            stripped += " "  # an escaped trailing space belongs to the value
        found[kind] = _unescape(stripped)
    missing = [name for name in _MANDATORY if not found.get(name)]
    if missing:
        raise ValueError(f"it lacks {', '.join(missing)}: a DN must have at least C, ST (or S) and O")
    return found


def certificate_subject(certificate: x509.Certificate) -> dict[str, str]:
    """The certificate's subject as attribute type → value (what a trusted identity is matched against).

    Raises ``ValueError`` for subjects Notation cannot read either: multi-valued RDNs, repeated attribute
    types, and attributes outside the short names Go prints (written as a hex ``=#`` value there).
    """
    found: dict[str, str] = {}
    for rdn in certificate.subject.rdns:
        attributes = list(rdn)
        if len(attributes) != 1:
            raise ValueError("the subject has a multi-valued RDN")
        attribute = attributes[0]
        name = _ATTRIBUTE_NAMES.get(attribute.oid)
        if name is None:
            raise ValueError(
                f"the subject has an attribute ({attribute.oid.dotted_string}) Notation cannot match"
            )
        if name in found:
            raise ValueError(f"the subject has the attribute {name} twice")
        value = attribute.value
        text = value if isinstance(value, str) else value.decode(errors="replace")
        if "=#" in text:
            # Go writes the subject as text and Notation refuses any "=#" in it (internal/pkix), as it refuses
            # the same in an identity: the text could not be told from a hex-encoded value.
            raise ValueError(f'the subject attribute {name}={text!r} contains "=#", which Notation refuses')
        found[name] = text
    return found


@dataclass(frozen=True, slots=True)
class TrustedIdentity:
    """One ``x509.subject: <DN>`` entry, parsed; or ``*`` (any identity)."""

    text: str
    attributes: Mapping[str, str] | None  # None for "*"

    @classmethod
    def parse(cls, text: str) -> TrustedIdentity:
        """Read one entry; :class:`InputError` for what Notation refuses too (and for another prefix: see
        :func:`parse_identities`)."""
        if text == "*":
            return cls(text, None)
        prefix, separator, value = text.partition(":")
        if not separator or prefix.strip() != X509_SUBJECT:
            raise InputError(
                f"trusted identity {text!r} is neither '*' nor 'x509.subject: <DN>'",
                hint="write x509.subject: C=US, ST=WA, O=Example, CN=Release signer",
            )
        if not value.strip():
            raise InputError(f"trusted identity {text!r} has no distinguished name after 'x509.subject:'")
        try:
            return cls(text, parse_distinguished_name(value.strip()))
        except ValueError as error:
            raise InputError(f"trusted identity {text!r}: {error}", hint="write an RFC 4514 DN") from error

    def admits(self, subject: Mapping[str, str]) -> bool:
        """True when every attribute of this identity is in ``subject`` with the same value."""
        return self.attributes is None or all(subject.get(k) == v for k, v in self.attributes.items())


def parse_identities(texts: Iterable[str], *, location: str = "") -> tuple[TrustedIdentity, ...]:
    """A statement's ``trustedIdentities``: ``*`` and ``x509.subject`` entries, parsed.

    An entry with another prefix (``<prefix>:<value>``, the identity a verification plugin checks) is left
    out with a warning, as Notation leaves it to its plugin: trtguard runs no plugins, so such an identity
    can never admit a signer, and a statement with nothing else has no identity left (refused when the
    trust is made). An entry without a ``:`` is refused, as Notation refuses it.
    """
    texts = list(texts)
    if "*" in texts and len(texts) > 1:
        raise InputError("'*' must be the only trusted identity when it is used", location=location or None)
    found = []
    for text in texts:
        prefix, separator, _ = text.partition(":")
        if text != "*" and separator and prefix.strip() != X509_SUBJECT and prefix.strip():
            _log.warning(
                "%sthe trusted identity %r is not an x509.subject identity (a verification plugin's); "
                "trtguard runs no plugins, so it is ignored",
                f"{location}: " if location else "",
                text,
            )
            continue
        found.append(TrustedIdentity.parse(text))
    return tuple(found)


def _scope_problem(scopes: Sequence[str]) -> str | None:
    if not scopes:
        return "registryScopes is empty; list repositories, or '*' for every one"
    if "*" in scopes and len(scopes) > 1:
        return "'*' must be the only registry scope when it is used"
    for scope in scopes:
        domain, _, repository = scope.partition("/")
        if scope != "*" and not (_DOMAIN.fullmatch(domain) and _REPOSITORY.fullmatch(repository)):
            # Notation's check (trustpolicy.validateRegistryScopeFormat, after distribution's grammar)
            return (
                f"registry scope {scope!r} is not valid: make sure it is a fully qualified repository "
                "(registry/path), without tag, digest or glob, for example domain.com/my/repository"
            )
    return None


@dataclass(frozen=True, slots=True)
class NotationTrust:
    """A Notation trust policy statement: who may sign, anchored where, for which repositories, how
    strictly."""

    stores: Mapping[StoreType, tuple[x509.Certificate, ...]]
    identities: tuple[TrustedIdentity, ...]
    scopes: tuple[str, ...] = ("*",)
    level: Level = "strict"

    def __post_init__(self) -> None:
        if not (self.stores.get("ca") or self.stores.get("signingAuthority")):
            raise InputError(
                "a Notation signer needs a 'ca' or 'signingAuthority' trust store with at least one "
                "certificate"
            )
        for kind, certificates in self.stores.items():
            check_store(kind, certificates, location=f"trust store {kind}")
        if not self.identities:
            raise InputError(
                "a Notation signer needs trustedIdentities ('*' or x509.subject entries; identities of "
                "verification plugins are ignored, since trtguard runs no plugins)"
            )
        if any(i.attributes is None for i in self.identities) and len(self.identities) > 1:
            raise InputError("'*' must be the only trusted identity when it is used")
        problem = _scope_problem(self.scopes)
        if problem is not None:
            raise InputError(problem)
        if self.level == "skip":  # type: ignore[comparison-overlap]  # a value from a policy file
            raise InputError(
                "verification level 'skip' verifies nothing, so a signer at that level would vouch for "
                "anything",
                hint="leave the image out of the signature rule instead (exclude), or use strict, permissive "
                "or audit",
            )
        if self.level not in ENFORCED:
            raise InputError(f"verification level {self.level!r} is not one of strict, permissive, audit")

    def covers(self, repository: str | None) -> bool:
        """True when this trust applies to images of ``repository`` (``registry/path``)."""
        return "*" in self.scopes or repository in self.scopes

    def enforces(self, check: Check) -> bool:
        """True when the level makes ``check`` decide, rather than only be logged."""
        return check in ENFORCED[self.level]

    @property
    def fingerprint(self) -> str:
        """What the verdict depends on, for cache keys: certificates, identities, scopes and level."""
        digest = hashlib.sha256()
        for kind in sorted(self.stores):
            for certificate in self.stores[kind]:
                digest.update(kind.encode() + b"\0" + certificate.public_bytes(Encoding.DER))
        digest.update(
            "\0".join([i.text for i in self.identities] + list(self.scopes) + [self.level]).encode()
        )
        return digest.hexdigest()

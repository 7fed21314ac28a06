"""Detached OpenPGP signatures over exact bytes (build manifests, change approvals), verified with Sequoia.

pysequoia (Sequoia's binding) was chosen over PGPy and python-gnupg by ``bench/openpgp_candidates.py``
(docs/signatures.md, "OpenPGP"): it handles expiry, revocation and hash policy as OpenPGP says, where the
others accept signatures by revoked keys or made with SHA-1. What that means here:

* a key's expiry and soft revocation (superseded, retired) cut off the signatures made after them; a
  signature made while the key was valid still verifies. A hard revocation (compromised, or no reason)
  invalidates every signature of the key. Signing subkeys count for their certificate (a certify-only
  primary is fine); a revoked or expired subkey, or one not flagged for signing, does not;
* Sequoia's standard policy refuses SHA-1 (and weaker) data signatures;
* trtguard refuses text-mode signatures (type 0x01) on its own: they are made over line endings converted to
  CRLF, so the bytes they vouch for are not the bytes that were signed (a JSON file could change its line
  endings, or worse, under one). Only binary signatures (``gpg --detach-sign`` without ``--textmode``) count;
* a signature that names, in its hashed (signed) area, a key of another of the certificates given as its
  issuer does not count for the key that made it (issue 25, D2): it claims to be another trusted signer's.
  Otherwise it counts for the key that verifies it when any issuer subpacket names that key, as Sequoia and
  ``sqv`` take it (unhashed subpackets, which anyone can change, can never make a good signature fail);
  ``gpgv`` agrees where it looks the key up by the hashed issuer (docs/signatures.md has the table). Key IDs
  and fingerprints are compared as upper-case hex, normalised when read.

The certificates a policy trusts are what it says about revocations and expiry: update the armored key in
the policy to carry a revocation.

Time: Sequoia judges at the real clock (pysequoia takes no reference time). With ``now`` given (``--now``),
each signature must also be alive at ``now`` (made at or before it, with Sequoia's 30 minutes of clock
skew, and not expired at it); a signature whose
lifetime excludes the real clock cannot be judged as at another time and does not verify. Key expiry is
judged at the signature's creation time, as OpenPGP says, so it does not depend on the clock.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from verifier.base import InputError, VerificationError

if TYPE_CHECKING:  # pysequoia loads with the first OpenPGP key or signature read (start-up time, issue 15)
    import pysequoia

__all__ = [
    "MAX_SIGNATURES",
    "MAX_SIGNATURE_BYTES",
    "OpenPGPKey",
    "SignatureCheck",
    "check_signatures",
    "keyring_of",
    "not_verified",
    "read_keyring",
    "read_signatures",
    "verify_detached",
]

#: A detached signature is a few hundred bytes; a large one is not one.
MAX_SIGNATURE_BYTES: Final = 64 * 1024
#: Signatures in one detached signature file (one per signer).
MAX_SIGNATURES: Final = 32
#: The header and tail lines of armor blocks (RFC 9580 6.2); lines outside the blocks are not data.
_ARMOR_LINE: Final = re.compile(rb"-----(BEGIN|END) PGP [A-Z0-9 ,/]{1,64}-----")
#: A failure names the keys it tried up to this many (a keyring may hold hundreds).
_KEYS_NAMED: Final = 4
#: How far after the time judged at a signature may be dated (Sequoia's tolerance of clock skew).
_CLOCK_SKEW: Final = timedelta(minutes=30)
_ISSUER_KEY_ID, _ISSUER_FINGERPRINT = 16, 33  # signature subpacket types (RFC 9580 5.2.3.12, 5.2.3.35)


def _first_line(error: Exception) -> str:
    # pysequoia's messages carry a Rust backtrace after the first line.
    return (str(error).splitlines() or [type(error).__name__])[0]


@dataclass(frozen=True, slots=True)
class OpenPGPKey:
    """A trusted OpenPGP certificate (public key, subkeys, bindings, revocations), from its armored text."""

    certificate: pysequoia.Cert
    fingerprint: str  # the primary key's, upper-case hex

    @classmethod
    def from_armored(cls, data: bytes, *, location: str | None = None) -> OpenPGPKey:
        """Read one armored (or binary) public certificate; :class:`InputError` when it is unusable."""
        certificates = _certificates(data, location)
        if len(certificates) != 1:
            raise InputError(
                f"an OpenPGP key entry must hold exactly one certificate, not {len(certificates)}",
                location=location,
                hint="give each key its own TrustedKeys entry, so that a threshold counts them apart",
            )
        return certificates[0]

    def key_fingerprints(self) -> frozenset[str]:
        """The fingerprints (upper-case hex) of the primary key and every subkey of the certificate."""
        from pysequoia.packet import PacketPile  # noqa: PLC0415 - see TYPE_CHECKING above

        return frozenset(
            fingerprint.upper()
            for packet in PacketPile.from_bytes(str(self.certificate).encode())
            if str(packet.tag).removeprefix("Tag.") in ("PublicKey", "PublicSubkey")
            and (fingerprint := packet.fingerprint) is not None
        )

    def state(self, now: datetime | None = None) -> str:
        """``revoked``, ``expired``, ``valid`` at ``now`` (default: the real clock), or why Sequoia cannot
        tell (for messages)."""
        try:
            if self.certificate.is_revoked:
                return "revoked"
            expiry = self.certificate.expiration
        except (RuntimeError, ValueError) as error:  # e.g. no valid binding signature: nothing verifies
            return f"unusable: {_first_line(error)}"
        if expiry is not None and expiry <= (now or datetime.now(UTC)):
            return "expired"
        return "valid"


def _certificates(data: bytes, location: str | None) -> list[OpenPGPKey]:
    import pysequoia  # noqa: PLC0415 - see TYPE_CHECKING above

    try:
        certificates = pysequoia.Cert.split_bytes(data)
    except (ValueError, RuntimeError, TypeError) as error:
        raise InputError(
            f"not an OpenPGP public key: {_first_line(error)}",
            location=location,
            hint="export it with `gpg --armor --export FINGERPRINT`",
        ) from error
    keys = []
    for certificate in certificates:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # pysequoia would rather have Tsk.from_bytes
            secret = certificate.secrets is not None
        if secret:
            raise InputError(
                "the OpenPGP key holds secret key material; a policy names public keys only",
                location=location,
                hint="export the public key with `gpg --armor --export FINGERPRINT`",
            )
        keys.append(OpenPGPKey(certificate, certificate.fingerprint.upper()))
    return keys


def read_keyring(data: bytes, *, location: str | None = None) -> dict[str, OpenPGPKey]:
    """The certificates of a keyring (``gpg --export`` output, armored or binary), by fingerprint;
    :class:`InputError` when it holds none, secret key material or something else."""
    keys = keyring_of(_certificates(data, location))
    if not keys:
        raise InputError(
            "the keyring holds no OpenPGP certificate",
            location=location,
            hint="export the signers' keys with `gpg --export FINGERPRINT... > keyring.gpg`",
        )
    return keys


def keyring_of(keys: Iterable[OpenPGPKey]) -> dict[str, OpenPGPKey]:
    """``keys`` by fingerprint, the copies of one certificate merged (as gpg merges them on import), so that
    a revocation or new binding that one copy carries is not lost to another copy without it."""
    merged: dict[str, OpenPGPKey] = {}
    for key in keys:
        known = merged.get(key.fingerprint)
        merged[key.fingerprint] = (
            key if known is None else OpenPGPKey(known.certificate.merge(key.certificate), key.fingerprint)
        )
    return merged


def _read_signatures(
    data: bytes, location: str | None
) -> list[tuple[pysequoia.Sig, tuple[tuple[str, ...], tuple[str, ...]]]]:
    """Every signature of a detached signature file (armored or binary; ``gpg -u A -u B --detach-sign``
    writes one per signer); :class:`VerificationError` when the file is anything else.

    Every packet must be a binary signature: the bytes after a signature, a truncated packet, an inline-signed
    message or a key are refused, not skipped (Sequoia's own signature reader reads the first packet and
    ignores the rest).
    """
    import pysequoia  # noqa: PLC0415 - see TYPE_CHECKING above
    from pysequoia.packet import PacketPile, SignatureType  # noqa: PLC0415

    if len(data) > MAX_SIGNATURE_BYTES:
        raise VerificationError(
            f"the OpenPGP signature is larger than {MAX_SIGNATURE_BYTES // 1024} KiB", location=location
        )
    # Binary packets start with a tag octet (high bit set); anything else is armored text, whose every
    # armor block counts (gpg reads them all; Sequoia would read the first) and whose other text does not.
    parts = [data] if data[:1] and data[0] & 0x80 else _armor_blocks(data, location)
    if len(parts) > MAX_SIGNATURES:
        raise VerificationError(
            f"the file holds {len(parts)} armor blocks; a detached signature file holds at most "
            f"{MAX_SIGNATURES} signatures",
            location=location,
        )
    if not parts:
        raise VerificationError(
            "not an OpenPGP signature: neither binary packets nor an armored block", location=location
        )
    packets = []
    for part in parts:
        try:
            packets += list(PacketPile.from_bytes(part))
        except (ValueError, RuntimeError, TypeError) as error:
            raise VerificationError(
                f"not an OpenPGP signature: {_first_line(error)}", location=location
            ) from error
    if not packets:
        raise VerificationError("the file holds no OpenPGP signature", location=location)
    if len(packets) > MAX_SIGNATURES:
        raise VerificationError(
            f"the file holds {len(packets)} OpenPGP packets; a detached signature file holds at most "
            f"{MAX_SIGNATURES} signatures",
            location=location,
        )
    signatures = []
    for number, packet in enumerate(packets, 1):
        where = f"packet {number} of {len(packets)}"
        try:
            kind = str(packet.tag).removeprefix("Tag.")
        except (ValueError, RuntimeError) as error:  # e.g. "Unknown packet tag: 42"
            kind = f"unknown ({_first_line(error)})"
        if kind != "Signature":
            raise VerificationError(
                f"not a detached OpenPGP signature: {where} is of kind {kind}, not a signature (an "
                "inline-signed message or a key is not a detached signature)",
                location=location,
                hint="sign with `gpg --armor --detach-sign FILE`",
            )
        try:
            raw = bytes(packet)
            signature = pysequoia.Sig.from_bytes(raw)
            signature_type = signature.signature_type
            issuers = _issuers(raw)
        except (ValueError, RuntimeError, TypeError, IndexError) as error:  # e.g. "Unknown signature type"
            raise VerificationError(
                f"not an OpenPGP signature ({where}): {_first_line(error)}", location=location
            ) from error
        if signature_type != SignatureType.Binary:
            raise VerificationError(
                f"the OpenPGP signature ({where}) is of type {signature_type}, not a binary "
                "signature over the exact bytes (text-mode signatures hold under changed line endings)",
                location=location,
                hint="sign with `gpg --armor --detach-sign FILE` (without --textmode / -t)",
            )
        signatures.append((signature, issuers))
    return signatures


def read_signatures(data: bytes, *, location: str | None = None) -> tuple[pysequoia.Sig, ...]:
    """Every signature of a detached signature file, as :func:`_read_signatures` reads them (each packet a
    binary signature; :class:`VerificationError` for anything else)."""
    return tuple(signature for signature, _ in _read_signatures(data, location))


def _armor_blocks(text: bytes, location: str | None) -> list[bytes]:
    """Each armor block of ``text``, header to tail, found in one pass (a search per block from each header
    would take quadratic time over a file of headers)."""
    blocks, begin = [], None
    for line in _ARMOR_LINE.finditer(text):
        if line.group(1) == b"BEGIN":
            begin = line.start() if begin is None else begin
        elif begin is not None:
            blocks.append(text[begin : line.end()])
            begin = None
    if begin is not None:
        raise VerificationError(
            "not an OpenPGP signature: an armor block has no tail line", location=location
        )
    return blocks


@dataclass(frozen=True, slots=True)
class SignatureCheck:
    """One signature of a detached signature file, and the names of the keys it verifies with (none: it is
    not a valid signature over the bytes by any of them)."""

    issuer: str  # the signing key's fingerprint when it verified, else the issuer it names; upper-case hex
    created: datetime | None
    hash_algorithm: str
    key_algorithm: str
    signers: tuple[str, ...]
    problem: str | None = None  # why it does not count although it may verify: the time, a rival issuer


def _name(value: object) -> str:
    return str(value).rsplit(".", 1)[-1]


def _subpacket_area(body: bytes, offset: int, size_bytes: int) -> tuple[list[tuple[int, bytes]], int]:
    """The subpackets (type without the critical bit, value) of the area at ``offset``; the offset after."""
    size = int.from_bytes(body[offset : offset + size_bytes], "big")
    area, offset = body[offset + size_bytes : offset + size_bytes + size], offset + size_bytes + size
    found, at = [], 0
    while at < len(area):
        first = area[at]
        if first < 192:
            length, at = first, at + 1
        elif first < 255:
            length, at = ((first - 192) << 8) + area[at + 1] + 192, at + 2
        else:
            length, at = int.from_bytes(area[at + 1 : at + 5], "big"), at + 5
        if length == 0 or at + length > len(area):
            raise ValueError("a subpacket overruns its area")
        found.append((area[at] & 0x7F, area[at + 1 : at + length]))
        at += length
    return found, offset


def _issuers(packet: bytes) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The issuer key IDs and fingerprints a signature packet names (upper-case hex): hashed, then unhashed.

    A v3 signature's key ID is outside what it hashes (it counts as unhashed). Raises ``ValueError`` or
    ``IndexError`` for a packet it cannot read.
    """
    header = packet[0]
    if header & 0x40:  # new-format header: tag octet, then a one-, two- or five-octet length
        first = packet[1]
        start = 2 if first < 192 else 3 if first < 224 else 6
    else:  # old format: the length type in the low two bits (1, 2 or 4 octets)
        start = 1 + {0: 1, 1: 2, 2: 4}.get(header & 0x03, 0)
    body = packet[start:]
    version = body[0]
    if version == 3:
        return (), (body[7:15].hex().upper(),)
    if version not in (4, 6):
        raise ValueError(f"signature version {version}")
    size_bytes = 2 if version == 4 else 4
    areas = []
    offset = 4
    for _ in range(2):
        subpackets, offset = _subpacket_area(body, offset, size_bytes)
        areas.append(
            tuple(
                value[1:].hex().upper() if kind == _ISSUER_FINGERPRINT else value.hex().upper()
                for kind, value in subpackets
                if (kind == _ISSUER_FINGERPRINT and len(value) > 1)
                or (kind == _ISSUER_KEY_ID and len(value) == 8)
            )
        )
    return areas[0], areas[1]


def _names(issuers: Sequence[str], signing_key: str) -> bool:
    """True when one of ``issuers`` (fingerprints and key IDs) is ``signing_key`` (a fingerprint): the key ID
    is a v4 fingerprint's (40 hex digits) low 64 bits, a v6 one's (64 digits) high 64 bits."""
    key_id = signing_key[-16:] if len(signing_key) == 40 else signing_key[:16]
    return any(issuer in (signing_key, key_id) for issuer in issuers)


def _alive_at(signature: pysequoia.Sig, now: datetime) -> str | None:
    """Why ``signature`` is not alive at ``now``, or cannot be judged as at ``now`` (Sequoia judges at the
    real clock); None when neither."""
    created, expires = _read(signature, "created"), _read(signature, "expiration")
    if isinstance(created, datetime) and created > now + _CLOCK_SKEW:
        return f"it was made at {created.isoformat()}, after the time judged at ({now.isoformat()})"
    if isinstance(expires, datetime) and expires <= now:
        return f"it expired at {expires.isoformat()}, before the time judged at ({now.isoformat()})"
    real = datetime.now(UTC)
    if isinstance(expires, datetime) and expires <= real:
        return (
            f"it expired at {expires.isoformat()}: valid at {now.isoformat()}, but Sequoia judges signatures "
            "at the real clock, so it cannot be verified as at another time"
        )
    return None


def check_signatures(
    data: bytes | Path,
    signature: bytes,
    keys: Mapping[str, OpenPGPKey],
    *,
    now: datetime | None = None,
) -> tuple[SignatureCheck, ...]:
    """Each signature of the detached signature file ``signature`` over ``data`` (bytes, or a file read as a
    stream), with the ``keys`` that made it; :class:`VerificationError` when the file is not one.

    A signature counts for a key only when an issuer subpacket names the signing key, its hashed area names
    no key of another of ``keys`` (module docstring) and, with ``now``, it is alive at ``now``.
    """
    import pysequoia  # noqa: PLC0415 - see TYPE_CHECKING above

    source: dict[str, Any] = {"bytes": data} if isinstance(data, bytes) else {"file": str(data)}
    checks = []
    for parsed, (hashed, unhashed) in _read_signatures(signature, None):
        claimed = hashed + unhashed
        signers, signed_by = [], ""
        problem = _alive_at(parsed, now) if now is not None else None
        for name, key in keys.items():
            if problem is not None:
                break

            def store(_ids: list[str], cert: pysequoia.Cert = key.certificate) -> list[pysequoia.Cert]:
                return [cert]

            try:
                result = pysequoia.verify(store=store, signature=parsed, **source)
            except (RuntimeError, ValueError, TypeError):
                continue
            named = [k for v in result.valid_sigs if _names(claimed, k := str(v.signing_key).upper())]
            if not named:
                continue
            rivals = [
                other_name
                for other_name, other in keys.items()
                if other.fingerprint.upper() != key.fingerprint.upper()
                and any(_names(hashed, fingerprint) for fingerprint in other.key_fingerprints())
            ]
            if rivals:
                problem = (
                    f"made by {name}, its signed issuer names another key given ({', '.join(rivals)}): a "
                    "signature that claims another trusted signer does not count"
                )
                continue
            signers.append(name)
            signed_by = signed_by or named[0]
        issuer = signed_by or (claimed[0] if claimed else "UNKNOWN")
        created = _read(parsed, "created")
        checks.append(
            SignatureCheck(
                issuer,
                created if isinstance(created, datetime) else None,
                _name(_read(parsed, "hash_algorithm") or "unknown"),
                _name(_read(parsed, "key_algorithm") or "unknown"),
                tuple(signers),
                problem,
            )
        )
    return tuple(checks)


def _read(signature: pysequoia.Sig, field: str) -> Any:
    """A field of a parsed signature, or None where Sequoia cannot say (an algorithm it does not know)."""
    try:
        return getattr(signature, field)
    except (RuntimeError, ValueError):
        return None


def verify_detached(
    data: bytes | Path,
    signature: bytes,
    keys: Mapping[str, OpenPGPKey],
    *,
    every: bool = False,
    now: datetime | None = None,
) -> tuple[str, ...]:
    """Names of the ``keys`` that made a valid detached signature over exactly ``data``, in their order.

    A file may hold several signatures. By default the valid ones count and the others are left out, as for a
    DSSE envelope (a signature by a key of another rule, or a bad one, does not undo a good one); with
    ``every``, each signature must be a valid one by one of ``keys``, as ``gpgv`` requires. Raises
    :class:`VerificationError` when that is not so, saying what the signature claims and what the keys are.
    ``now`` is the time judged at (``--now``; :func:`check_signatures`), else the real clock.
    """
    checks = check_signatures(data, signature, keys, now=now)
    verified = {name for check in checks for name in check.signers}
    failed = [(number, check) for number, check in enumerate(checks, 1) if not check.signers]
    if verified and not (every and failed):
        return tuple(name for name in keys if name in verified)
    raise not_verified(checks, keys, now=now)


def not_verified(
    checks: Sequence[SignatureCheck], keys: Mapping[str, OpenPGPKey], *, now: datetime | None = None
) -> VerificationError:
    """The error for the first of ``checks`` that no key verified: what it claims, and what the keys are
    (their state at ``now``, default the real clock)."""
    number, check = next(((n, c) for n, c in enumerate(checks, 1) if not c.signers), (1, checks[0]))
    which = f"signature {number} of {len(checks)}" if len(checks) > 1 else "signature"
    if check.problem is not None:
        return VerificationError(
            f"the OpenPGP {which} (by {check.issuer}) does not count: {check.problem}",
            hint="sign again with the key the policy lists (and judge at a time the signature is valid)",
        )
    states = ", ".join(f"{name} ({key.fingerprint[-16:]}, {key.state(now)})" for name, key in keys.items())
    if len(keys) > _KEYS_NAMED:
        states = f"the {len(keys)} keys given"
    return VerificationError(
        f"the OpenPGP {which} (by {check.issuer}, made {check.created}) is not a valid signature over these "
        f"bytes by any of {states or 'no keys'}: the bytes changed, another key signed (or the signature "
        "names another key as its issuer), or the key (or subkey) was revoked, expired or not for signing "
        "when it signed, or the signature is from the future or expired, or the hash is one Sequoia's policy "
        "refuses (SHA-1)",
        hint="sign the exact bytes with `gpg --armor --detach-sign` using a key the policy lists",
    )

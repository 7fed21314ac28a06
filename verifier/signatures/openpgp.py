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
  endings, or worse, under one). Only binary signatures (``gpg --detach-sign`` without ``--textmode``) count.

The certificates a policy trusts are what it says about revocations and expiry: update the armored key in
the policy to carry a revocation. Verification happens at the current time.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from verifier.errors import InputError, VerificationError

if TYPE_CHECKING:  # pysequoia loads with the first OpenPGP key or signature read (start-up time, issue 15)
    import pysequoia

__all__ = ["MAX_SIGNATURE_BYTES", "OpenPGPKey", "read_signature", "verify_detached"]

#: A detached signature is a few hundred bytes; a large one is not one.
MAX_SIGNATURE_BYTES: Final = 64 * 1024


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
        import pysequoia  # noqa: PLC0415 - see TYPE_CHECKING above

        try:
            certificates = pysequoia.Cert.split_bytes(data)
        except (ValueError, RuntimeError, TypeError) as error:
            raise InputError(
                f"not an OpenPGP public key: {_first_line(error)}",
                location=location,
                hint="export it with `gpg --armor --export FINGERPRINT`",
            ) from error
        if len(certificates) != 1:
            raise InputError(
                f"an OpenPGP key entry must hold exactly one certificate, not {len(certificates)}",
                location=location,
                hint="give each key its own TrustedKeys entry, so that a threshold counts them apart",
            )
        certificate = certificates[0]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # pysequoia would rather have Tsk.from_bytes
            secret = certificate.secrets is not None
        if secret:
            raise InputError(
                "the OpenPGP key holds secret key material; a policy names public keys only",
                location=location,
                hint="export the public key with `gpg --armor --export FINGERPRINT`",
            )
        return cls(certificate, certificate.fingerprint.upper())

    def state(self) -> str:
        """``revoked``, ``expired`` or ``valid`` now (for messages)."""
        if self.certificate.is_revoked:
            return "revoked"
        expiry = self.certificate.expiration
        if expiry is not None and expiry <= datetime.now(UTC):
            return "expired"
        return "valid"


def read_signature(data: bytes, *, location: str | None = None) -> pysequoia.Sig:
    """One detached signature (armored or binary); :class:`VerificationError` when it is not one."""
    import pysequoia  # noqa: PLC0415 - see TYPE_CHECKING above

    if len(data) > MAX_SIGNATURE_BYTES:
        raise VerificationError(
            f"the OpenPGP signature is larger than {MAX_SIGNATURE_BYTES // 1024} KiB", location=location
        )
    try:
        signature = pysequoia.Sig.from_bytes(data)
    except (ValueError, RuntimeError, TypeError) as error:
        raise VerificationError(
            f"not an OpenPGP signature: {_first_line(error)}", location=location
        ) from error
    if signature.signature_type != pysequoia.packet.SignatureType.Binary:
        raise VerificationError(
            f"the OpenPGP signature is of type {signature.signature_type}, not a binary signature over the "
            "exact bytes (text-mode signatures hold under changed line endings)",
            location=location,
            hint="sign with `gpg --armor --detach-sign FILE` (without --textmode / -t)",
        )
    return signature


def verify_detached(data: bytes, signature: bytes, keys: Mapping[str, OpenPGPKey]) -> tuple[str, ...]:
    """Names of the ``keys`` that made a valid detached ``signature`` over exactly ``data``.

    Raises :class:`VerificationError` when none did, saying what the signature claims and what the keys are.
    """
    import pysequoia  # noqa: PLC0415 - see TYPE_CHECKING above

    parsed = read_signature(signature)
    verified = []
    for name, key in keys.items():

        def store(_ids: list[str], certificate: pysequoia.Cert = key.certificate) -> list[pysequoia.Cert]:
            return [certificate]

        try:
            pysequoia.verify(bytes=data, store=store, signature=parsed)
        except (RuntimeError, ValueError, TypeError):
            continue
        verified.append(name)
    if verified:
        return tuple(verified)
    issuer = (parsed.issuer_fingerprint or parsed.issuer_key_id or "unknown").upper()
    states = ", ".join(f"{name} ({key.fingerprint[-16:]}, {key.state()})" for name, key in keys.items())
    raise VerificationError(
        f"the OpenPGP signature (by {issuer}, made {parsed.created}) is not a valid signature over these "
        "bytes "
        f"by any of {states}: the bytes changed, another key signed, or the key (or subkey) was revoked, "
        "expired or not for signing when it signed, or the hash is one Sequoia's policy refuses (SHA-1)",
        hint="sign the exact bytes with `gpg --armor --detach-sign` using a key the policy lists",
    )

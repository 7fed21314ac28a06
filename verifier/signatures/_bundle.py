"""One Sigstore bundle verified offline against a :class:`TrustPolicy`: key-signed or keyless.

Both paths check the signature and the statement the same way, and their log entries through the one
:func:`rekor_entry.verify_entry` (body, promise, inclusion proof and checkpoint, log key validity):

* key-signed (``verificationMaterial.publicKey``, ``cosign sign --key`` v3, sigstore-go): every trusted key
  is tried (the key hint is not trusted). Under ``policy.require_tlog`` each key counts only through a
  verified log entry that records its own signature; without it the log entries are not looked at, and
  the result says so (``tlog_verified=False``).
* keyless (Fulcio certificate): the identity rules, at least one verified log entry, the signed times (the
  promised integrated times and RFC 3161 timestamps of the trusted root's TSAs; a Rekor v2 entry has no
  time of its own), and at each of them the certificate chain to a Fulcio CA of the trusted root, then the
  embedded SCT and the Fulcio profile. DSSE entries of kind ``dsse`` 0.0.1, ``intoto`` 0.0.2 (cosign v2
  ``attest``, npm provenance) and ``hashedrekord`` 0.0.2 (Rekor v2) are all verified.

Nothing here makes a network call; sigstore-python's verifier is not used (it refuses key-signed bundles
and ``intoto`` entries), only its dependency rfc3161-client for timestamp tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from cryptography import x509
from cryptography.hazmat.primitives import hashes

from verifier.base import InputError, VerificationError, parse_sha256
from verifier.crypto import (
    MAX_SIGNATURES,
    Envelope,
    InvalidKey,
    PublicKey,
    Statement,
    pae,
    statement_from_envelope,
)
from verifier.signatures import _certificate as sigstore_cert
from verifier.signatures import _rekor as rekor_entry
from verifier.signatures._bundle_format import Bundle, MessageSignature, parse_bundle
from verifier.signatures._policy import SignerMatch, TrustPolicy
from verifier.signatures._rekor import LoggedSignature, RekorLog
from verifier.signatures._timestamp import SignedTimes, verify_timestamps
from verifier.signatures._trust import TrustRoot


@dataclass(frozen=True, slots=True)
class BundleOutcome:
    """The trusted signers of one bundle, whether its log entry was verified, and its statement if any."""

    matches: list[SignerMatch]
    tlog_verified: bool
    statement: Statement | None
    #: Log indexes of the verified transparency-log entries (those of trusted logs), when they were checked.
    log_indexes: tuple[int, ...] = ()


def require_subject(statement: Statement, digest: str) -> None:
    """``digest`` (``sha256:<hex>``) must be among the statement's subjects.

    Subjects named by other digests only (sha512, gitCommit, …) cannot be compared with a sha256 digest; the
    error says so instead of reporting a mismatch.
    """
    if not any("sha256" in subject.digest for subject in statement.subject):
        algorithms = sorted({algorithm for subject in statement.subject for algorithm in subject.digest})
        raise VerificationError(
            f"the statement's subjects carry {', '.join(algorithms)} digests only, which cannot bind to "
            f"{digest}: trtguard compares sha256 digests",
            hint="attest the artifact with a sha256 subject digest",
        )
    statement.require_subject(digest)


def _statement(envelope: Envelope, digest: str, predicate_type: str | None) -> Statement:
    try:
        statement = statement_from_envelope(envelope)
    except InputError as error:
        raise VerificationError(error.message) from error
    require_subject(statement, digest)
    if predicate_type is not None and statement.predicate_type != predicate_type:
        raise VerificationError(
            f"predicate type is {statement.predicate_type!r}, expected {predicate_type!r}"
        )
    return statement


def _check_message_digest(message: MessageSignature, digest: bytes) -> None:
    """The bundle's own record of the digest, when there is one, must be the artifact's SHA-256."""
    if not message.digest_algorithm and not message.digest:
        return
    if message.digest_algorithm != "SHA2_256":
        raise VerificationError(
            f"the bundle's message digest is {message.digest_algorithm or 'of no named algorithm'}, which "
            "cannot bind to a sha256 digest: trtguard compares sha256 digests",
            hint="sign the artifact's sha256 digest",
        )
    if message.digest != digest:
        raise VerificationError(
            f"the bundle signs sha256:{message.digest.hex()}, not sha256:{digest.hex()}",
            hint="the signature belongs to another artifact",
        )


def _signed_times(bundle: Bundle, policy: TrustPolicy) -> SignedTimes:
    authorities = policy.trust_root.timestamp_authorities if policy.trust_root is not None else ()
    return verify_timestamps(bundle.timestamps, bundle.signature, authorities)


def _logged_entries(
    bundle: Bundle,
    logs: Sequence[RekorLog],
    candidates: Sequence[LoggedSignature],
    signed_times: Sequence[datetime],
) -> list[datetime | None]:
    """Verify the bundle's entries from trusted logs (one failure fails all; at least one must be there);
    return the integrated time each verified promise signs."""
    if not bundle.tlog_entries:
        raise VerificationError("the bundle has no transparency log entry")
    seen = set()
    known = {log.log_id for log in logs}
    verified, skipped = [], []
    for entry in bundle.tlog_entries:
        if (entry.log_id, entry.log_index) in seen:
            raise VerificationError("the bundle carries the same log entry twice")
        seen.add((entry.log_id, entry.log_index))
        if entry.log_id not in known:
            skipped.append(
                f"the Rekor entry was logged by an unknown log (log id {entry.log_id.hex()[:16]}…)"
            )
            continue
        problems = []
        for logged in candidates:
            try:
                verified.append(
                    rekor_entry.verify_entry(
                        entry,
                        logs,
                        logged,
                        require_promise=bundle.version == "0.1",
                        require_proof=bundle.version != "0.1",
                        signed_times=signed_times,
                    )
                )
            except VerificationError as error:
                problems.append(error.message)
                continue
            break
        else:
            raise VerificationError(problems[0] if problems else "the envelope has no signature to log")
    if not verified:
        raise VerificationError(
            "; ".join(skipped),
            hint="add that log's key to the trusted root or the configured Rekor keys",
        )
    return verified


def _verify_keyed(
    bundle: Bundle, digest: str, predicate_type: str | None, policy: TrustPolicy
) -> BundleOutcome:
    expected = bytes.fromhex(parse_sha256(digest))
    if not policy.keys:
        raise VerificationError(
            f"the bundle is signed with a key, but the policy trusts only {policy.describe()}"
        )
    content = bundle.content
    if isinstance(content, Envelope):
        if len(content.signatures) > MAX_SIGNATURES:
            raise VerificationError(
                f"the envelope carries {len(content.signatures)} signatures;"
                f" at most {MAX_SIGNATURES} are checked"
            )
        message = pae(content.payload_type, content.payload)
        # A signature repeated in the envelope is one signature: verified, and looked up in the log, once.
        unique = list(dict.fromkeys(s.sig for s in content.signatures))
        signed_by = {
            name: [signature for signature in unique if key.verify(signature, message)]
            for name, key in policy.keys.items()
        }
    else:
        _check_message_digest(content, expected)
        signature = content.signature
        signed_by = {
            name: [signature] if key.verify_digest(signature, expected, hashes.SHA256()) else []
            for name, key in policy.keys.items()
        }
    matches = policy.key_matches({name: bool(found) for name, found in signed_by.items()})
    if not matches:
        raise VerificationError(f"signature present but not made by any trusted key ({policy.describe()})")
    statement = _statement(bundle.envelope, digest, predicate_type) if bundle.envelope else None
    if not policy.require_tlog:
        return BundleOutcome(matches=matches, tlog_verified=False, statement=statement)
    if not bundle.tlog_entries:
        raise VerificationError("the bundle has no transparency log entry but the policy requires one")
    signed_times = _signed_times(bundle, policy)
    logged, problems = [], dict[str, None]()
    for match in matches:
        key = policy.keys[match.label]
        candidates = [
            LoggedSignature(
                signature=signature,
                key=key,
                artifact_sha256=None if bundle.envelope else expected,
                envelope=bundle.envelope,
            )
            for signature in signed_by[match.label]
        ]
        try:
            _logged_entries(bundle, policy.rekor_logs, candidates, signed_times.times)
        except VerificationError as error:
            # Each key counts only through its own logged signature: an entry that records another
            # trusted key's signature proves nothing about this one.
            problems[f"{match.label}: {error.message}" if len(matches) > 1 else error.message] = None
            continue
        logged.append(match)
    if not logged:
        raise VerificationError("; ".join(problems))
    return BundleOutcome(
        matches=logged, tlog_verified=True, statement=statement, log_indexes=_log_indexes(bundle, policy)
    )


def _keyless_signature(
    bundle: Bundle, leaf: x509.Certificate, key: PublicKey, expected: bytes
) -> LoggedSignature:
    content = bundle.content
    if isinstance(content, Envelope):
        if len(content.signatures) != 1:
            raise VerificationError(
                f"a keyless envelope carries one signature; this one carries {len(content.signatures)}"
            )
        signature = content.signatures[0].sig
        verified = key.verify(signature, pae(content.payload_type, content.payload))
    else:
        _check_message_digest(content, expected)
        signature = content.signature
        verified = key.verify_digest(signature, expected, hashes.SHA256())
    if not verified:
        raise VerificationError("the signature does not verify with the signing certificate's key")
    return LoggedSignature(
        signature=signature,
        key=key,
        certificate=leaf,
        artifact_sha256=None if bundle.envelope else expected,
        envelope=bundle.envelope,
    )


def _chain_at(leaf: x509.Certificate, moment: datetime, trust_root: TrustRoot) -> list[x509.Certificate]:
    """The chain to a Fulcio CA of the trusted root, validated at ``moment`` (a signed time)."""
    valid_from, valid_until = leaf.not_valid_before_utc, leaf.not_valid_after_utc
    if not valid_from <= moment <= valid_until:
        raise VerificationError(
            f"the signing certificate was not valid at {moment.isoformat()}, when the signature was made"
            f" (it is valid {valid_from.isoformat()} to {valid_until.isoformat()})"
        )
    return sigstore_cert.verify_chain(leaf, [], trust_root.certificate_authorities, moment)


def _verify_keyless(
    bundle: Bundle, leaf: x509.Certificate, digest: str, predicate_type: str | None, policy: TrustPolicy
) -> BundleOutcome:
    trust_root = policy.trust_root
    if trust_root is None or not policy.identities:
        raise VerificationError(
            f"the bundle is signed with a certificate, but the policy trusts only {policy.describe()}"
        )
    try:
        key = PublicKey.from_certificate(leaf)
    except InvalidKey as error:
        raise VerificationError(f"the signing certificate's key is unusable: {error.message}") from error
    logged = _keyless_signature(bundle, leaf, key, bytes.fromhex(parse_sha256(digest)))
    match = policy.trusted_identity(leaf)
    signed_times = _signed_times(bundle, policy)
    entries = _logged_entries(bundle, policy.rekor_logs, [logged], signed_times.times)
    times = [*signed_times.times, *(moment for moment in entries if moment is not None)]
    if not times:
        unverified = f" ({'; '.join(signed_times.unverified)})" if signed_times.unverified else ""
        raise VerificationError(
            "the signature has no signed time: no verified inclusion promise and no RFC 3161 timestamp "
            f"from a trusted timestamp authority{unverified}; a Rekor v2 entry has no time of its own",
            hint="keyless signatures need a signed time to check the short-lived certificate against",
        )
    chain: list[x509.Certificate] = []
    for moment in times:
        chain = _chain_at(leaf, moment, trust_root)
    sigstore_cert.verify_sct(leaf, chain[1], trust_root.ct_logs)
    sigstore_cert.check_profile(leaf)
    statement = _statement(bundle.envelope, digest, predicate_type) if bundle.envelope else None
    return BundleOutcome(
        matches=[match], tlog_verified=True, statement=statement, log_indexes=_log_indexes(bundle, policy)
    )


def _log_indexes(bundle: Bundle, policy: TrustPolicy) -> tuple[int, ...]:
    """The indexes of the bundle's entries in trusted logs: the ones :func:`_logged_entries` verified."""
    known = {log.log_id for log in policy.rekor_logs}
    return tuple(entry.log_index for entry in bundle.tlog_entries if entry.log_id in known)


def verify_bundle(
    raw: bytes | str,
    *,
    digest: str,
    predicate_type: str | None,
    message_signature_ok: bool,
    policy: TrustPolicy,
) -> BundleOutcome:
    """Verify one bundle over the artifact ``digest`` (``sha256:<hex>``) against ``policy``.

    A DSSE bundle must carry an in-toto statement with ``digest`` among its subjects (and ``predicate_type``
    when given); a message-signature bundle must sign ``digest`` and is accepted only when
    ``message_signature_ok``.
    """
    bundle = parse_bundle(raw)
    if isinstance(bundle.content, MessageSignature) and not message_signature_ok:
        raise VerificationError("the bundle carries a message signature, not an attestation statement")
    if bundle.certificate is None:
        return _verify_keyed(bundle, digest, predicate_type, policy)
    return _verify_keyless(bundle, bundle.certificate, digest, predicate_type, policy)

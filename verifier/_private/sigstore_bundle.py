"""One Sigstore bundle (v0.1-v0.3), checked offline.

* Key-signed bundles (``verificationMaterial.publicKey``, as written by ``cosign sign --key`` v3 and
  sigstore-go): sigstore-python refuses them, so the signature (DSSE PAE or message signature), the in-toto
  statement and the Rekor v1 entry (SET + body) are checked here with ``cryptography``. The key hint is not
  used: every trusted key is tried.
* Keyless bundles (Fulcio certificate): sigstore-python's ``Verifier`` built from the pinned trusted root
  (certificate chain at the logged time, SCT, inclusion proof and checkpoint, SET, entry body), with the
  policy's identity rules plugged in as its verification policy. It makes no network call.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass

import sigstore.errors
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from pydantic import ValidationError
from sigstore.hashes import Hashed
from sigstore.models import Bundle as SigstoreBundle
from sigstore_models.bundle.v1 import Bundle as BundleModel
from sigstore_models.common.v1 import HashAlgorithm
from sigstore_models.rekor.v1 import TransparencyLogEntry

from verifier._private import rekor_entry
from verifier._private.sigstore_policy import SignerMatch, TrustPolicy
from verifier.digests import parse_sha256
from verifier.dsse import MAX_SIGNATURES, Envelope, EnvelopeSignature, pae
from verifier.errors import InputError, VerificationError
from verifier.intoto import Statement, statement_from_envelope
from verifier.keys import PublicKey


@dataclass(frozen=True, slots=True)
class BundleOutcome:
    """The trusted signers of one bundle, whether its log entry was verified, and its statement if any."""

    matches: list[SignerMatch]
    tlog_verified: bool
    statement: Statement | None


class _IdentityPolicy:
    """sigstore-python ``VerificationPolicy`` applying our identity rules and remembering the match."""

    def __init__(self, policy: TrustPolicy) -> None:
        self._policy = policy
        self.match: SignerMatch | None = None

    def verify(self, cert: x509.Certificate) -> None:
        match = self._policy.identity_match(cert)
        if match is None:
            raise sigstore.errors.VerificationError(
                f"the certificate identity is not trusted (trusted: {self._policy.describe()})"
            )
        self.match = match


def _check_statement(statement: Statement, digest: str, predicate_type: str | None) -> None:
    statement.require_subject(digest)
    if predicate_type is not None and statement.predicate_type != predicate_type:
        raise VerificationError(
            f"predicate type is {statement.predicate_type!r}, expected {predicate_type!r}"
        )


def _entry(model: TransparencyLogEntry) -> rekor_entry.LogEntry:
    if model.integrated_time is None or model.inclusion_promise is None:
        raise VerificationError(
            f"the {model.kind_version.kind}/{model.kind_version.version} log entry has no signed entry"
            " timestamp (a Rekor v2 entry), which trtguard cannot check offline for key-signed bundles"
        )
    return rekor_entry.LogEntry(
        body_b64=base64.b64encode(model.canonicalized_body).decode(),
        integrated_time=model.integrated_time,
        log_index=model.log_index,
        log_id=model.log_id.key_id,
        signed_entry_timestamp=model.inclusion_promise.signed_entry_timestamp,
    )


def _check_tlog(bundle: BundleModel, policy: TrustPolicy, check: rekor_entry.EntryCheck) -> None:
    entries = bundle.verification_material.tlog_entries
    if not entries:
        raise VerificationError("the bundle has no transparency log entry but the policy requires one")
    problems = []
    for model in entries:
        try:
            entry = _entry(model)
            rekor_entry.verify_set(entry, policy.rekor_logs)
            check(entry)
        except VerificationError as error:
            problems.append(error.message)
            continue
        return
    raise VerificationError("; ".join(problems))


def _logged_matches(
    bundle: BundleModel,
    policy: TrustPolicy,
    matches: list[SignerMatch],
    check: Callable[[str], rekor_entry.EntryCheck],
) -> list[SignerMatch]:
    """The matches whose own signature a verified log entry records; raises when there is none.

    Each key counts only through its own logged signature: an envelope signed by two trusted keys whose
    log entry records one of them proves nothing about the other.
    """
    logged = []
    problems: dict[str, None] = {}
    for match in matches:
        try:
            _check_tlog(bundle, policy, check(match.label))
        except VerificationError as error:
            problems[f"{match.label}: {error.message}" if len(matches) > 1 else error.message] = None
            continue
        logged.append(match)
    if not logged:
        raise VerificationError("; ".join(problems))
    return logged


def _verify_keyed(
    bundle: BundleModel,
    *,
    digest: str,
    predicate_type: str | None,
    message_signature_ok: bool,
    policy: TrustPolicy,
) -> BundleOutcome:
    statement = None
    if bundle.dsse_envelope is not None:
        model = bundle.dsse_envelope
        envelope = Envelope(
            payload_type=model.payload_type,
            payload=model.payload,
            signatures=tuple(EnvelopeSignature(sig=s.sig, keyid=s.keyid or "") for s in model.signatures),
        )
        if len(envelope.signatures) > MAX_SIGNATURES:
            raise VerificationError(
                f"the envelope carries {len(envelope.signatures)} signatures;"
                f" at most {MAX_SIGNATURES} are checked"
            )
        message = pae(envelope.payload_type, envelope.payload)
        signed_by = {
            name: [s.sig for s in envelope.signatures if key.verify(s.sig, message)]
            for name, key in policy.keys.items()
        }
        verified = {name: bool(sigs) for name, sigs in signed_by.items()}
    else:
        message_signature = bundle.message_signature
        if message_signature is None:  # the model guarantees one of the two
            raise VerificationError("the bundle carries neither a DSSE envelope nor a message signature")
        if not message_signature_ok:
            raise VerificationError("the bundle carries a message signature, not an attestation statement")
        expected = bytes.fromhex(parse_sha256(digest))
        logged_digest = message_signature.message_digest
        if logged_digest is not None and (
            logged_digest.algorithm != HashAlgorithm.SHA2_256 or logged_digest.digest != expected
        ):
            raise VerificationError(
                f"the bundle signs sha256:{logged_digest.digest.hex()}, not {digest}",
                hint="the signature belongs to another artifact",
            )
        signature = message_signature.signature
        verified = {
            name: key.verify_digest(signature, expected, hashes.SHA256()) for name, key in policy.keys.items()
        }
    matches = policy.key_matches(verified)
    if not matches:
        raise VerificationError(f"signature present but not made by any trusted key ({policy.describe()})")
    if bundle.dsse_envelope is not None:
        try:
            statement = statement_from_envelope(envelope)
        except InputError as error:
            raise VerificationError(error.message) from error
        _check_statement(statement, digest, predicate_type)
    if policy.require_tlog:
        if statement is not None:
            matches = _logged_matches(
                bundle,
                policy,
                matches,
                lambda name: (
                    lambda entry: _dsse_entry(entry, envelope.payload, signed_by[name], policy.keys[name])
                ),
            )
        else:
            matches = _logged_matches(
                bundle,
                policy,
                matches,
                lambda name: (
                    lambda entry: rekor_entry.check_hashedrekord(
                        entry, sha256_hex=parse_sha256(digest), signature=signature, key=policy.keys[name]
                    )
                ),
            )
    return BundleOutcome(matches=matches, tlog_verified=policy.require_tlog, statement=statement)


def _dsse_entry(entry: rekor_entry.LogEntry, payload: bytes, signatures: list[bytes], key: PublicKey) -> None:
    """The entry must record one of ``signatures`` (those ``key`` made) by ``key``."""
    problems = []
    for signature in signatures:
        try:
            rekor_entry.check_dsse(entry, payload=payload, signature=signature, key=key)
        except VerificationError as error:
            problems.append(error.message)
            continue
        return
    raise VerificationError(problems[0] if problems else "the envelope has no signature by this key")


def _verify_keyless(
    raw: bytes | str,
    is_dsse: bool,
    *,
    digest: str,
    predicate_type: str | None,
    message_signature_ok: bool,
    policy: TrustPolicy,
) -> BundleOutcome:
    trust_root = policy.trust_root
    if trust_root is None or not policy.identities:
        raise VerificationError(
            f"the bundle is signed with a certificate, but the policy trusts only {policy.describe()}"
        )
    if not is_dsse and not message_signature_ok:
        raise VerificationError("the bundle carries a message signature, not an attestation statement")
    identity_policy = _IdentityPolicy(policy)
    try:
        bundle = SigstoreBundle.from_json(raw)
        if is_dsse:
            payload_type, payload = trust_root.verifier.verify_dsse(bundle, identity_policy)
        else:
            hashed = Hashed(algorithm=HashAlgorithm.SHA2_256, digest=bytes.fromhex(parse_sha256(digest)))
            trust_root.verifier.verify_artifact(hashed, bundle, identity_policy)
    except (sigstore.errors.Error, ValueError) as error:
        # ValueError: sigstore-python parses certificates and entries without wrapping cryptography's errors.
        raise VerificationError(f"the keyless bundle does not verify: {error}") from error
    if identity_policy.match is None:  # sigstore-python returned without consulting the policy
        raise VerificationError("the keyless bundle's certificate identity was not checked")
    statement = None
    if is_dsse:
        envelope = Envelope(payload_type=payload_type, payload=payload, signatures=())
        try:
            statement = statement_from_envelope(envelope)
        except InputError as error:
            raise VerificationError(error.message) from error
        _check_statement(statement, digest, predicate_type)
    return BundleOutcome(matches=[identity_policy.match], tlog_verified=True, statement=statement)


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
    try:
        bundle = BundleModel.from_json(raw)
    except (ValidationError, ValueError) as error:
        raise VerificationError(
            "not a Sigstore bundle (v0.1-v0.3 JSON with verificationMaterial and a signature)"
        ) from error
    if bundle.verification_material.public_key is not None:
        return _verify_keyed(
            bundle,
            digest=digest,
            predicate_type=predicate_type,
            message_signature_ok=message_signature_ok,
            policy=policy,
        )
    return _verify_keyless(
        raw,
        bundle.dsse_envelope is not None,
        digest=digest,
        predicate_type=predicate_type,
        message_signature_ok=message_signature_ok,
        policy=policy,
    )

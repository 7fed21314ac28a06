"""Verifying the signatures found for an image, a blob or an attestation against a :class:`TrustPolicy`.

Re-exported by :mod:`verifier.signatures`, which describes the formats and the rules.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from verifier.base import Deadline, EvidenceUnavailable, InputError, VerificationError, parse_sha256
from verifier.crypto import MAX_SIGNATURES, Envelope, Statement, pae, statement_from_envelope, verify_envelope
from verifier.signatures import _rekor as rekor_entry
from verifier.signatures._bundle import require_subject
from verifier.signatures._bundle import verify_bundle as _verify_bundle
from verifier.signatures._classic import verify_classic, verify_signed
from verifier.signatures._policy import SignerMatch, TrustPolicy
from verifier.signatures._results import (
    COSIGN_SIGN_PREDICATE,
    CosignSignature,
    CountedSignature,
    LoggedCheck,
    NoSignatures,
    SignatureSource,
    VerificationResult,
)
from verifier.signatures.notation import ArtifactDescriptor, NotationSignature, verify_notation

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Outcome:
    label: str
    matches: Sequence[SignerMatch] = ()
    tlog_verified: bool = False
    statement: Statement | None = None
    problem: str | None = None
    source: SignatureSource = "envelope"
    index: int = 0
    log_index: int | None = None
    logged: tuple[LoggedCheck, ...] = ()
    valid_until: datetime | None = None


def _collect(
    outcomes: Sequence[_Outcome], policy: TrustPolicy, *, location: str | None
) -> VerificationResult:
    signers: dict[str, SignerMatch] = {}
    keys: dict[str, None] = {}
    identities: dict[str, None] = {}
    problems = [f"{o.label}: {o.problem}" for o in outcomes if o.problem]
    counted = []
    for outcome in outcomes:
        if policy.require_tlog and outcome.matches and not outcome.tlog_verified:
            # Enforced here, for every kind of signature: one without a verified log entry never counts.
            problems.append(f"{outcome.label}: no verified transparency log entry, which the policy requires")
            continue
        for match in outcome.matches:
            signers.setdefault(match.signer_id, match)
            (keys if match.kind == "key" else identities)[match.label] = None
        if outcome.matches:
            counted.append(outcome)
    if len(signers) < policy.threshold:
        raise VerificationError(
            f"{len(signers)} of {policy.threshold} required signatures from {policy.describe()}"
            + (f" ({'; '.join(problems)})" if problems else ""),
            location=location,
            hint="sign with the signers the policy trusts, or check the configured keys and identities",
        )
    statement = next((o.statement for o in counted if o.statement is not None), None)
    ends = [o.valid_until for o in counted if o.valid_until is not None]
    return VerificationResult(
        keys=tuple(keys),
        identities=tuple(identities),
        verified=len(signers),
        threshold=policy.threshold,
        tlog_verified=all(o.tlog_verified for o in counted),
        statement=statement,
        counted=tuple(
            CountedSignature(
                o.source, o.index, tuple(o.matches), o.log_index if o.tlog_verified else None, o.logged
            )
            for o in counted
        ),
        valid_until=min(ends, default=None),
    )


def _verify_statement_envelope(
    envelope: Envelope, image_digest: str, policy: TrustPolicy
) -> list[SignerMatch]:
    if len(envelope.signatures) > MAX_SIGNATURES:
        raise VerificationError(
            f"{len(envelope.signatures)} signatures; at most {MAX_SIGNATURES} are checked"
        )
    message = pae(envelope.payload_type, envelope.payload)
    matches = policy.key_matches(
        {
            name: any(key.verify(s.sig, message) for s in envelope.signatures)
            for name, key in policy.keys.items()
        }
    )
    if not matches:
        raise VerificationError("signature present but not made by any trusted key")
    statement = statement_from_envelope(envelope)
    require_subject(statement, image_digest)
    if statement.predicate_type != COSIGN_SIGN_PREDICATE:
        raise VerificationError(
            f"predicate type is {statement.predicate_type!r}, expected {COSIGN_SIGN_PREDICATE!r}"
        )
    return matches


def verify_image_signatures(
    image_digest: str,
    policy: TrustPolicy,
    *,
    classic: Sequence[CosignSignature] = (),
    bundles: Sequence[bytes | str] = (),
    envelopes: Sequence[Envelope] = (),
    notation: Sequence[NotationSignature] = (),
    notation_target: ArtifactDescriptor | None = None,
    repository: str | None = None,
    location: str | None = None,
    now: datetime | None = None,
    deadline: Deadline | None = None,
) -> VerificationResult:
    """Verify the signatures found for one image against ``policy``; distinct signers count together.

    ``classic`` are the layers of the ``.sig`` manifest; ``bundles`` the cosign v3 bundle referrers (DSSE
    statements with predicate ``https://sigstore.dev/cosign/sign/v1``, or message signatures over the
    manifest); ``envelopes`` bare DSSE envelopes carrying such statements (from an attestation folder).
    ``repository`` (``ImageReference.name``), when given, must be the repository named in classic payloads.
    A bare envelope carries no transparency log entry, so it never counts under ``policy.require_tlog``.
    ``notation`` are Notary Project envelopes (OCI referrers of artifact type
    ``application/vnd.cncf.notary.signature``), verified against ``policy.notation`` at ``now`` (default: the
    clock) for the image's ``repository`` (their registry scopes); they carry no log entry either. Their
    signed descriptor must be ``notation_target`` (the image manifest's media type, digest and size, as
    served): without it, none of them counts.
    Raises :class:`NoSignatures` when there is nothing at all, and refuses more than ``MAX_SIGNATURES`` in
    total (each one costs a verification per trusted key). Once ``deadline`` has passed, no further Notation
    envelope is verified: :class:`EvidenceUnavailable` (transient: not a verdict to cache; never an allow).
    """
    parse_sha256(image_digest, what="image digest")
    total = len(classic) + len(bundles) + len(envelopes) + len(notation)
    if not total:
        raise NoSignatures(
            f"no signature found for {image_digest}",
            location=location,
            hint="sign the image (cosign sign / trtguard sign) or check the registry path",
        )
    if total > MAX_SIGNATURES:
        raise VerificationError(
            f"{total} signatures found for {image_digest}; at most {MAX_SIGNATURES} are checked",
            location=location,
            hint="remove stale signatures from the registry",
        )
    outcomes = []
    for index, signature in enumerate(classic, start=1):
        label = f"signature {index}"
        try:
            matches, tlog = verify_classic(
                signature, image_digest=image_digest, repository=repository, policy=policy
            )
        except (VerificationError, InputError) as error:
            outcomes.append(_Outcome(label=label, problem=error.message))
            continue
        # The entry that was just verified (a classic signature carries one): its index is recorded.
        logged = (
            rekor_entry.entry_from_cosign_bundle(signature.rekor_bundle)
            if tlog and signature.rekor_bundle is not None
            else None
        )
        outcomes.append(
            _Outcome(
                label=label,
                matches=matches,
                tlog_verified=tlog,
                source="classic",
                index=index - 1,
                log_index=logged.log_index if logged is not None else None,
            )
        )
    for index, bundle in enumerate(bundles, start=1):
        label = f"bundle {index}"
        try:
            outcome = _verify_bundle(
                bundle,
                digest=image_digest,
                predicate_type=COSIGN_SIGN_PREDICATE,
                message_signature_ok=True,
                policy=policy,
            )
        except (VerificationError, InputError) as error:
            outcomes.append(_Outcome(label=label, problem=error.message))
            continue
        outcomes.append(
            _Outcome(
                label=label,
                matches=outcome.matches,
                tlog_verified=outcome.tlog_verified,
                source="bundle",
                index=index - 1,
                log_index=outcome.log_indexes[0] if outcome.log_indexes else None,
            )
        )
    for index, envelope in enumerate(envelopes, start=1):
        label = f"envelope {index}"
        try:
            matches = _verify_statement_envelope(envelope, image_digest, policy)
        except (VerificationError, InputError) as error:
            outcomes.append(_Outcome(label=label, problem=error.message))
            continue
        outcomes.append(_Outcome(label=label, matches=matches, source="envelope", index=index - 1))
    moment = now or datetime.now(UTC)
    if notation_target is not None and notation_target.digest != image_digest:
        raise InputError(f"the descriptor given for {image_digest} is of {notation_target.digest}")
    for index, found in enumerate(notation):
        if deadline is not None and deadline.remaining() <= 0:
            raise EvidenceUnavailable(
                f"ran out of time after verifying {index} of {len(notation)} Notation signatures",
                transient=True,
                location=location,
            )
        outcomes.append(
            _notation_outcome(
                f"Notation signature {index + 1}", index, found, notation_target, repository, policy, moment
            )
        )
    return _collect(outcomes, policy, location=location)


def _notation_outcome(
    label: str,
    index: int,
    signature: NotationSignature,
    target: ArtifactDescriptor | None,
    repository: str | None,
    policy: TrustPolicy,
    now: datetime,
) -> _Outcome:
    """One Notary Project signature against every Notation signer of ``policy`` (each with its own trust)."""
    if not policy.notation:
        return _Outcome(
            label=label, problem="the policy names no Notation signer", source="notation", index=index
        )
    if target is None:
        return _Outcome(
            label=label,
            problem="the image manifest's descriptor (media type and size) is unknown, so the descriptor the "
            "signature names cannot be compared with it (offline: fetch the folder again with "
            "`trtguard fetch-attestations`, which copies the manifest)",
            source="notation",
            index=index,
        )
    matches, reasons, logged, ends = [], [], [], []
    for name, trust in policy.notation.items():
        try:
            verified = verify_notation(signature, trust, descriptor=target, repository=repository, now=now)
        except (VerificationError, InputError) as error:
            reasons.append(f"{name}: {error.message}")
            continue
        except Exception as error:
            # The readers type-check every value (fuzzed: test_fuzz.py); should one still be missed, this
            # signature is refused, never counted, and the others are judged on their own.
            _log.exception("Notation signature %s could not be checked", signature.origin or label)
            reasons.append(f"{name}: the signature could not be checked ({type(error).__name__})")
            continue
        matches.append(
            SignerMatch(kind="notation", label=f"{name} ({verified.subject})", signer_id=verified.signer_id)
        )
        if verified.valid_until is not None:
            ends.append(verified.valid_until)
        logged += [
            LoggedCheck(name, check, verified.level, message)
            for check, message in zip(verified.logged_checks, verified.logged, strict=True)
        ]
    problem = None if matches else "; ".join(reasons)
    return _Outcome(
        label=label,
        matches=matches,
        problem=problem,
        source="notation",
        index=index,
        logged=tuple(logged),
        valid_until=min(ends, default=None),
    )


def verify_bundle(
    bundle: bytes | str,
    policy: TrustPolicy,
    *,
    digest: str,
    predicate_type: str | None = None,
    location: str | None = None,
) -> VerificationResult:
    """Verify one Sigstore bundle over the artifact ``digest`` (``sha256:<hex>``).

    With ``predicate_type`` the bundle must carry an in-toto statement of that type about ``digest``
    (an attestation); without it, a message signature over ``digest`` or a statement with ``digest`` among
    its subjects is accepted. The statement, if any, is returned in the result.
    """
    parse_sha256(digest, what="artifact digest")
    try:
        outcome = _verify_bundle(
            bundle,
            digest=digest,
            predicate_type=predicate_type,
            message_signature_ok=predicate_type is None,
            policy=policy,
        )
    except InputError as error:
        raise VerificationError(error.message, location=location) from error
    except VerificationError as error:
        raise VerificationError(error.message, location=location, hint=error.hint) from error
    return _collect(
        [
            _Outcome(
                label="bundle",
                matches=outcome.matches,
                tlog_verified=outcome.tlog_verified,
                statement=outcome.statement,
            )
        ],
        policy,
        location=location,
    )


def verify_blob_signature(
    signature: bytes,
    policy: TrustPolicy,
    *,
    digest: str,
    data: bytes | None = None,
    certificate: str | None = None,
    chain: str | None = None,
    rekor_bundle: str | None = None,
    location: str | None = None,
) -> VerificationResult:
    """Verify a classic cosign blob signature (``cosign sign-blob``) over the artifact ``digest``.

    ``data``, when given, are the artifact's bytes (Ed25519 signs the bytes, not a digest; its SHA-256 must
    be ``digest``). A keyless signature needs ``certificate`` (PEM) and ``rekor_bundle`` (the
    ``{SignedEntryTimestamp, Payload}`` JSON of the legacy cosign bundle) to be verified offline.
    """
    sha256 = bytes.fromhex(parse_sha256(digest, what="artifact digest"))
    if data is not None and hashlib.sha256(data).digest() != sha256:
        raise InputError("the artifact's bytes do not have the digest given for it", location=location)
    try:
        matches, tlog = verify_signed(
            signature,
            data=data,
            sha256=sha256,
            certificate=certificate,
            chain=chain,
            rekor_bundle=rekor_bundle,
            policy=policy,
        )
    except (VerificationError, InputError) as error:
        outcome = _Outcome(label="signature", problem=error.message)
    else:
        outcome = _Outcome(label="signature", matches=matches, tlog_verified=tlog)
    return _collect([outcome], policy, location=location)


def verify_attestation(
    envelope: Envelope,
    policy: TrustPolicy,
    *,
    subject_digest: str | None = None,
    predicate_type: str | None = None,
    location: str | None = None,
) -> VerificationResult:
    """Verify a DSSE attestation signed with keys: signatures (threshold), payload type, predicate, subject.

    DSSE envelopes carry no certificate or log entry, so only ``policy.keys`` can sign them and a policy
    that requires a transparency log cannot be met (use a Sigstore bundle for that).
    """
    if not envelope.signatures:
        raise NoSignatures("the attestation carries no signature", location=location)
    if policy.require_tlog:
        raise VerificationError(
            "the policy requires a transparency log entry, which a bare DSSE envelope cannot carry",
            location=location,
            hint="attach the attestation as a Sigstore bundle with a Rekor entry",
        )
    if not policy.keys:
        raise VerificationError(
            f"a DSSE envelope can only be verified with keys, and the policy trusts {policy.describe()}",
            location=location,
        )
    try:
        names = verify_envelope(envelope, policy.keys, threshold=policy.threshold)
    except VerificationError as error:
        raise VerificationError(error.message, location=location, hint=error.hint) from error
    statement = statement_from_envelope(envelope, location=location)
    if predicate_type is not None and statement.predicate_type != predicate_type:
        raise VerificationError(
            f"predicate type is {statement.predicate_type!r}, expected {predicate_type!r}",
            location=location,
            hint="this is a different kind of attestation",
        )
    if subject_digest is not None:
        try:
            require_subject(statement, subject_digest)
        except VerificationError as error:
            raise VerificationError(error.message, location=location, hint=error.hint) from error
    distinct = {policy.keys[name].key_id for name in names}
    return VerificationResult(
        keys=names,
        identities=(),
        verified=len(distinct),
        threshold=policy.threshold,
        tlog_verified=False,
        statement=statement,
    )

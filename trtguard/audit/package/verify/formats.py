"""OpenPGP and Notary Project signatures in an evidence package, checked with the included TrustedKeys.

A statement signed with OpenPGP is filed as an envelope without DSSE signatures (its payload: the exact bytes
signed) with one ``.asc`` file per detached signature; Notation signatures of an engine artifact are filed
as their envelopes (``notation-jws``, ``notation-cose``). They are verified with the TrustedKeys of the
included policies, as the evaluator verifies them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from policies.loader import PolicySet
from trtguard.audit.package.contents import AttestationFile, SignatureFile
from verifier.base import VerificationError
from verifier.dsse import Envelope, verify_envelope
from verifier.keys import PublicKey
from verifier.signatures import NotationSignature, TrustPolicy
from verifier.signatures.notation import COSE_MEDIA_TYPE, JWS_MEDIA_TYPE
from verifier.signatures.openpgp import OpenPGPKey, verify_detached

__all__ = ["notation_material", "notation_policies", "openpgp_keys", "statement_signers"]


def openpgp_keys(policy_set: PolicySet | None) -> dict[str, OpenPGPKey]:
    """The OpenPGP keys of the included policies, by name."""
    if policy_set is None:
        return {}
    return {ref: s.openpgp for ref, s in policy_set.signers.items() if s.openpgp is not None}


def notation_policies(policy_set: PolicySet | None) -> list[TrustPolicy]:
    """One trust policy per Notary Project signer of the included policies."""
    if policy_set is None:
        return []
    return [
        TrustPolicy(notation={ref: signer.notation})
        for ref, signer in policy_set.signers.items()
        if signer.notation is not None
    ]


def notation_material(signature: SignatureFile, data: bytes) -> list[NotationSignature]:
    """A Notation signature file as the verifier takes it (empty for the other kinds)."""
    media_type = {"notation-jws": JWS_MEDIA_TYPE, "notation-cose": COSE_MEDIA_TYPE}.get(signature.kind)
    return [NotationSignature(data, media_type, signature.path)] if media_type is not None else []


def statement_signers(
    envelope: Envelope,
    attestation: AttestationFile,
    members: Mapping[str, bytes],
    keys: Mapping[str, PublicKey],
    openpgp: Mapping[str, OpenPGPKey],
) -> tuple[str, ...]:
    """Names of the keys whose DSSE signature, or OpenPGP signature over the payload, verifies."""
    names: dict[str, None] = {}
    if keys and envelope.signatures:
        with contextlib.suppress(VerificationError):  # no key of these signed it: OpenPGP may still have
            names.update(dict.fromkeys(verify_envelope(envelope, keys)))
    for path in attestation.openpgp_signatures if openpgp else ():
        signature = members.get(path)
        if signature is None:
            continue
        try:
            names.update(dict.fromkeys(verify_detached(envelope.payload, signature, openpgp)))
        except VerificationError:
            continue
    return tuple(names)

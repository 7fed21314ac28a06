"""Notary Project signatures in an evidence package, checked with the included TrustedKeys.

Notation signatures of an engine artifact are filed as their envelopes (``notation-jws``, ``notation-cose``)
and verified with the Notation signers of the included policies, as the evaluator verifies them. (A
statement signed with OpenPGP is filed as an envelope without DSSE signatures with one ``.asc`` file per
detached signature; :mod:`verifier.verification` verifies it, as for every statement.)
"""

from __future__ import annotations

from policies.loader import PolicySet
from trtguard.audit.package.contents import SignatureFile
from verifier.signatures import NotationSignature, TrustPolicy
from verifier.signatures.notation import COSE_MEDIA_TYPE, JWS_MEDIA_TYPE

__all__ = ["notation_material", "notation_policies"]


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

"""Image signatures (cosign classic and bundles, DSSE ``cosign/sign`` statements, Notation) verified against
a rule's signers: the trust a rule gives, and the verified result
(:class:`~verifier.signatures.VerificationResult`).

Each image format's check lives with its format in :mod:`verifier.signatures`; this is where the evaluator
hands over the material found and gets back only what verified.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from verifier.base import Deadline, InputError

if TYPE_CHECKING:  # the verifiers load with the first signature checked (start-up time, issue 15)
    from verifier.evidence import ImageSignatures
    from verifier.signatures import TrustPolicy, VerificationResult


def image_trust(signers: Mapping[str, Any], threshold: int) -> TrustPolicy:
    """The signature policy of a rule's ``signers`` (name → a policy's signer) and ``threshold``.

    Keys, keyless identities (of one Sigstore instance: :class:`InputError` else) and Notation signers; a
    transparency log is required when any signer names a Rekor key."""
    roots = {s.trust_root.fingerprint: s.trust_root for s in signers.values() if s.trust_root is not None}
    if len(roots) > 1:
        raise InputError(
            f"keyless signers [{', '.join(signers)}] use different trusted roots",
            hint="list keyless signers of one Sigstore instance per rule",
        )
    from verifier.signatures import TrustPolicy  # noqa: PLC0415 - see TYPE_CHECKING above

    return TrustPolicy(
        keys={ref: s.public_key for ref, s in signers.items() if s.public_key is not None},
        identities=tuple(s.identity for s in signers.values() if s.identity is not None),
        notation={ref: s.notation for ref, s in signers.items() if s.notation is not None},
        threshold=threshold,
        trust_root=next(iter(roots.values()), None),
        rekor_keys=tuple(s.rekor_key for s in signers.values() if s.rekor_key is not None),
        require_tlog=any(s.rekor_key is not None for s in signers.values()),
    )


def verify_image(
    material: ImageSignatures,
    policy: TrustPolicy,
    *,
    repository: str | None,
    location: str | None,
    now: datetime,
    deadline: Deadline | None = None,
) -> VerificationResult:
    """The signatures found for one image, verified against ``policy`` at ``now``; distinct signers count
    together (:func:`~verifier.signatures.verify_image_signatures`). ``repository`` is the image's
    (``ImageReference.name``): a classic signature names the repository it was made for; ``deadline``
    bounds the Notation envelopes' checks (a passed one is transient, never an allow)."""
    from verifier.signatures import verify_image_signatures  # noqa: PLC0415 - see TYPE_CHECKING above

    return verify_image_signatures(
        material.digest,
        policy,
        classic=material.classic,
        bundles=material.bundles,
        envelopes=tuple(s.envelope for s in material.statements),
        notation=material.notation,
        notation_target=material.descriptor,
        repository=repository,
        location=location,
        now=now,
        deadline=deadline,
    )

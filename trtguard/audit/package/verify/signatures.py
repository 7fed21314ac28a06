"""One signature in an evidence package (cosign classic, Sigstore bundle or a signed DSSE statement), verified
for its artifact digest with the trust the included policies give."""

from __future__ import annotations

import binascii
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from policies.loader import PolicySet
from trtguard.audit.package.contents import EngineInfo, ImageInfo, SignatureFile
from trtguard.audit.package.verify.findings import Findings, Topic, error_text
from trtguard.audit.package.verify.formats import notation_material, notation_policies
from verifier.base import ImageReference, InputError, VerificationError
from verifier.crypto import Envelope, PublicKey
from verifier.evidence_documents import classic_signature_from_document
from verifier.signatures import CosignSignature, TrustPolicy, verify_image_signatures

if TYPE_CHECKING:
    from verifier.signatures.notation import TargetArtifact


def check_signature(
    members: Mapping[str, bytes],
    signature: SignatureFile,
    *,
    name: str,
    digest: str,
    references: Sequence[str],
    trust: Sequence[TrustPolicy],
    findings: Findings,
    topic: Topic,
) -> None:
    """Check one signature file of the artifact ``digest`` (known by ``references``; ``name`` in messages).

    It verifies when one of ``trust`` accepts it (see :func:`trust_policies`).
    """
    path = signature.path
    data = members.get(path)
    if data is None:
        findings.fail(topic, f"{name}: {path} is not in the package")
        return
    try:
        classic, bundles, envelopes = _signature_material(signature, data)
        notation = notation_material(signature, data)
    except (InputError, ValueError, KeyError, TypeError, binascii.Error, RecursionError) as error:
        findings.fail(topic, f"{name}: {path} is not a {signature.kind} signature: {error_text(error)}")
        return
    repository = _repository(references)
    problems = []
    for policy in trust:
        try:
            result = verify_image_signatures(
                digest,
                policy,
                classic=classic,
                bundles=bundles,
                envelopes=envelopes,
                notation=notation,
                notation_target=_signed_manifest(signature, digest),
                repository=repository,
                location=path,
            )
        except (VerificationError, InputError) as error:
            problems.append(error.message)
            continue
        findings.ok(topic, f"{name}: signature {path} verifies ({result.summary()})")
        return
    why = problems[0] if problems else "the included policies give no key or keyless identity"
    findings.fail(topic, f"{name}: signature {path} does not verify with the included trust: {why}")


def check_entry_signatures(
    members: Mapping[str, bytes],
    entry: EngineInfo | ImageInfo,
    *,
    name: str,
    trust: Sequence[TrustPolicy],
    findings: Findings,
    topic: Topic,
) -> None:
    """:func:`check_signature` for every signature file of the package's engine or image ``entry``."""
    for signature in entry.signatures:
        check_signature(
            members,
            signature,
            name=name,
            digest=entry.digest,
            references=entry.references,
            trust=trust,
            findings=findings,
            topic=topic,
        )


def _signed_manifest(signature: SignatureFile, digest: str) -> TargetArtifact | None:
    """The manifest descriptor a Notation signature file was exported with (None: not recorded)."""
    from verifier.signatures.notation import TargetArtifact  # noqa: PLC0415 - loaded with Notation signatures

    manifest = signature.manifest
    return TargetArtifact(manifest.media_type, digest, manifest.size) if manifest is not None else None


def signer_keys(policy_set: PolicySet | None) -> dict[str, PublicKey]:
    """The public keys of the included policies' signers, by signer reference (keyless signers have none)."""
    if policy_set is None:
        return {}
    return {ref: s.public_key for ref, s in policy_set.signers.items() if s.public_key is not None}


def trust_policies(keys: Mapping[str, PublicKey], policy_set: PolicySet | None) -> list[TrustPolicy]:
    """One policy for every key together, and one per keyless signer (each with its own trusted root)."""
    policies = [TrustPolicy(keys=dict(keys))] if keys else []
    for signer in policy_set.signers.values() if policy_set is not None else ():
        if signer.identity is not None and signer.trust_root is not None:
            rekor = (signer.rekor_key,) if signer.rekor_key is not None else ()
            policies.append(
                TrustPolicy(identities=(signer.identity,), trust_root=signer.trust_root, rekor_keys=rekor)
            )
    return policies + notation_policies(policy_set)


def _signature_material(
    signature: SignatureFile, data: bytes
) -> tuple[list[CosignSignature], list[bytes], list[Envelope]]:
    if signature.kind == "sigstore-bundle":
        return [], [data], []
    if signature.kind == "cosign-sign-dsse":
        return [], [], [Envelope.from_json(data, location=signature.path)]
    if signature.kind in ("notation-jws", "notation-cose"):
        return [], [], []  # read by notation_material
    document = json.loads(data)
    if not isinstance(document, dict):
        raise TypeError("not a JSON object")
    return [classic_signature_from_document(document, signature.path)], [], []


def _repository(references: Sequence[str]) -> str | None:
    for reference in references:
        try:
            return ImageReference.parse(reference).name
        except InputError:
            continue
    return None

"""GPU verification (``models.verification``): a signed attestation that the engine passed
``trtguard verify-engine --gpu`` on a GPU node, about this engine file."""

from __future__ import annotations

from policies.evaluation import Counted, EngineSubject, Evaluation
from policies.results import VerificationRecord
from policies.rules._findings import EngineFamily, Findings, Refusal
from policies.schema import VerificationRule
from policies.verified import VerifiedManifest
from verifier.base import ImageReference

__all__ = ["VERIFICATION"]


async def _check(run: Evaluation, found: Findings, engine: EngineSubject) -> EngineSubject:
    """The engine's GPU verification; about the file its build manifest describes, when there is one."""
    rule = engine.models.verification
    if rule is not None:
        manifest = engine.build.manifest if engine.build is not None else None
        await _judge(run, found, rule, engine.ref, manifest, engine.counted)
    return engine


#: ``models.verification``, an engine rule: judged with or without a build manifest rule.
VERIFICATION = EngineFamily(
    name="models.verification",
    applies=lambda policy: (models := policy.spec.models) is not None and models.verification is not None,
    check=_check,
)


async def _judge(
    run: Evaluation,
    found: Findings,
    rule: VerificationRule,
    ref: ImageReference,
    manifest: VerifiedManifest | None,
    counted: Counted,
) -> None:
    """A passing verification signed by the rule's keys (noted in ``counted``); with a manifest, about the
    file it describes."""
    engine_sha256 = manifest.manifest.output_engine.sha256 if manifest is not None else None
    verified = await found.check(
        "models.verification",
        run.gpu_verification(ref, rule, engine_sha256),
        refused=Refusal(
            "run `trtguard verify-engine --gpu --attest` on a GPU node and attach the attestation",
            hint_first=True,
        ),
    )
    if verified is not None:
        counted.verification(
            VerificationRecord(verified.digest, run.verified.signer_records(verified.signers))
        )

"""The build manifest (``models.buildManifest``): signed by the rule's keys, about this engine, recent enough.

Every other rule over an engine reads the manifest verified here; without one they are not judged (the
missing manifest is the violation).
"""

from __future__ import annotations

from datetime import timedelta

from policies.results import BuildManifestRecord
from policies.rules.evaluation import CLOCK_SKEW, Counted, Evaluation
from policies.rules.findings import Findings, Refusal
from policies.schema import BuildManifestRule
from policies.verified import VerifiedManifest
from verifier.base import ImageReference

__all__ = ["check_max_age", "verify"]


async def verify(
    run: Evaluation, found: Findings, rule: BuildManifestRule, ref: ImageReference, counted: Counted
) -> VerifiedManifest | None:
    """The engine's newest build manifest signed by the rule's keys (noted in ``counted``); None when there
    is none (a violation)."""
    keys = " or ".join(rule.keys)
    verified = await found.check(
        "models.buildManifest",
        run.build_manifest(ref, rule),
        # A manifest about another engine file says what to attach instead (the error's hint).
        refused=Refusal(
            f"sign the build manifest with {keys} and attach it to the engine (`trtguard attest --type "
            "https://trtguard.dev/attestations/engine-build/v1 --push`)",
            hint_first=True,
        ),
    )
    if verified is not None:
        manifest = verified.manifest
        counted.build_manifest(
            BuildManifestRecord(
                digest=verified.digest,
                signers=run.verified.signer_records(verified.signers),
                audit_id=manifest.audit_id,
                tensorrt_version=manifest.toolchain.tensorrt_version,
                precisions=tuple(sorted(manifest.precisions())),
            )
        )
    return verified


def check_max_age(
    run: Evaluation, found: Findings, rule: BuildManifestRule, verified: VerifiedManifest
) -> None:
    """``maxAge``: the engine was built recently enough, and not in the future."""
    max_age = found.policy.manifest_max_age
    if max_age is None:
        return
    built = verified.manifest.build_timestamp
    age = run.clock() - built
    if age < -CLOCK_SKEW:  # a manifest dated in the future would never expire
        message = f"the build manifest is dated {_duration(-age)} in the future ({built})"
        fix = "record the build time from a synchronised clock and sign the manifest again"
    elif age > max_age:
        message = f"the engine was built {_duration(age)} ago, more than the {rule.max_age} allowed"
        fix = "rebuild the engine and record a fresh build manifest"
    else:
        return
    found.add("models.buildManifest.maxAge", message, fix)


def _duration(delta: timedelta) -> str:
    """``3 days 4 h``, ``5 h 12 min``, ``40 s``: enough to read a max-age violation."""
    seconds = int(delta.total_seconds())
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    if days:
        return f"{days} days {hours} h"
    if hours:
        return f"{hours} h {rest // 60} min"
    return f"{rest // 60} min {rest % 60} s" if rest >= 60 else f"{rest} s"

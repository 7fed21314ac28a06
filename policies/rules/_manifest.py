"""The build manifest (``models.buildManifest``): signed by the rule's keys, about this engine, recent enough,
and (``onnxSignedBy``, ``calibrationSignedBy``) built from an ONNX model and calibration dataset their
publishers signed.

Every other rule over an engine reads the manifest verified here; without one they are not judged (the
missing manifest is the violation).
"""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import Protocol

from policies.evaluation import CLOCK_SKEW, Counted, EngineSubject, Evaluation, VerifiedBuild
from policies.results import BuildManifestRecord
from policies.rules._findings import EngineFamily, Findings, Refusal, has_build_manifest
from policies.schema import BuildManifestRule, SignersRule
from policies.verified import VerifiedManifest
from verifier.base import ImageReference

__all__ = ["BUILD_MANIFEST"]


class _InputFile(Protocol):
    """What the signed-inputs check reads of the manifest's ONNX model or calibration dataset."""

    @property
    def sha256(self) -> str: ...

    @property
    def name(self) -> str | None: ...

    @property
    def uri(self) -> str | None: ...


async def _check(run: Evaluation, found: Findings, engine: EngineSubject) -> EngineSubject | None:
    """The engine's build manifest, verified, recent enough, its inputs signed: the subject with that
    manifest for the rules after it, or None when there is no manifest they could judge."""
    rule = engine.models.build_manifest
    if rule is None:
        return engine
    verified = await _verify(run, found, rule, engine.ref, engine.counted)
    if verified is None:
        return None
    _check_max_age(run, found, rule, verified)
    await _check_inputs_signed(run, found, rule, engine.ref, verified)
    # Built directly rather than by dataclasses.replace (asked for every engine of every policy).
    return EngineSubject(engine.use, engine.ref, engine.models, engine.counted, VerifiedBuild(rule, verified))


#: ``models.buildManifest`` (with ``maxAge``, ``onnxSignedBy``, ``calibrationSignedBy``), an engine rule:
#: the first, as every rule over the manifest reads the one it verified.
BUILD_MANIFEST = EngineFamily(
    name="models.buildManifest",
    applies=has_build_manifest,
    check=_check,
)


async def _verify(
    run: Evaluation, found: Findings, rule: BuildManifestRule, ref: ImageReference, counted: Counted
) -> VerifiedManifest | None:
    """The engine's newest build manifest signed by the rule's keys (noted in ``counted``); None when there
    is none that can be judged (a violation).

    A manifest signed by the rule's keys that cannot be read cannot tell when it was built: which one is the
    newest cannot be told (``onError``). One dated in the future is refused: it would be the newest until
    that time came, and hide every build recorded before it. Manifests that do not verify fail only
    themselves, and are named in the decision's notes.
    """
    documents = await found.check(
        "models.buildManifest",
        run.build_manifests(ref, rule),
        # A manifest about another engine file says what to attach instead (the error's hint).
        refused=_refusal(tuple(rule.keys)),
    )
    if documents is None:
        return None
    for why in documents.refused:
        run.note(f"engine {ref}: a build manifest did not count: {why}")
    if documents.unreadable:
        found.add(
            "models.buildManifest",
            "cannot tell which build manifest describes the engine: one signed by "
            f"[{', '.join(rule.keys)}] cannot be read ({'; '.join(documents.unreadable)})",
            "remove the unreadable manifest from the engine (or attach it again readable)",
            indeterminate=True,
        )
        return None
    # Several signed manifests for one engine: the newest build is the one that describes it. Two different
    # ones of the same newest time cannot be told apart: judging either would depend on the order they were
    # found in, so it cannot tell (docs/scans.md, "Ties").
    readable = documents.readable
    if len(readable) == 1:  # the common case: the one manifest is the newest
        tied = list(readable)
        newest = tied[0].manifest.build_timestamp
    else:
        newest = max(v.manifest.build_timestamp for v in readable)
        tied = sorted((v for v in readable if v.manifest.build_timestamp == newest), key=lambda v: v.digest)
    if len(tied) > 1:
        found.add(
            "models.buildManifest",
            f"cannot tell which build manifest describes the engine: {', '.join(v.origin for v in tied)} "
            f"record the same build time ({newest}) and say different things",
            "remove the manifests that do not describe the engine, or sign one manifest per build",
            indeterminate=True,
        )
        return None
    [verified] = tied
    manifest = verified.manifest
    ahead = manifest.build_timestamp - run.clock()
    if ahead > CLOCK_SKEW:
        found.add(
            "models.buildManifest",
            f"the newest build manifest ({verified.origin}) is dated {_duration(ahead)} in the future "
            f"({manifest.build_timestamp}), so it cannot be judged, and it would hide every build recorded "
            "before it",
            "remove that manifest from the engine, record the build time from a synchronised clock and sign "
            "the manifest again",
        )
        return None
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


@functools.lru_cache(maxsize=1024)
def _refusal(keys: tuple[str, ...]) -> Refusal:
    """How a refused build manifest is worded for a rule's keys (made once per list of keys)."""
    fix = (
        f"sign the build manifest with {' or '.join(keys)} and attach it to the engine (`trtguard attest "
        "--type https://trtguard.dev/attestations/engine-build/v1 --push`)"
    )
    return Refusal(fix, hint_first=True)


def _check_max_age(
    run: Evaluation, found: Findings, rule: BuildManifestRule, verified: VerifiedManifest
) -> None:
    """``maxAge``: the engine was built recently enough (a manifest dated in the future is refused by
    :func:`_verify` already)."""
    max_age = found.policy.manifest_max_age
    if max_age is None:
        return
    age = run.clock() - verified.manifest.build_timestamp
    if age > max_age:
        found.add(
            "models.buildManifest.maxAge",
            f"the engine was built {_duration(age)} ago, more than the {rule.max_age} allowed",
            "rebuild the engine and record a fresh build manifest",
        )


async def _check_inputs_signed(
    run: Evaluation, found: Findings, rule: BuildManifestRule, ref: ImageReference, verified: VerifiedManifest
) -> None:
    """``onnxSignedBy`` and ``calibrationSignedBy``: the ONNX model and the calibration dataset the manifest
    names are each a file of a model-signing signature found beside the engine, signed by the rule's
    threshold of its signers, so the chain runs from the publishers through the build to the running engine.

    A manifest that records no calibration dataset has none to cover (``rules.int8RequiresCalibration``
    requires one of INT8 engines).
    """
    manifest = verified.manifest
    dataset = manifest.calibration.dataset if manifest.calibration is not None else None
    # A folder's tree digest is no file's digest, and a model signature records no file sizes to compute it
    # from: only a dataset recorded as one file can be covered.
    tree = dataset is not None and dataset.hash_method == "trtguard-tree-v1"
    inputs: tuple[tuple[SignersRule | None, str, str, _InputFile | None, str], ...] = (
        (rule.onnx_signed_by, "onnxSignedBy", "the ONNX model", manifest.onnx, ""),
        (
            rule.calibration_signed_by,
            "calibrationSignedBy",
            "the calibration dataset",
            dataset,
            " (its digest is a trtguard-tree-v1 folder digest, which no signed file has: record the dataset "
            "as one file, an archive, and sign that)"
            if tree
            else "",
        ),
    )
    for signers, field, kind, file, why in inputs:
        if signers is not None and file is not None:
            what = f"{kind} {file.name or file.uri or ''}".rstrip()
            await _check_covered(
                run, found, signers, ref, verified, field=field, what=what, sha256=file.sha256, why=why
            )


async def _check_covered(
    run: Evaluation,
    found: Findings,
    rule: SignersRule,
    ref: ImageReference,
    verified: VerifiedManifest,
    *,
    field: str,
    what: str,
    sha256: str,
    why: str = "",
) -> None:
    signatures = await run.model_signatures(ref, rule)
    for signature in signatures.readable:
        files = signature.covers(sha256)
        if files:
            run.note(
                f"engine {ref}: {what.removeprefix('the ')} is {signature.described(files[0])}, signed by "
                f"[{', '.join(signature.signers)}] ({signature.origin})"
            )
            return
    seen = [f"{s.origin} (signed by [{', '.join(s.signers)}])" for s in signatures.readable]
    reasons = "; ".join([*(f"{s} lists no file of that digest" for s in seen), *signatures.refused])
    found.add(
        f"models.buildManifest.{field}",
        f"{what} (sha256:{sha256}) that the build manifest ({verified.origin}) names is covered by no model "
        f"signature of [{', '.join(rule.keys)}]{why}" + (f": {reasons}" if reasons else ""),
        "build from the files the publisher signed, or attach the publisher's model signature "
        "(model_signing sign …) to the engine's attestations",
    )


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

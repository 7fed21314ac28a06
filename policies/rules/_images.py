"""Image rules (``spec.images``): every image must match a rule, and meet each rule it matches.

A rule may require a digest in the reference (``requireDigest``), allow only listed digests (``digests``),
and require signatures (``signatures``) and attestations (``attestations``, with conditions:
:mod:`policies.rules._attestations`) by its signers. The last three judge the digest that runs, so a tag is
resolved first.
"""

from __future__ import annotations

from policies.evaluation import Counted, Evaluation, ImageSubject
from policies.loader import CompiledAttestation, CompiledImageRule
from policies.results import AttestationRecord
from policies.rules import _attestations as attestations
from policies.rules._findings import Findings, ImageFamily, Refusal
from verifier.base import ImageReference

__all__ = ["IMAGES"]


async def _check(run: Evaluation, found: Findings, image: ImageSubject) -> None:
    """What the policy's image rules find about one image of the workload."""
    policy, use, ref = found.policy, image.use, image.ref
    rules = policy.rules_for(ref, use.field)
    if not rules:
        allowed = ", ".join(p.text for r in policy.image_rules if r.judges(use.field) for p in r.patterns)
        other_fields = sorted({f for r in policy.image_rules if r.selects(ref) for f in r.rule.fields or ()})
        scope = f"; rules for it judge only {', '.join(other_fields)} images" if other_fields else ""
        found.add(
            "images",
            f"{use.field} image is not allowed by any image rule (allowed there: {allowed or 'none'}){scope}",
            "use an allowed image, or add a rule for it to the policy",
        )
        return
    # A tag can be pinned only where a field holds the reference as written (ImageUse.prefix).
    pinnable = use.prefix is not None
    for compiled in rules:
        before = len(found.violations)
        digest = await _rule(run, found, compiled, ref, image.counted, pinnable)
        # Pinned only when the rule verified the digest and found nothing at all (a warning included).
        clean = len(found.violations) == before
        if run.pinning and compiled.pin_digest and digest is not None and clean:
            run.pin(use.path, digest)


#: ``spec.images``, an image rule.
IMAGES = ImageFamily(name="images", applies=lambda policy: bool(policy.image_rules), check=_check)


async def _rule(
    run: Evaluation,
    found: Findings,
    compiled: CompiledImageRule,
    ref: ImageReference,
    counted: Counted,
    pinnable: bool,
) -> str | None:
    """Judge ``ref`` by one rule; the digest it resolved a tag to, None when it resolved none.
    ``pinnable``: the field names the reference as written, so a patch can pin it."""
    rule_id = compiled.rule_id
    pin_digest = compiled.pin_digest
    if pin_digest and ref.digest is None and not pinnable:
        # Rewriting an image object or a composed name would be guessing at what the operator reads.
        found.add(
            f"{rule_id}.pinDigest",
            f"image is named by tag where it cannot be pinned: {found.path} names it as an image object, or "
            "composed with the fields beside it (repository, registry, tag, version, digest), which the "
            "mutating webhook does not rewrite",
            f"write the digest into the manifest yourself ({ref.name}@sha256:<digest>, printed by "
            f"`trtguard digest {ref}`), or name the image as one reference string",
        )
    elif pin_digest and ref.digest is None and not run.pinning:
        # The mutating webhook pins every tag this rule verifies: one that arrives unpinned skipped it.
        found.add(
            f"{rule_id}.pinDigest",
            "image is not pinned by digest, though the policy pins it at admission: the mutating webhook did "
            "not pin it (is trtguard's MutatingWebhookConfiguration installed, and did it verify the image?)",
            f"install the chart's mutating webhook, or pin it yourself: {ref.name}@sha256:<digest> "
            "(`trtguard check --fix` prints the manifest pinned)",
        )
    elif compiled.require_digest and ref.digest is None and not (run.pinning and pin_digest):
        found.add(
            f"{rule_id}.requireDigest",
            "image is not pinned by digest",
            f"pin it: {ref.name}@sha256:<digest> (printed by `trtguard digest {ref}`)",
        )
    # The checks below judge the digest that actually runs, so a tag must be resolved first.
    needs_digest = compiled.needs_digest
    if not needs_digest:
        return None
    # A reference that names its digest needs no question (and no question can fail).
    digest = ref.digest if ref.digest is not None else await found.check(needs_digest, run.digest(ref))
    if digest is None:
        return None
    pinned = ref.with_digest(digest)
    at_digest = found.about(image=str(pinned))
    digests, signatures = compiled.digests, compiled.signatures
    if digests is not None and pinned.digest not in digests:
        at_digest.add(
            f"{rule_id}.digests",
            f"digest {pinned.digest} is not in the allow-list",
            "use one of the digests the policy allows, or have the allow-list extended",
        )
    if signatures is not None:
        signed = await at_digest.check(
            f"{rule_id}.signatures",
            run.signatures(pinned, signatures),
            refused=Refusal(run.verified.signing_fix(signatures.keys)),
        )
        for record in signed.counted if signed is not None else ():
            counted.signature(record)
            for entry in record.logged:
                at_digest.logged(
                    f"{rule_id}.signatures",
                    f"the {record.format} signature {record.digest} by {entry.signer} counted, though its "
                    f"{entry.check} check failed, which verification level {entry.level} only logs: "
                    f"{entry.message}",
                    "sign the image again (a current signature), or set the signer's verificationLevel to "
                    "strict to refuse such signatures",
                )
    for alternatives in compiled.attestations:
        if len(alternatives) == 1:
            await _attestation(run, at_digest, rule_id, alternatives[0], pinned, counted)
        else:
            await _any_of(run, at_digest, rule_id, alternatives, pinned, counted)
    return digest if ref.digest is None else None


async def _any_of(
    run: Evaluation,
    found: Findings,
    rule_id: str,
    alternatives: tuple[CompiledAttestation, ...],
    pinned: ImageReference,
    counted: Counted,
) -> None:
    """``anyOf``: the entry holds when one alternative yields no violation at all (of any action, an
    ``onError`` or "cannot tell" one included), on documents no newer than those another alternative found
    violations in (an older clean scan in one format never overrules a newer finding in another:
    docs/scans.md); then the others' findings are dropped. When none holds, every alternative's findings
    are kept, each under its own rule id and action (and the notes name the alternative overruled)."""
    tried: list[tuple[CompiledAttestation, Findings, Counted, attestations.AttestationsJudged]] = []
    for alternative in alternatives:  # every one: a later one may hold newer evidence
        own = Findings(found.policy, path=found.path, image=found.image, engine=found.engine)
        own_counted = Counted()
        judged = await _attestation(run, own, rule_id, alternative, pinned, own_counted)
        tried.append((alternative, own, own_counted, judged))
    failed = [(a, j) for a, own, _, j in tried if own.violations]
    for alternative, own, own_counted, judged in tried:
        if own.violations:
            continue
        newer = [a for a, j in failed if j.outweighs(judged)]
        if not newer:
            for record in own_counted.attestations.values():
                counted.attestation(record)
            return
        run.note(
            f"image {pinned}: the {alternative.rule.predicate_type} alternative of an anyOf held, but on "
            f"documents no newer than the {', '.join(a.rule.predicate_type for a in newer)} one(s) it "
            "found violations in, so it does not overrule them"
        )
    for _, own, own_counted, _ in tried:
        found.violations.extend(own.violations)
        for record in own_counted.attestations.values():
            counted.attestation(record)


async def _attestation(
    run: Evaluation,
    found: Findings,
    rule_id: str,
    compiled: CompiledAttestation,
    pinned: ImageReference,
    counted: Counted,
) -> attestations.AttestationsJudged:
    """One attestation rule; returns what it judged (for ``anyOf``)."""
    rule = compiled.rule
    attestation_id = f"{rule_id}.attestations[{rule.predicate_type}]"
    if compiled.reads_documents:
        judged = await attestations.check(run, found, attestation_id, compiled, pinned)
        for document in judged.documents:
            signers = run.verified.signer_records(document.signers)
            counted.attestation(AttestationRecord(rule.predicate_type, document.digest, signers))
        return judged
    attested = await found.check(
        attestation_id,
        run.image_attestation(pinned, rule),
        refused=Refusal("attach the attestation to the image digest (`trtguard attest --push`)"),
    )
    if attested is not None:
        signers = run.verified.signer_records(attested.signers)
        counted.attestation(AttestationRecord(rule.predicate_type, attested.digest, signers))
    return attestations.AttestationsJudged()

"""policies.rules._findings: a check that cannot answer is a violation, worded the same way for every rule."""

from __future__ import annotations

import asyncio

import pytest

from policies.loader import CompiledPolicy, load_policy_set
from policies.results import Action
from policies.rules._findings import Findings, Refusal
from tests.policies.conftest import Material
from tests.policies.evaluation import images_policy
from verifier.base._errors import EvidenceUnavailable, TrtguardError, VerificationError


@pytest.fixture
def policy(material: Material) -> CompiledPolicy:
    """A policy whose action (Warn) and onError (Deny) differ, so a violation shows which one applied."""
    [compiled] = load_policy_set(material.policy(images_policy("Warn", "Deny"))).policies
    return compiled


async def _fails(error: TrtguardError) -> str:
    raise error


def _check(found: Findings, error: TrtguardError, refused: Refusal | None = None) -> object:
    return asyncio.run(found.check(("r.one", "r.two"), _fails(error), refused=refused))


def test_an_answer_is_returned_and_records_nothing(policy: CompiledPolicy) -> None:
    async def answer() -> str:
        return "sha256:ab"

    found = Findings(policy, image="img", path="spec.containers[0].image")
    assert asyncio.run(found.check("r", answer())) == "sha256:ab"
    assert found.violations == []


def test_unavailable_evidence_is_an_on_error_violation_for_each_rule(policy: CompiledPolicy) -> None:
    found = Findings(policy, image="img", path="p")
    assert _check(found, EvidenceUnavailable("registry down", hint="try later", transient=True)) is None
    assert [(v.rule, v.action, v.error) for v in found.violations] == [
        ("r.one", Action.DENY, True),
        ("r.two", Action.DENY, True),
    ]
    assert {(v.message, v.fix, v.image, v.path) for v in found.violations} == {
        ("could not be checked: registry down", "try later", "img", "p")
    }
    without_hint = Findings(policy, engine="eng", path="p")
    _check(without_hint, EvidenceUnavailable("offline", transient=False))
    assert without_hint.violations[0].fix == "retry when the registry is reachable"
    assert without_hint.violations[0].engine == "eng"


def test_refused_evidence_is_worded_by_the_refusal(policy: CompiledPolicy) -> None:
    refused = VerificationError("not signed", hint="the error's own hint")
    plain = Findings(policy, image="img", path="p")
    _check(plain, refused, Refusal("sign it"))
    assert {(v.message, v.fix, v.action, v.error) for v in plain.violations} == {
        ("not signed", "sign it", Action.WARN, False)
    }
    hinted = Findings(policy, image="img", path="p")
    _check(hinted, refused, Refusal("sign it", hint_first=True))
    assert hinted.violations[0].fix == "the error's own hint"
    _check(hinted, VerificationError("no hint here"), Refusal("sign it", hint_first=True))
    assert hinted.violations[-1].fix == "sign it"
    baseline = Findings(policy, engine="eng", path="p")
    _check(baseline, refused, Refusal("attach it", about="the previous engine is unusable", error=True))
    violation = baseline.violations[0]
    assert (violation.message, violation.action, violation.error) == (
        "the previous engine is unusable: not signed",
        Action.DENY,
        True,
    )


def test_refused_evidence_without_a_refusal_goes_to_the_caller(policy: CompiledPolicy) -> None:
    found = Findings(policy, image="img", path="p")
    with pytest.raises(VerificationError, match="not signed"):
        _check(found, VerificationError("not signed"))
    assert found.violations == []


def test_about_names_another_subject_in_the_same_findings(policy: CompiledPolicy) -> None:
    found = Findings(policy, image="nginx:1", path="p")
    found.add("r", "by tag", "fix")
    found.about(image="nginx@sha256:ab").add("r", "by digest", "fix")
    assert [(v.message, v.image) for v in found.violations] == [
        ("by tag", "nginx:1"),
        ("by digest", "nginx@sha256:ab"),
    ]

"""``trtguard policy test``: policy unit tests in the spirit of ``kyverno test``.

A test suite is a ``PolicyTest`` document (in any ``*.yaml`` file under the directory given) naming the
policies, the resources, an optional attestation folder, and the expected result of each resource — and
optionally exactly which (policy, rule) pairs must fire. Paths are relative to the test file.
"""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from policies.check import Outcome, check, read_resources
from policies.evaluator import PolicyEvaluator
from policies.loader import load_policy_set
from policies.requesters import Requester
from policies.results import Action, Decision
from verifier.base import InputError, TrtguardError, decode, load_documents
from verifier.evidence_folder import LocalEvidence


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True)


class ExpectedViolation(_Model):
    """A (policy, rule) pair that must fire."""

    policy: str
    rule: str


class ExpectedResult(_Model):
    """The expected outcome of one resource, named ``Kind/name`` or ``Kind/namespace/name``."""

    resource: str = Field(pattern=r"^[A-Za-z]+/([a-z0-9.-]+/)?[a-z0-9.-]+$")
    result: Literal["allow", "deny", "warn", "skip"]
    violations: list[ExpectedViolation] | None = Field(
        default=None, description="when given, exactly these Deny and Warn violations must fire"
    )


class TestRequester(_Model):
    """Who applies the suite's resources (as ``trtguard check --as USER --as-group GROUP``)."""

    username: str = Field(min_length=1)
    groups: list[str] = Field(default_factory=list)


class PolicyTestSpec(_Model):
    """``spec`` of a PolicyTest."""

    policies: list[str] = Field(min_length=1)
    resources: list[str] = Field(min_length=1)
    attestations: str | None = None
    namespace: str | None = None
    now: AwareDatetime | None = Field(default=None, description="the clock for maxAge rules")
    requester: TestRequester | None = Field(
        default=None, description="who applies the resources; absent: unknown (requester rules unverifiable)"
    )
    results: list[ExpectedResult] = Field(min_length=1)


class PolicyTestMetadata(_Model):
    """``metadata`` of a PolicyTest."""

    name: str


class PolicyTestDocument(_Model):
    """A policy test suite."""

    api_version: Literal["trtguard.dev/v1alpha1"]
    kind: Literal["PolicyTest"]
    metadata: PolicyTestMetadata
    spec: PolicyTestSpec


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One expected result checked."""

    suite: str
    resource: str
    passed: bool
    detail: str


@dataclass
class TestRun:
    """Every case of every suite, plus suites that could not run."""

    cases: list[CaseResult] = field(default_factory=list)
    errors: list[TrtguardError] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """2 when a suite could not run, 1 when a case failed, 0 when all passed."""
        if self.errors:
            return 2
        return 0 if all(c.passed for c in self.cases) else 1


def find_suites(root: Path) -> list[tuple[Path, PolicyTestDocument]]:
    """Every PolicyTest document under ``root`` (a file or a directory)."""
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml"))
    suites = []
    for path in files:
        for document in load_documents(decode(path.read_bytes(), str(path)), str(path)):
            data = document.data
            if isinstance(data, dict) and data.get("kind") == "PolicyTest":
                try:
                    suites.append((path, PolicyTestDocument.model_validate(data)))
                except ValidationError as error:
                    errors = error.errors(include_url=False)
                    problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors[:20])
                    problems += f"; and {len(errors) - 20} more" if len(errors) > 20 else ""
                    raise InputError(
                        f"invalid PolicyTest: {problems}", location=f"{path}:{document.line}"
                    ) from None
    if not suites:
        raise InputError(
            f"no PolicyTest documents under {root}", hint="see policies/README.md, 'Testing policies'"
        )
    return suites


def _verdict(decision: Decision | None) -> str:
    if decision is None or decision.unjudged is not None:
        return "skip"
    if not decision.allowed:
        return "deny"
    return "warn" if decision.warnings else "allow"


def _find(outcomes: list[Outcome], name: str, default_namespace: str | None) -> Outcome | None:
    parts = name.split("/")
    kind, namespace, resource = (
        (parts[0], None, parts[1]) if len(parts) == 2 else (parts[0], parts[1], parts[2])
    )
    for outcome in outcomes:
        found = outcome.resource
        # A resource that names no namespace is judged in the suite's (or "default"), so it is found there.
        effective = found.namespace or default_namespace or "default"
        if found.kind == kind and found.name == resource and namespace in (None, effective):
            return outcome
    return None


async def run_suite(
    path: Path, suite: PolicyTestDocument, *, now: datetime | None = None
) -> list[CaseResult]:
    """Run one suite at its own ``now``, else at ``now``, else at the real clock; raises
    :class:`TrtguardError` when its policies or inputs cannot be read."""
    base = path.parent
    spec = suite.spec
    policy_set = load_policy_set([base / p for p in spec.policies])
    evidence = LocalEvidence(base / spec.attestations if spec.attestations else None)
    moment: datetime | None = spec.now or now
    evaluator = PolicyEvaluator(
        policy_set, evidence, clock=(lambda: moment) if moment else datetime.now().astimezone
    )
    problems: list[InputError] = []
    resources = list(read_resources([str(base / r) for r in spec.resources], None, problems))
    if problems:
        raise problems[0]
    requester = spec.requester
    outcomes = await check(
        evaluator,
        resources,
        namespace=spec.namespace,
        requester=Requester.impersonated(requester.username, tuple(requester.groups)) if requester else None,
    )
    results = []
    for expected in spec.results:
        outcome = _find(outcomes, expected.resource, spec.namespace)
        name = suite.metadata.name
        if outcome is None:
            results.append(CaseResult(name, expected.resource, False, "no such resource in the inputs"))
            continue
        got = _verdict(outcome.decision)
        fired = sorted(
            {(v.policy, v.rule) for v in outcome.decision.violations if v.action is not Action.AUDIT}
            if outcome.decision
            else set()
        )
        if got != expected.result:
            reasons = "; ".join(v.one_line() for v in outcome.decision.violations) if outcome.decision else ""
            results.append(
                CaseResult(
                    name,
                    expected.resource,
                    False,
                    f"expected {expected.result}, got {got}" + (f": {reasons}" if reasons else ""),
                )
            )
            continue
        if expected.violations is not None:
            wanted = sorted({(v.policy, v.rule) for v in expected.violations})
            if wanted != fired:
                results.append(
                    CaseResult(
                        name,
                        expected.resource,
                        False,
                        f"expected violations {_pairs(wanted)}, got {_pairs(fired)}",
                    )
                )
                continue
        results.append(CaseResult(name, expected.resource, True, got))
    return results


def _pairs(pairs: list[tuple[str, str]]) -> str:
    return "[" + ", ".join(f"{p}/{r}" for p, r in pairs) + "]" if pairs else "none"


def run_tests(root: Path, *, now: datetime | None = None) -> TestRun:
    """Run every suite under ``root``; ``now`` is the clock of the suites that set none."""
    run = TestRun()
    for path, suite in find_suites(root):
        try:
            run.cases += asyncio.run(run_suite(path, suite, now=now))
        except TrtguardError as error:
            run.errors.append(
                TrtguardError(f"suite {suite.metadata.name}: {error}", location=str(path), hint=error.hint)
            )
    return run


def junit(run: TestRun) -> str:
    """JUnit XML of a test run: one testsuite per PolicyTest."""
    root = ET.Element("testsuites", name="trtguard policy test")
    suites: dict[str, ET.Element] = {}
    for result in run.cases:
        suite = suites.get(result.suite)
        if suite is None:
            suite = suites[result.suite] = ET.SubElement(root, "testsuite", name=result.suite)
        element = ET.SubElement(suite, "testcase", classname=result.suite, name=result.resource)
        if not result.passed:
            ET.SubElement(element, "failure", message=result.detail).text = result.detail
    for name, suite in suites.items():
        results = [c for c in run.cases if c.suite == name]
        suite.set("tests", str(len(results)))
        suite.set("failures", str(sum(not c.passed for c in results)))
    for error in run.errors:
        suite = ET.SubElement(root, "testsuite", name=error.location or "suite", tests="1", errors="1")
        element = ET.SubElement(suite, "testcase", classname="suite", name=error.location or "suite")
        ET.SubElement(element, "error", message=error.message).text = error.diagnostics()
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"

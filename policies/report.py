"""Output formats of ``trtguard check``: a table for people, JSON, JUnit XML and SARIF 2.1.0 for machines."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Any

from policies.check import CheckReport, Outcome
from policies.results import Action, Violation

FORMATS = ("table", "json", "junit", "sarif")

_SARIF_LEVEL = {Action.DENY: "error", Action.WARN: "warning", Action.AUDIT: "note"}


def render(report: CheckReport, fmt: str) -> str:
    """The report in format ``fmt`` (one of :data:`FORMATS`)."""
    renderers: dict[str, Callable[[CheckReport], str]] = {
        "table": _table,
        "json": _json,
        "junit": _junit,
        "sarif": _sarif,
    }
    return renderers[fmt](report)


def _title(outcome: Outcome) -> str:
    return outcome.resource.title


def _where(outcome: Outcome) -> str:
    return f"{outcome.resource.source}:{outcome.resource.line}"


def _table(report: CheckReport) -> str:
    lines: list[str] = []
    allowed = skipped = 0
    for outcome in report.outcomes:
        decision = outcome.decision
        if decision is None:
            skipped += 1
            lines.append(f"SKIP   {_title(outcome)} ({_where(outcome)}): {outcome.skipped}")
            continue
        verdict = "ALLOW " if decision.allowed else "DENY  "
        allowed += decision.allowed
        lines.append(f"{verdict} {_title(outcome)} ({_where(outcome)})")
        for violation in decision.violations:
            marker = {Action.DENY: "x", Action.WARN: "!", Action.AUDIT: "i"}[violation.action]
            subject = violation.image or violation.engine
            lines.append(
                f"  {marker} {violation.policy}/{violation.rule}" + (f"  {subject}" if subject else "")
            )
            lines.append(f"      {violation.message}")
            lines.append(f"      fix: {violation.fix}")
    for problem in report.problems:
        lines.append(f"ERROR  {problem.diagnostics()}")
    total = len(report.outcomes)
    lines.append(
        f"{total} resource{'s' if total != 1 else ''}: {allowed} allowed, {report.denied} denied, "
        f"{skipped} skipped, {len(report.problems)} input error{'s' if len(report.problems) != 1 else ''}"
        + (f"; policy revision {report.policy_revision}" if report.policy_revision else "")
    )
    return "\n".join(lines) + "\n"


def _outcome_json(outcome: Outcome) -> dict[str, Any]:
    if outcome.decision is None:
        resource = outcome.resource
        data: dict[str, Any] = {
            "kind": resource.kind,
            "namespace": resource.namespace,
            "name": resource.name,
            "allowed": True,
            "skipped": outcome.skipped,
            "violations": [],
            "warnings": [],
        }
    else:
        data = outcome.decision.to_json()
    data["source"] = _where(outcome)
    return data


def _json(report: CheckReport) -> str:
    document = [_outcome_json(o) for o in report.outcomes]
    document += [{"error": p.message, "location": p.location, "hint": p.hint} for p in report.problems]
    # One resource per line: readable in a CI log, and the C encoder (indent=None) keeps 10,000 fast.
    return "[\n" + ",\n".join(json.dumps(item) for item in document) + "\n]\n"


def _junit(report: CheckReport) -> str:
    failures = report.denied
    suites = ET.Element("testsuites", name="trtguard check")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="trtguard check",
        tests=str(len(report.outcomes) + len(report.problems)),
        failures=str(failures),
        errors=str(len(report.problems)),
        skipped=str(sum(1 for o in report.outcomes if o.decision is None)),
    )
    for outcome in report.outcomes:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=outcome.resource.kind,
            name=f"{_title(outcome)} ({_where(outcome)})",
        )
        decision = outcome.decision
        if decision is None:
            ET.SubElement(case, "skipped", message=outcome.skipped or "")
            continue
        if not decision.allowed:
            failure = ET.SubElement(case, "failure", message=decision.denials[0].one_line(), type="denied")
            failure.text = "\n".join(v.one_line() for v in decision.denials)
        others = [v.one_line() for v in decision.violations if v.action is not Action.DENY]
        if others:
            ET.SubElement(case, "system-out").text = "\n".join(others)
    for problem in report.problems:
        case = ET.SubElement(suite, "testcase", classname="input", name=problem.location or "input")
        ET.SubElement(case, "error", message=problem.message).text = problem.diagnostics()
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _sarif(report: CheckReport) -> str:
    rules: dict[str, dict[str, Any]] = {}
    results: list[dict[str, Any]] = []

    def add(violation: Violation, outcome: Outcome) -> None:
        rule_id = f"{violation.policy}/{violation.rule}"
        rules.setdefault(rule_id, {"id": rule_id, "shortDescription": {"text": rule_id}})
        subject = violation.image or violation.engine
        text = (
            f"{_title(outcome)}: {subject + ': ' if subject else ''}{violation.message}. Fix: {violation.fix}"
        )
        results.append(
            {
                "ruleId": rule_id,
                "level": _SARIF_LEVEL[violation.action],
                "message": {"text": text},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": outcome.resource.source},
                            "region": {"startLine": outcome.resource.line_of(violation.path)},
                        }
                    }
                ],
            }
        )

    for outcome in report.outcomes:
        for violation in outcome.decision.violations if outcome.decision else ():
            add(violation, outcome)
    notifications = [{"level": "error", "message": {"text": p.diagnostics()}} for p in report.problems]
    document = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "trtguard",
                        "informationUri": "https://trtguard.dev",
                        "rules": list(rules.values()),
                    }
                },
                "results": results,
                "invocations": [
                    {"executionSuccessful": not report.problems, "toolExecutionNotifications": notifications}
                ],
            }
        ],
    }
    return json.dumps(document, indent=2) + "\n"

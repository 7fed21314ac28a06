"""Output formats of ``trtguard check``: a table for people, JSON, JUnit XML, SARIF 2.1.0 and
``wgpolicyk8s.io`` PolicyReports (:mod:`policies.policy_report`) for machines.

The table shows every invisible or line-breaking character of what it prints as ``<U+XXXX>``
(:mod:`verifier.base._visible`); the machine formats keep the text as it is, escaped by their encoders.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import yaml

from policies.check import CheckReport, Outcome, error_lines, problem_lines
from policies.evaluator import HISTORY_NOT_CONSULTED
from policies.policy_report import Subject, policy_reports
from policies.results import MAX_LISTED, Action, ArtifactRecord, Violation
from verifier.base import InputError, visible

FORMATS = ("table", "json", "junit", "sarif", "policy-report")

_SARIF_LEVEL = {Action.DENY: "error", Action.WARN: "warning", Action.AUDIT: "note"}


def render(report: CheckReport, fmt: str, *, now: datetime | None = None) -> str:
    """The report in format ``fmt`` (one of :data:`FORMATS`); ``now`` stamps policy-report results (the
    current time when None)."""
    if fmt == "policy-report":
        return _policy_reports(report, now or datetime.now(UTC))
    renderers: dict[str, Callable[[CheckReport], str]] = {
        "table": _table,
        "json": _json,
        "junit": _junit,
        "sarif": _sarif,
    }
    return renderers[fmt](report)


def _policy_reports(report: CheckReport, now: datetime) -> str:
    """A YAML stream of the reports (``kubectl apply -f -`` takes it); resources that name no namespace are
    reported in the one they are judged in (``--namespace``, else ``default``, as check judges them)."""
    verdicts = []
    for outcome in report.outcomes:
        resource, decision = outcome.resource, outcome.decision
        namespace = (decision.namespace if decision is not None else None) or resource.namespace or "default"
        subject = Subject(str(resource.obj.get("apiVersion", "")), resource.kind, namespace, resource.name)
        verdicts.append((subject, outcome.result))
    return yaml_stream(policy_reports(verdicts, now=now, problems=report.problems))


def yaml_stream(documents: Iterable[Any]) -> str:
    """The documents as a YAML stream, each after a ``---`` line, as ``yaml.safe_dump`` (keys in their
    order, Unicode as it is) writes each one.

    libyaml's emitter writes them, where it is known to write what PyYAML's own writes (ten times faster:
    policy reports of 10,000 resources took 20 s); PyYAML's writes the others (see :func:`_emitted_alike`).
    """
    return "".join(
        "---\n"
        + yaml.dump(
            document,
            Dumper=_CDumper if _emitted_alike(document) else _PyDumper,
            sort_keys=False,
            allow_unicode=True,
        )
        for document in documents
    )


class _PyDumper(yaml.SafeDumper):
    """``yaml.SafeDumper`` that also quotes what Kubernetes reads as no string (:data:`_GO_YAML_V2`)."""


class _CDumper(yaml.CSafeDumper):
    """``yaml.CSafeDumper`` that also quotes what Kubernetes reads as no string (:data:`_GO_YAML_V2`)."""


#: Plain scalars that PyYAML's YAML 1.1 resolver reads as strings but go-yaml v2 does not (kubectl and the
#: API server read YAML with it, through sigs.k8s.io/yaml): a string written plain would come back a bool or
#: a number there (``--fix`` of an annotation ``"y"``: kubectl refuses the file). As its resolve.go: the
#: bools ``y Y n N``; from a sign or a digit on, with every ``_`` dropped, an integer of Go's syntax
#: (``strconv.ParseInt`` base 0: ``0b``/``0o``/``0x`` in either case, ``0`` octal) or a float of its
#: ``^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$``; from a dot on, a float. The patterns take
#: a little more (a number out of range, ``_`` wherever go-yaml's float parser may refuse it): quoting a
#: string never changes it. Added as implicit resolvers of the two dumpers alone (PyYAML's representer
#: quotes a string its resolver reads as another type; libyaml's emitter asks the same Python resolver),
#: so both still write the same bytes, and PyYAML's own dumpers and loaders are as they were.
_GO_YAML_V2 = (
    ("tag:yaml.org,2002:bool", r"^(?:y|Y|n|N)$", "yYnN"),
    (
        "tag:yaml.org,2002:int",
        r"^(?:[-+]_*)?(?:0_*(?:[bB]_*[01]|[oO]_*[0-7]|[xX]_*[0-9a-fA-F])[0-9a-fA-F_]*|[0-9][0-9_]*)$",
        "-+0123456789",
    ),
    (
        "tag:yaml.org,2002:float",
        r"^(?:[-+]_*)?(?:\._*[0-9][0-9_]*|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE]_*(?:[-+]_*)?[0-9][0-9_]*)?$",
        "-+0123456789.",
    ),
)
for _dumper in (_PyDumper, _CDumper):
    for _tag, _pattern, _first in _GO_YAML_V2:
        _dumper.add_implicit_resolver(_tag, re.compile(_pattern), list(_first))


#: Longest mapping key the two emitters are known to write alike (longer ones may be ``? `` keys in one).
_KEY_ALIKE = 64


def _emitted_alike(document: Any) -> bool:
    """Whether libyaml's emitter writes ``document`` as PyYAML's does: a map or list of JSON-like values
    (a list or map met again is an alias in both, named alike), every string printable ASCII, every key a
    non-empty one of at most :data:`_KEY_ALIKE` characters. Where the emitters differ (how a quoted string
    with escapes is folded, an empty key, when a long key becomes a ``? `` key, a scalar's document end)
    some of these is not so."""
    if type(document) is not dict and type(document) is not list:
        return False  # a document of one scalar ends with "..." in PyYAML's stream only
    seen: set[int] = set()
    pending: list[Any] = [document]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is str:
            if not (item.isascii() and item.isprintable()):
                return False
        elif kind is dict or kind is list:
            if id(item) in seen:
                continue
            seen.add(id(item))
            if kind is list:
                pending.extend(item)
                continue
            for key, value in item.items():
                if type(key) is not str or not 0 < len(key) <= _KEY_ALIKE or not key.isascii():
                    return False
                if not key.isprintable():
                    return False
                pending.append(value)
        elif kind not in _SCALARS:
            return False
    return True


_SCALARS = (int, float, bool, type(None))


def _title(outcome: Outcome) -> str:
    return outcome.resource.title


def _where(outcome: Outcome) -> str:
    return f"{outcome.resource.source}:{outcome.resource.line}"


def _table(report: CheckReport) -> str:
    lines: list[str] = []
    allowed = skipped = 0
    for outcome in report.outcomes:
        decision = outcome.result
        if isinstance(decision, InputError):
            lines += error_lines(f"{_title(outcome)} ({_where(outcome)})", decision)
            continue
        if outcome.unchecked:
            verdict = "FAIL  " if report.fail_unknown_kinds else "UNCHECKED"
            lines.append(f"{verdict} {_title(outcome)} ({_where(outcome)}): {decision.unjudged}")
            lines += [f"  ? {image.reference}  {image.path}" for image in decision.images]
            continue
        if decision.unjudged is not None:
            skipped += 1
            lines.append(f"SKIP   {_title(outcome)} ({_where(outcome)}): {decision.unjudged}")
            continue
        verdict = "ALLOW " if decision.allowed else "DENY  "
        if decision.allowed and not decision.matched_policies:
            verdict = "ALLOW (no policy applies)"
        allowed += decision.allowed
        lines.append(f"{verdict} {_title(outcome)} ({_where(outcome)})")
        for violation in decision.violations[:MAX_LISTED]:
            marker = {Action.DENY: "x", Action.WARN: "!", Action.AUDIT: "i"}[violation.action]
            subject = violation.image or violation.engine
            lines.append(
                f"  {marker} {violation.policy}/{violation.rule}" + (f"  {subject}" if subject else "")
            )
            if violation.path:
                lines.append(f"      at {violation.path}")
            lines.append(f"      {violation.message}")
            lines.append(f"      fix: {violation.fix}")
        if len(decision.violations) > MAX_LISTED:
            lines.append(f"  … and {len(decision.violations) - MAX_LISTED} more violations, not listed")
        if decision.allowed:  # what the mutating webhook pins before the object is admitted (check --fix)
            lines += [f"  pinned: {image.path} -> {image.pinned}" for image in decision.pins]
        lines += [f"  note: {note}" for note in decision.notes]
    lines += problem_lines(report.problems)
    total = len(report.outcomes)
    errors = report.errors
    lines.append(
        f"{total} resource{'s' if total != 1 else ''}: {allowed} allowed, {report.denied} denied, "
        f"{report.unchecked} of unknown kinds not checked, {skipped} skipped, "
        f"{errors} input error{'s' if errors != 1 else ''}"
        + (f"; policy revision {report.policy_revision}" if report.policy_revision else "")
    )
    # Names, references and messages come from the files checked: each line is one line, and shows what a
    # right-to-left override or an invisible character would hide (a newline in a name cannot forge one).
    return "\n".join(map(visible, lines)) + "\n"


def _outcome_json(
    outcome: Outcome, artifact_json: Callable[[ArtifactRecord], dict[str, Any]] | None = None
) -> dict[str, Any]:
    resource, result = outcome.resource, outcome.result
    if isinstance(result, InputError):
        data: dict[str, Any] = {
            "kind": resource.kind,
            "namespace": resource.namespace,
            "name": resource.name,
            "error": result.message,
            "location": result.location,
            "hint": result.hint,
        }
    else:
        data = result.to_json(artifact_json=artifact_json)
        if outcome.unchecked:
            data["unknown_kind"] = True
    data["source"] = _where(outcome)
    return data


#: JSON forms of artifact records kept by :class:`_ArtifactForms`, at most.
_FORMS_KEPT = 4096


class _ArtifactForms:
    """``ArtifactRecord.to_json``, each form made once for records that are equal (the resources of one
    report name the same few images and engines, verified alike, again and again: 10,000 resources, a
    few dozen forms). A form is shared by every decision naming the record, so it is only encoded, never
    changed; records are typed dataclasses, so equal records have equal forms. Each form's JSON text is
    kept beside it (by the form's ``id``: a kept form is alive, so no other object has its ``id``; both are
    forgotten together)."""

    def __init__(self) -> None:
        self._forms: dict[ArtifactRecord, dict[str, Any]] = {}
        self._texts: dict[int, str] = {}

    def __call__(self, record: ArtifactRecord) -> dict[str, Any]:
        form = self._forms.get(record)
        if form is None:
            if len(self._forms) >= _FORMS_KEPT:
                self._forms.clear()  # bounded: a report of many different artifacts makes them again
                self._texts.clear()
            form = self._forms[record] = record.to_json()
            self._texts[id(form)] = json.dumps(form)
        return form

    def text(self, form: dict[str, Any]) -> str:
        """``json.dumps(form)`` of a form this made (one made before it forgot them is encoded again)."""
        text = self._texts.get(id(form))
        return json.dumps(form) if text is None else text


def _json(report: CheckReport) -> str:
    forms = _ArtifactForms()
    lines = [_json_line(_outcome_json(o, forms), forms) for o in report.outcomes]
    lines += [
        json.dumps({"error": p.message, "location": p.location, "hint": p.hint}) for p in report.problems
    ]
    # One resource per line: readable in a CI log, and the C encoder (indent=None) keeps 10,000 fast.
    return "[\n" + ",\n".join(lines) + "\n]\n"


def _json_line(data: dict[str, Any], forms: _ArtifactForms) -> str:
    """``json.dumps(data)``, the lists of image and engine forms joined from their kept texts (most of a
    line: encoding them again for each resource was two thirds of the JSON report's time). The keys before
    and after them are encoded as they are; any other shape is encoded whole."""
    keys = list(data)
    at = keys.index("images") if "images" in data else -1
    images, engines = data.get("images"), data.get("engines")
    if (
        at < 1
        or at + 2 >= len(keys)
        or keys[at + 1] != "engines"
        or not isinstance(images, list)
        or not isinstance(engines, list)
    ):
        return json.dumps(data)
    head = json.dumps({key: data[key] for key in keys[:at]})
    tail = json.dumps({key: data[key] for key in keys[at + 2 :]})
    return (
        f'{head[:-1]}, "images": [{", ".join([forms.text(f) for f in images])}], '
        f'"engines": [{", ".join([forms.text(f) for f in engines])}], {tail[1:]}'
    )


def _junit(report: CheckReport) -> str:
    # Imported here: the XML parser's import costs more than a whole `check` of one file in another format.
    import xml.etree.ElementTree as ET  # noqa: PLC0415

    failures = report.denied + (report.unchecked if report.fail_unknown_kinds else 0)
    suites = ET.Element("testsuites", name="trtguard check")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="trtguard check",
        tests=str(len(report.outcomes) + len(report.problems)),
        failures=str(failures),
        errors=str(report.errors),
        skipped=str(
            sum(
                1
                for o in report.outcomes
                if o.skipped is not None and not (o.unchecked and report.fail_unknown_kinds)
            )
        ),
    )
    for outcome in report.outcomes:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=outcome.resource.kind,
            name=f"{_title(outcome)} ({_where(outcome)})",
        )
        decision = outcome.result
        if isinstance(decision, InputError):
            ET.SubElement(case, "error", message=decision.message).text = decision.diagnostics()
            continue
        if decision.unjudged is not None:
            images = "\n".join(f"{image.reference}  {image.path}" for image in decision.images)
            if outcome.unchecked and report.fail_unknown_kinds:
                ET.SubElement(case, "failure", message=decision.unjudged, type="unknown-kind").text = images
            else:
                ET.SubElement(case, "skipped", message=decision.unjudged).text = images or None
            continue
        # At most MAX_LISTED violations, as the table and JSON list: a workload built to make thousands must
        # not make a report of megabytes.
        listed, unlisted = decision.violations[:MAX_LISTED], _not_listed(decision.violations)
        if not decision.allowed:
            failure = ET.SubElement(case, "failure", message=decision.denials[0].one_line(), type="denied")
            failure.text = "\n".join(
                [v.one_line() for v in listed if v.action is Action.DENY] + ([unlisted] if unlisted else [])
            )
        others = [v.one_line() for v in listed if v.action is not Action.DENY]
        others += [unlisted] if unlisted and decision.allowed else []
        others += [f"note: {note}" for note in decision.notes]
        if others:
            ET.SubElement(case, "system-out").text = "\n".join(others)
    for problem in report.problems:
        case = ET.SubElement(suite, "testcase", classname="input", name=problem.location or "input")
        ET.SubElement(case, "error", message=problem.message).text = problem.diagnostics()
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _not_listed(violations: Sequence[Violation]) -> str:
    """What a report says of the violations past :data:`MAX_LISTED` (nothing when there are none)."""
    left = len(violations) - MAX_LISTED
    return f"… and {left} more violations, not listed" if left > 0 else ""


def _location(uri: str, line: int) -> dict[str, Any]:
    return {"physicalLocation": {"artifactLocation": {"uri": uri}, "region": {"startLine": max(line, 1)}}}


def _input_location(problem: InputError) -> list[dict[str, Any]]:
    """Where an input error is, when its location is ``file:line[:column]``."""
    source, _, rest = (problem.location or "").partition(":")
    line = rest.split(":", 1)[0]
    return [_location(source, int(line))] if source and line.isdigit() else []


def _sarif(report: CheckReport) -> str:
    rules: dict[str, dict[str, Any]] = {}
    results: list[dict[str, Any]] = []

    def add(rule_id: str, level: str, text: str, locations: list[dict[str, Any]]) -> None:
        rules.setdefault(rule_id, {"id": rule_id, "shortDescription": {"text": rule_id}})
        results.append({"ruleId": rule_id, "level": level, "message": {"text": text}, "locations": locations})

    for outcome in report.outcomes:
        resource, decision = outcome.resource, outcome.result
        if isinstance(decision, InputError):
            add(
                "trtguard/input", "error", decision.diagnostics(), [_location(resource.source, resource.line)]
            )
            continue
        if outcome.unchecked:
            level = "error" if report.fail_unknown_kinds else "warning"
            for image in decision.images:
                text = f"{_title(outcome)}: {image.reference} at {image.path} was not checked"
                text += f" ({decision.unjudged})"
                add(
                    "trtguard/unknown-kind",
                    level,
                    text,
                    [_location(resource.source, resource.line_of(image.path))],
                )
            continue
        for violation in decision.violations[:MAX_LISTED]:
            subject = violation.image or violation.engine
            about = f"{subject}: " if subject else ""
            text = f"{_title(outcome)}: {about}{violation.message}. Fix: {violation.fix}"
            add(
                f"{violation.policy}/{violation.rule}",
                _SARIF_LEVEL[violation.action],
                text,
                [_location(resource.source, resource.line_of(violation.path))],
            )
        unlisted = _not_listed(decision.violations)
        if unlisted:  # as severe as the worst of those left out, so a cut never lowers the run's level
            worst = min(decision.violations[MAX_LISTED:], key=lambda v: list(_SARIF_LEVEL).index(v.action))
            add(
                "trtguard/not-listed",
                _SARIF_LEVEL[worst.action],
                f"{_title(outcome)}: {unlisted}",
                [_location(resource.source, resource.line)],
            )
        for note in decision.notes:
            # What the verdict rests on (or does not): a check without history may differ from the webhook.
            rule_id = "trtguard/history-not-consulted" if note == HISTORY_NOT_CONSULTED else "trtguard/note"
            add(rule_id, "note", f"{_title(outcome)}: {note}", [_location(resource.source, resource.line)])
    notifications = [
        {"level": "error", "message": {"text": p.diagnostics()}, "locations": _input_location(p)}
        for p in report.problems
    ]
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
                    {"executionSuccessful": not report.errors, "toolExecutionNotifications": notifications}
                ],
            }
        ],
    }
    return json.dumps(document, indent=2) + "\n"

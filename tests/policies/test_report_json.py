"""policies/report.py: ``check --format json``, each line joined from the kept texts of its image and engine
forms, is byte for byte the line ``json.dumps`` makes of the whole outcome (issue 31)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies import report
from policies.check import CheckReport, Outcome, Resource
from policies.results import (
    Action,
    ArtifactRecord,
    BuildManifestRecord,
    Decision,
    SignatureRecord,
    SignerRecord,
    Violation,
)
from verifier.base import InputError, load_documents

TEXT = st.one_of(st.sampled_from(["", "a", "x" * 40, '"', "\\", "é", "\u2028", "\x00"]), st.text(max_size=12))
OPTIONAL = st.one_of(st.none(), TEXT)
SIGNATURES = st.lists(
    st.builds(
        SignatureRecord,
        format=st.sampled_from(["dsse", "notation"]),
        digest=TEXT,
        signers=st.lists(st.builds(SignerRecord, key=TEXT, key_id=TEXT), max_size=2).map(tuple),
        tlog_index=st.one_of(st.none(), st.integers()),
    ),
    max_size=2,
).map(tuple)
IMAGES = st.builds(
    ArtifactRecord,
    reference=st.sampled_from(["r1", "r2@sha256:" + "a" * 64, "é"]),
    digest=OPTIONAL,
    path=st.sampled_from(["spec.containers[0].image", "spec.volumes[0].image.reference"]),
    container=OPTIONAL,
    signatures=SIGNATURES,
    pinned=st.one_of(st.none(), st.just("r1:t@sha256:" + "b" * 64)),
)
ENGINES = st.builds(
    ArtifactRecord,
    reference=st.sampled_from(["e1", "e2"]),
    digest=OPTIONAL,
    path=TEXT,
    name=OPTIONAL,
    containers=st.lists(TEXT, max_size=2).map(tuple),
    engine=st.just(True),
    build_manifests=st.lists(
        st.builds(
            BuildManifestRecord,
            digest=TEXT,
            signers=st.just(()),
            audit_id=TEXT,
            tensorrt_version=TEXT,
            precisions=st.lists(TEXT, max_size=2).map(tuple),
        ),
        max_size=1,
    ).map(tuple),
    confirmed_by=st.lists(TEXT, max_size=2).map(tuple),
    model=OPTIONAL,
)
VIOLATIONS = st.builds(
    Violation,
    policy=TEXT,
    rule=TEXT,
    message=TEXT,
    fix=TEXT,
    action=st.sampled_from(list(Action)),
    image=OPTIONAL,
    path=OPTIONAL,
)
DECISIONS = st.builds(
    Decision,
    kind=TEXT,
    namespace=OPTIONAL,
    name=OPTIONAL,
    policy_revision=TEXT,
    matched_policies=st.lists(TEXT, max_size=3).map(tuple),
    violations=st.lists(VIOLATIONS, max_size=12).map(tuple),
    images=st.lists(IMAGES, max_size=4).map(tuple),
    engines=st.lists(ENGINES, max_size=3).map(tuple),
    notes=st.lists(TEXT, max_size=2).map(tuple),
    unjudged=OPTIONAL,
)
RESULTS = st.one_of(
    DECISIONS,
    st.builds(InputError, TEXT, location=OPTIONAL, hint=OPTIONAL),
)


def _report(results: list[Decision | InputError], problems: list[InputError]) -> CheckReport:
    [document] = load_documents("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", "in.yaml")
    resource = Resource(obj=document.data, source="in.yaml", document=document)
    return CheckReport(outcomes=[Outcome(resource, result) for result in results], problems=problems)


def _expected(check: CheckReport) -> str:
    """The report as ``json.dumps`` writes each outcome whole (the forms made anew for every record)."""
    lines: list[Any] = [report._outcome_json(o) for o in check.outcomes]
    lines += [{"error": p.message, "location": p.location, "hint": p.hint} for p in check.problems]
    return "[\n" + ",\n".join(json.dumps(line) for line in lines) + "\n]\n"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    results=st.lists(RESULTS, max_size=6),
    problems=st.lists(st.builds(InputError, TEXT, location=OPTIONAL), max_size=2),
    kept=st.sampled_from([1, 2, 4096]),
)
def test_the_json_report_is_each_outcome_dumped_whole(
    results: list[Decision | InputError], problems: list[InputError], kept: int
) -> None:
    check = _report(results, problems)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(report, "_FORMS_KEPT", kept)  # forms forgotten between and within decisions too
        assert report.render(check, "json") == _expected(check)


def test_a_line_of_another_shape_is_dumped_whole() -> None:
    forms = report._ArtifactForms()
    record = ArtifactRecord("r", None, "spec.containers[0].image")
    form = forms(record)
    for data in (
        {"images": [form], "engines": [], "notes": []},  # nothing before the images
        {"kind": "Pod", "images": [form], "engines": []},  # nothing after the engines
        {"kind": "Pod", "engines": [], "images": [form], "notes": []},  # another order
        {"kind": "Pod", "images": (form,), "engines": [], "notes": []},  # not a list
        {"kind": "Pod", "notes": []},
    ):
        assert report._json_line(data, forms) == json.dumps(data)
    assert forms.text({"a": 1}) == '{"a": 1}'  # a form it did not make (or forgot) is encoded

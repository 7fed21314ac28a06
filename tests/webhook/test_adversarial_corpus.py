"""The standing adversarial corpus (tests/data/600-adversarial-corpus.yaml) through `check` and `serve`.

Every case gets its expected verdict from ``trtguard check`` (all cases in one file, in two orders, and each
file alone) and from ``trtguard serve`` over TLS (one AdmissionReview per case, in two shuffled orders), and
the two paths agree violation for violation: the same resource gives the same verdict whatever the path
and whatever came before it. The corpus's own ``policies`` are loaded beside the bundled ones by both
paths; a case with ``old`` is an UPDATE, which only ``serve`` can be sent (``sub_resource``: of that
subresource, ``ephemeralcontainers`` as ``kubectl debug`` sends it).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import random
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import DATA
from tests.support.harness import SERVICE, WebhookProcess, review
from tests.support.kserve import predictor_pod
from trtguard.cli import main
from trtguard.demo.material import OFF_LIST_IMAGE, SIDECAR_IMAGES, TENSORRT_IMAGE, Material

CORPUS = DATA / "600-adversarial-corpus.yaml"

#: (policy, rule, action) of one violation.
Finding = tuple[str, str, str]


@dataclass(frozen=True)
class Case:
    """One corpus entry, with the placeholders of the run filled in."""

    id: str
    expect: str
    rules: tuple[str, ...]
    paths: tuple[str, ...]
    text: str
    resource: Mapping[str, Any] | None
    unknown_kind: bool = False
    old: Mapping[str, Any] | None = None
    sub_resource: str | None = None

    @property
    def name(self) -> str:
        """``Kind/name`` of the resource, as both paths report it."""
        assert self.resource is not None
        return f"{self.resource['kind']}/{self.resource['metadata']['name']}"


def _fill(text: str, material: Material) -> str:
    values = {
        "$TENSORRT_HEX": TENSORRT_IMAGE.split("@sha256:")[1],
        "$TENSORRT": TENSORRT_IMAGE,
        "$SIDECAR": SIDECAR_IMAGES[0],
        "$NGINX": OFF_LIST_IMAGE,
        "$ENGINE_FP16": material.engines["fp16"],
        "$ENGINE_UNSIGNED": material.engines["unsigned"],
        "$ENGINE_INT8_UNCALIBRATED": material.engines["int8-uncalibrated"],
        "$ENGINE_INT8_LAUNDERED": material.engines["int8-laundered"],
        "$ENGINE_INT8_SUCCESSOR": material.engines["int8-successor"],
    }
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    return text


def load_cases(material: Material) -> list[Case]:
    """The corpus with this run's image and engine references."""
    document = yaml.safe_load(CORPUS.read_text())
    cases = []
    for entry in document["cases"]:
        raw = entry.get("raw")
        resource = _repeated(entry.get("resource"), entry.get("repeat"))
        text = _fill(raw if raw is not None else yaml.safe_dump(resource, sort_keys=False), material)
        cases.append(
            Case(
                id=entry["id"],
                expect=entry["expect"],
                rules=tuple(entry.get("rules", ())),
                paths=tuple(entry.get("paths", ("check", "serve"))),
                text=text,
                resource=yaml.safe_load(text) if raw is None else None,
                unknown_kind=entry.get("unknown_kind", False),
                old=yaml.safe_load(_fill(yaml.safe_dump(entry["old"]), material)) if "old" in entry else None,
                sub_resource=entry.get("sub_resource"),
            )
        )
    return cases


def _repeated(resource: Any, repeat: Mapping[str, Any] | None) -> Any:
    """``resource`` with the one item of the list at ``repeat["path"]`` repeated ``repeat["count"]`` times
    (a ``name`` gets the item's index), for inputs too large to write out."""
    if repeat is None:
        return resource
    *parents, key = repeat["path"].split(".")
    node = resource
    for part in parents:
        node = node[part]
    [model] = node[key]
    node[key] = [
        {**copy.deepcopy(model), "name": f"{model['name']}-{i}"} if "name" in model else copy.deepcopy(model)
        for i in range(repeat["count"])
    ]
    return resource


@pytest.fixture(scope="module")
def corpus_policies(demo_material: Material, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled policies with the demo keys, and the corpus's own policies beside them, in one folder."""
    folder = tmp_path_factory.mktemp("corpus-policies") / "policies"
    shutil.copytree(demo_material.policies, folder)
    document = yaml.safe_load(CORPUS.read_text())
    (folder / "corpus.yaml").write_text(yaml.safe_dump_all(document.get("policies", []), sort_keys=False))
    return folder


@pytest.fixture(scope="module")
def corpus_webhook(
    demo_material: Material, corpus_policies: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WebhookProcess]:
    """``trtguard serve`` over TLS with the bundled policies and the corpus's own."""
    process = WebhookProcess(
        [
            *("--policies", str(corpus_policies)),
            *("--attestations", str(demo_material.attestations)),
            *("--self-signed", "tls", "--san", SERVICE, "--decision-log", "sqlite:///decisions.db"),
        ],
        tmp_path_factory.mktemp("corpus-webhook"),
    )
    process.start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def cases(demo_material: Material) -> list[Case]:
    return load_cases(demo_material)


def run_check(
    material: Material, policies: Path, *files: Path, unknown_kinds: str = "judge"
) -> tuple[int, list[dict[str, Any]]]:
    """``trtguard check --format json`` in this process, with ``policies`` (the bundled and the corpus's):
    exit status and the results."""
    out = io.StringIO()
    args = ["check", "--policies", str(policies), "--attestations", str(material.attestations)]
    args += ["--unknown-kinds", unknown_kinds]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        status = main([*args, "--format", "json", *map(str, files)])
    text = out.getvalue()
    return status, json.loads(text) if text.strip() else []


def findings(violations: Sequence[Mapping[str, Any]]) -> set[Finding]:
    return {(v["policy"], v["rule"], v["action"]) for v in violations}


def assert_expected(case: Case, allowed: bool, found: set[Finding], path: str) -> None:
    denials = {f"{policy}/{rule}" for policy, rule, action in found if action == "Deny"}
    assert allowed == (case.expect == "allow"), f"{case.id} via {path}: {sorted(denials)}"
    missing = [rule for rule in case.rules if rule not in denials]
    assert not missing, f"{case.id} via {path}: {missing} not among {sorted(denials)}"


def _by_name(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{r['kind']}/{r['name']}": r for r in results}


@pytest.fixture(scope="module")
def check_verdicts(
    cases: list[Case],
    demo_material: Material,
    corpus_policies: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[bool, set[Finding]]]:
    """Each resource case's verdict from `check`: the same in one file (in both orders) and alone."""
    folder = tmp_path_factory.mktemp("corpus")
    resources = [c for c in cases if c.resource is not None and "check" in c.paths]
    verdicts: dict[str, tuple[bool, set[Finding]]] = {}
    for order in (resources, resources[::-1]):
        together = folder / "together.yaml"
        together.write_text("\n---\n".join(c.text for c in order))
        _, results = run_check(demo_material, corpus_policies, together)
        by_name = _by_name(results)
        for case in order:
            result = by_name[_flattened_name(case)]
            verdict = (result["allowed"], findings(result["violations"]))
            assert verdicts.setdefault(case.id, verdict) == verdict, f"{case.id}: order changed the verdict"
    for case in resources:
        alone = folder / f"{case.id}.yaml"
        alone.write_text(case.text)
        _, [result] = run_check(demo_material, corpus_policies, alone)
        assert (result["allowed"], findings(result["violations"])) == verdicts[case.id], case.id
    return verdicts


def _flattened_name(case: Case) -> str:
    """The name `check` reports: a List is reported by the resources inside it."""
    resource = case.resource
    assert resource is not None
    while resource.get("kind") == "List":
        [resource] = resource["items"]
    return f"{resource['kind']}/{resource['metadata']['name']}"


def _ids(path: str) -> Iterator[str]:
    document = yaml.safe_load(CORPUS.read_text())
    for entry in document["cases"]:
        if path in entry.get("paths", ("check", "serve")):
            yield entry["id"]


def _entry(case_id: str) -> dict[str, Any]:
    document = yaml.safe_load(CORPUS.read_text())
    [entry] = [e for e in document["cases"] if e["id"] == case_id]
    return dict(entry)


@pytest.mark.parametrize("case_id", list(_ids("check")))
def test_check_gives_the_expected_verdict(
    case_id: str,
    cases: list[Case],
    check_verdicts: dict[str, tuple[bool, set[Finding]]],
    demo_material: Material,
    corpus_policies: Path,
    tmp_path: Path,
) -> None:
    [case] = [c for c in cases if c.id == case_id]
    if case.resource is not None:
        allowed, found = check_verdicts[case.id]
        assert_expected(case, allowed, found, "check")
        return
    path = tmp_path / "input.yaml"
    path.write_text(case.text)
    status, results = run_check(demo_material, corpus_policies, path)
    if case.expect == "error":
        assert status == 2, f"{case.id}: exit {status}, {results}"
    else:
        [result] = results
        assert_expected(case, result["allowed"], findings(result["violations"]), "check")


@pytest.mark.parametrize("case_id", [c for c in _ids("check") if "unknown_kind" in _entry(c)])
def test_plain_check_lists_unknown_kinds_as_unchecked(
    case_id: str, cases: list[Case], demo_material: Material, corpus_policies: Path, tmp_path: Path
) -> None:
    [case] = [c for c in cases if c.id == case_id]
    path = tmp_path / "input.yaml"
    path.write_text(case.text)
    status, [result] = run_check(demo_material, corpus_policies, path, unknown_kinds="warn")
    assert status == 0 and result["unknown_kind"] is True and result["violations"] == []
    assert result["skipped"].startswith(f"{_flattened_name(case).split('/')[0]} (")
    assert result["images"], "the images found must be listed"
    assert run_check(demo_material, corpus_policies, path, unknown_kinds="fail")[0] == 1


async def test_serve_gives_the_verdict_of_check_in_any_order(
    cases: list[Case],
    check_verdicts: dict[str, tuple[bool, set[Finding]]],
    corpus_webhook: WebhookProcess,
) -> None:
    served = [c for c in cases if "serve" in c.paths]
    orders = [random.Random(seed).sample(served, len(served)) for seed in (1, 2)]
    async with corpus_webhook.client() as client:
        for order in orders:
            for case in order:
                assert case.resource is not None
                if case.old is None:
                    body = review(obj=case.resource)
                else:
                    body = review(
                        obj=case.resource, old=case.old, operation="UPDATE", sub_resource=case.sub_resource
                    )
                response = (await client.post(body)).json()["response"]
                annotation = response.get("auditAnnotations", {}).get("violations", "[]")
                found = findings([v for v in json.loads(annotation) if "more" not in v])
                assert_expected(case, response["allowed"], found, "serve")
                if case.id in check_verdicts:
                    assert (response["allowed"], found) == check_verdicts[case.id], (
                        f"{case.id}: serve ≠ check"
                    )


def test_the_pods_kserve_makes_from_modelcar_services_get_their_verdicts(
    cases: list[Case],
    check_verdicts: dict[str, tuple[bool, set[Finding]]],
    demo_material: Material,
    corpus_policies: Path,
    tmp_path: Path,
) -> None:
    """A differential test: the Pod KServe makes from each modelcar InferenceService of the corpus
    (tests/support/kserve.py) gets the verdict of the InferenceService, violation for violation."""
    pods = {
        case.id: pod
        for case in cases
        if case.resource is not None
        and case.resource.get("kind") == "InferenceService"
        and case.id in check_verdicts
        and (pod := predictor_pod(case.resource)) is not None
    }
    assert len(pods) >= 3, sorted(pods)
    for case_id, pod in pods.items():
        pod["metadata"]["name"] = case_id
    rendered = tmp_path / "pods.yaml"
    rendered.write_text(yaml.safe_dump_all(list(pods.values()), sort_keys=False))
    _, results = run_check(demo_material, corpus_policies, rendered)
    for result in results:
        verdict = (result["allowed"], findings(result["violations"]))
        assert verdict == check_verdicts[result["name"]], f"{result['name']}: Pod ≠ InferenceService"

"""``trtguard check`` over real operator manifests (tests/data/501-operator-manifests, SOURCES.md there).

Every document of every file is reported, in every output format, without a traceback: resources of the
built-in and shipped kinds with exactly the images an independent walk finds in them, each at its real JSON
path; resources of other kinds listed as unchecked with theirs (or skipped, with why, when they name none);
malformed files as input errors. tests/data/502-operator-corpus-expected.json holds the whole answer.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import DATA, REPO
from trtguard.cli import main

CORPUS = DATA / "501-operator-manifests"
EXPECTED = DATA / "502-operator-corpus-expected.json"
FILES = sorted(str(path) for path in CORPUS.rglob("*.yaml"))
#: Every image must be pinned: most of the corpus is denied, which is beside the point here.
POLICY = """\
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: corpus}
spec:
  images:
    - {name: pinned, match: ["*"], requireDigest: true}
"""


def run(tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str, *extra: str) -> tuple[int, str, str]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    status = main(["check", "--policies", str(policy), "--format", fmt, *extra, *FILES])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def outcome(result: dict[str, Any]) -> str:
    if "error" in result:
        return "error"
    if result.get("unknown_kind"):
        return "unchecked"
    if "skipped" in result:
        return "skipped"
    return "allow" if result["allowed"] else "deny"


def summary(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the corpus test pins: per reported item, where, what, and its images with their paths."""
    return [
        {
            "source": (r.get("source") or r.get("location") or "").removeprefix(f"{REPO}/"),
            "kind": r.get("kind"),
            "name": r.get("name"),
            "outcome": outcome(r),
            "images": [[i["path"], i["reference"]] for i in r.get("images", [])],
            **({"why": r["skipped"]} if "skipped" in r else {}),
            **({"error": r["error"]} if "error" in r else {}),
        }
        for r in results
    ]


def oracle(node: Any, path: str = "", top: bool = True) -> set[tuple[str, str]]:
    """Every image an object names, found without trtguard's code: ``image`` strings, image volume
    references and ``oci://`` URIs, outside the top-level metadata and status."""
    found: set[tuple[str, str]] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if top and key in ("metadata", "status"):
                continue
            here = f"{path}.{key}" if path else key
            if key == "image" and isinstance(value, str) and value:
                found.add((here, value))
            elif key == "image" and isinstance(value, dict) and isinstance(value.get("reference"), str):
                found.add((f"{here}.reference", value["reference"]))
            elif isinstance(value, str) and value.startswith("oci") and "://" in value:
                found.add((here, value.split("://", 1)[1]))
            found |= oracle(value, here, top=False)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found |= oracle(value, f"{path}[{index}]", top=False)
    return found


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("corpus")
    policy = folder / "policy.yaml"
    policy.write_text(POLICY)
    out = folder / "report.json"
    status = main(["check", "--policies", str(policy), "--format", "json", "-o", str(out), *FILES])
    assert status == 2  # the corpus holds malformed files: reported, and the run says so
    data: list[dict[str, Any]] = json.loads(out.read_text())
    return data


def test_the_corpus_gives_the_expected_answer(results: list[dict[str, Any]]) -> None:
    assert summary(results) == json.loads(EXPECTED.read_text())


def test_every_document_of_every_file_is_reported(results: list[dict[str, Any]]) -> None:
    reported = Counter((r.get("source") or r.get("location") or "").split(":")[0] for r in results)
    assert set(reported) == set(FILES)
    for file in FILES:
        try:
            documents = [d for d in yaml.safe_load_all(Path(file).read_text()) if d is not None]
        except yaml.YAMLError:
            continue  # the file's own count is what the error-tolerant reader makes of it, pinned above
        assert reported[file] == len(documents), file


def test_known_kinds_give_exactly_the_images_an_independent_walk_finds(results: list[dict[str, Any]]) -> None:
    objects = {}
    for file in FILES:
        try:
            for document in yaml.safe_load_all(Path(file).read_text()):
                if isinstance(document, dict):
                    objects[(file, document.get("kind"), (document.get("metadata") or {}).get("name"))] = (
                        document
                    )
        except yaml.YAMLError:
            continue
    compared: Counter[str] = Counter()
    for result in results:
        obj = objects.get((result.get("source", "").split(":")[0], result.get("kind"), result.get("name")))
        if obj is None or "error" in result:
            continue
        images = {(i["path"], i["reference"]) for i in result["images"]}
        assert images == oracle(obj), (result["source"], result["kind"], result["name"])
        compared[outcome(result)] += 1
    assert compared["deny"] + compared["allow"] > 200 and compared["unchecked"] > 40, compared


def test_unknown_kinds_are_listed_never_allowed_silently(results: list[dict[str, Any]]) -> None:
    unchecked = [r for r in results if r.get("unknown_kind")]
    kinds = {r["kind"] for r in unchecked}
    assert {"LLMInferenceService", "Experiment", "XGBoostJob", "JobTemplate"} <= kinds
    for result in unchecked:
        assert result["images"] and result["violations"] == []
        assert "is not a workload kind trtguard knows" in result["skipped"] or "only at" in result["skipped"]
    # The old KServe API keeps its pod templates elsewhere: it is not read with v1beta1's paths.
    [old] = [r for r in unchecked if r["kind"] == "InferenceService"]
    assert "only at v1beta1, not serving.kserve.io/v1alpha2" in old["skipped"]


def test_a_volcano_job_is_not_a_batch_job(results: list[dict[str, Any]]) -> None:
    volcano = [r for r in results if r.get("kind") == "Job" and "volcano" in r.get("source", "")]
    assert volcano and all(outcome(r) in ("allow", "deny") for r in volcano)
    for result in volcano:
        assert all(i["path"].startswith("spec.tasks[") for i in result["images"]), result["source"]
        assert not any("spec.template" in (v.get("path") or "") for v in result["violations"])


@pytest.mark.parametrize("fmt", ["table", "junit", "sarif"])
def test_every_format_reports_the_whole_corpus_without_a_traceback(
    fmt: str, results: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(tmp_path, capsys, fmt)
    assert status == 2 and "Traceback" not in out + err
    resources = [r for r in results if "kind" in r]
    errors = len(results) - len([r for r in resources if "error" not in r])
    if fmt == "table":
        summary_line = out.splitlines()[-1]
        assert summary_line.startswith(f"{len(resources)} resources: ")
        assert (
            f"{sum(1 for r in resources if r.get('unknown_kind'))} of unknown kinds not checked"
            in summary_line
        )
        assert f", {errors} input errors; policy revision sha256:" in summary_line
    elif fmt == "junit":
        suite = ET.fromstring(out).find("testsuite")
        assert suite is not None and suite.get("tests") == str(len(results))
        assert suite.get("errors") == str(errors)
    else:
        run_ = json.loads(out)["runs"][0]
        assert len(run_["invocations"][0]["toolExecutionNotifications"]) == errors
        assert run_["invocations"][0]["executionSuccessful"] is False
        unknown = [r for r in run_["results"] if r["ruleId"] == "trtguard/unknown-kind"]
        assert len(unknown) == sum(len(r["images"]) for r in resources if r.get("unknown_kind"))
        assert {r["level"] for r in unknown} == {"warning"}


def test_unknown_kinds_fail_the_run_when_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = [f for f in FILES if f.endswith("helm/kserve-resources.yaml")]
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY.replace("requireDigest: true", "requireDigest: false"))
    base = ["check", "--policies", str(policy), *good]
    assert main(base) == 0
    out = capsys.readouterr().out
    assert "UNCHECKED ClusterStorageContainer default" in out
    assert "  ? kserve/storage-initializer:v0.20.0  spec.container.image" in out
    assert "1 of unknown kinds not checked" in out
    assert main([*base, "--unknown-kinds", "fail"]) == 1
    assert "FAIL   ClusterStorageContainer default" in capsys.readouterr().out

"""policies.testing (``trtguard policy test``): the library's own suites, failures, broken suites, JUnit."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from policies.loader import load_policy_set
from policies.testing import junit, run_tests
from trtguard.cli import main

LIBRARY_TESTS = Path(__file__).resolve().parents[2] / "policies" / "library" / "tests"


def test_library_suites_all_pass() -> None:
    run = run_tests(LIBRARY_TESTS)
    assert run.errors == []
    failed = [c for c in run.cases if not c.passed]
    assert failed == []
    assert {c.suite for c in run.cases} == {
        "trusted-base-images",
        "signed-images",
        "signed-build-manifest",
        "int8-calibration",
        "same-toolchain",
        "scanned-images",
        "builtin-vulnerabilities",
        "builtin-components",
        "builtin-document",
        "builtin-any-of",
        "gpu-fit",
        "gitops-deployers-argocd",
        "gitops-deployers-person",
        "gitops-deployers-cronjob-controller",
        "gitops-deployers-unknown",
        "change-control",
    }
    assert run.exit_code == 0


@pytest.fixture
def suite_copy(tmp_path: Path) -> Path:
    # The policies folder's layout: the suites name starter policies and templates by relative paths.
    root = tmp_path / "policies"
    shutil.copytree(LIBRARY_TESTS.parent, root / "library")
    shutil.copytree(LIBRARY_TESTS.parents[1] / "templates", root / "templates")
    return root / "library" / "tests"


def test_wrong_expectation_fails_with_the_reason(
    suite_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    test_file = suite_copy / "int8-calibration" / "trtguard-test.yaml"
    test_file.write_text(
        test_file.read_text().replace(
            "- resource: Pod/staging/fp8\n      result: deny",
            "- resource: Pod/staging/fp8\n      result: allow",
        )
    )
    status = main(
        ["policy", "test", str(suite_copy / "int8-calibration"), "--junit", str(suite_copy / "j.xml")]
    )
    out = capsys.readouterr().out
    assert status == 1
    assert "FAIL  int8-calibration: Pod/staging/fp8: expected allow, got deny" in out
    assert "models.rules.precisions" in out
    suites = ET.parse(suite_copy / "j.xml").getroot()
    failures = suites.findall(".//failure")
    assert len(failures) == 1


def test_expected_violations_must_match_exactly(suite_copy: Path) -> None:
    test_file = suite_copy / "same-toolchain" / "trtguard-test.yaml"
    test_file.write_text(
        test_file.read_text().replace("rule: models.rules.toolchain}", "rule: models.required}", 1)
    )
    run = run_tests(suite_copy / "same-toolchain")
    [failed] = [c for c in run.cases if not c.passed]
    assert "expected violations [engine-toolchain-matches-runtime/models.required]" in failed.detail


def test_missing_resource_is_a_failure(suite_copy: Path) -> None:
    test_file = suite_copy / "signed-images" / "trtguard-test.yaml"
    test_file.write_text(test_file.read_text().replace("Pod/prod/signed", "Pod/prod/absent"))
    run = run_tests(suite_copy / "signed-images")
    assert any(c.detail == "no such resource in the inputs" for c in run.cases)


def test_resource_without_namespace_is_found_in_the_suites_namespace(suite_copy: Path) -> None:
    suite = suite_copy / "int8-calibration"
    resources = suite / "resources.yaml"
    resources.write_text(
        resources.read_text().replace("  name: fp16\n  namespace: staging\n", "  name: fp16\n")
    )
    test_file = suite / "trtguard-test.yaml"
    test_file.write_text(test_file.read_text().replace("spec:\n", "spec:\n  namespace: staging\n", 1))
    run = run_tests(suite)
    assert [c.detail for c in run.cases if "fp16" in c.resource and not c.passed] == []
    assert any(c.resource == "Pod/staging/fp16" for c in run.cases)


def test_suite_that_cannot_run_exits_two(suite_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    test_file = suite_copy / "signed-images" / "trtguard-test.yaml"
    test_file.write_text(test_file.read_text().replace("../../signed-images.yaml", "../../absent.yaml"))
    assert main(["policy", "test", str(suite_copy / "signed-images")]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_invalid_policy_test_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "t.yaml").write_text(
        "apiVersion: trtguard.dev/v1alpha1\nkind: PolicyTest\nmetadata: {name: x}\n"
        "spec: {policies: [], resources: [r.yaml], results: []}\n"
    )
    assert main(["policy", "test", str(tmp_path)]) == 2
    assert "invalid PolicyTest" in capsys.readouterr().err


def test_no_suites(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "test", str(tmp_path)]) == 2
    assert "no PolicyTest documents" in capsys.readouterr().err


def test_junit_of_a_clean_run() -> None:
    document = ET.fromstring(junit(run_tests(LIBRARY_TESTS / "int8-calibration")).split("\n", 1)[1])
    suite = document.find("testsuite")
    assert suite is not None
    assert (suite.get("name"), suite.get("tests"), suite.get("failures")) == ("int8-calibration", "6", "0")


def test_now_is_the_clock_of_suites_that_set_none(
    suite_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The scanned-images suite's scans are fresh at its own `now`; without it, --now decides.
    test_file = suite_copy / "scanned-images" / "trtguard-test.yaml"
    text = test_file.read_text()
    assert '  now: "2026-11-01T00:00:00Z"\n' in text
    test_file.write_text(text.replace('  now: "2026-11-01T00:00:00Z"\n', ""))
    assert main(["policy", "test", str(suite_copy / "scanned-images"), "--now", "2026-11-01T00:00:00Z"]) == 0
    capsys.readouterr()
    assert main(["policy", "test", str(suite_copy / "scanned-images"), "--now", "2036-11-01T00:00:00Z"]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_the_starter_library_loads_no_template() -> None:
    """Issue 28 item 5: ``--policies policies/library`` is the five starter policies, ready to use."""
    policy_set = load_policy_set([LIBRARY_TESTS.parent, LIBRARY_TESTS / "keys.yaml"])
    assert sorted(policy.name for policy in policy_set.policies) == [
        "engine-toolchain-matches-runtime",
        "int8-calibration-and-accuracy",
        "signed-build-manifest",
        "signed-inference-images",
        "trusted-tensorrt-images",
    ]

"""policies/README.md says what the code does: the change kinds and the PolicyTest results, generated from
and checked against the code, and ``trtguard approve --help`` lists the same change kinds."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest
import yaml

from policies.testing import ExpectedResult, run_tests
from trtguard.cli import main
from verifier.predicates import ChangeKind

README = Path(__file__).resolve().parents[2] / "policies" / "README.md"


def _between(start: str, end: str) -> str:
    text = README.read_text()
    found = re.search(f"{re.escape(start)}[^\\n]*\\n(.*?){re.escape(end)}", text, re.DOTALL)
    assert found is not None, f"policies/README.md lacks the block {start!r}…{end!r}"
    return found.group(1)


def change_kinds_table() -> str:
    """The README's table of change kinds, as the code says it."""
    rows = "".join(f"| `{kind}` | {kind.meaning} |\n" for kind in ChangeKind)
    return "| change kind | meaning |\n|---|---|\n" + rows


def test_the_change_kinds_table_is_the_codes() -> None:
    block = _between("<!-- change kinds:", "<!-- end of change kinds -->")
    assert block == change_kinds_table(), (
        "replace the block in policies/README.md with:\n" + change_kinds_table()
    )


def test_approve_help_lists_every_change_kind(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["approve", "--help"])
    help_text = capsys.readouterr().out
    listed = help_text.split("change kinds:\n", 1)[1]
    for kind in ChangeKind:
        assert re.search(rf"^  {kind}\s+{re.escape(kind.meaning)}$", listed, re.MULTILINE), kind


def test_every_policy_test_result_is_described() -> None:
    block = _between("<!-- PolicyTest results:", "<!-- end of PolicyTest results -->")
    described = re.findall(r"^- `(\w+)`: ", block, re.MULTILINE)
    values = typing.get_args(ExpectedResult.model_fields["result"].annotation)
    assert sorted(described) == sorted(values)


def test_skip_is_what_a_resource_that_runs_no_pods_gets(tmp_path: Path) -> None:
    """As documented: a ConfigMap is not judged, so `skip` passes and `allow` fails naming what it got."""
    (tmp_path / "policy.yaml").write_text(
        "apiVersion: trtguard.dev/v1alpha1\nkind: InferencePolicy\nmetadata: {name: p}\n"
        "spec:\n  match: {namespaces: [prod]}\n  images: [{name: all, match: ['*']}]\n"
    )
    (tmp_path / "resources.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: prod}\ndata: {a: b}\n"
    )
    suite = (
        "apiVersion: trtguard.dev/v1alpha1\nkind: PolicyTest\nmetadata: {name: s}\nspec:\n"
        "  policies: [policy.yaml]\n  resources: [resources.yaml]\n"
        "  results:\n    - {resource: ConfigMap/prod/settings, result: RESULT}\n"
    )
    (tmp_path / "trtguard-test.yaml").write_text(suite.replace("RESULT", "skip"))
    [case] = run_tests(tmp_path).cases
    assert case.passed and case.detail == "skip"
    (tmp_path / "trtguard-test.yaml").write_text(suite.replace("RESULT", "allow"))
    [case] = run_tests(tmp_path).cases
    assert not case.passed and case.detail == "expected allow, got skip"


def test_the_library_table_says_where_engine_artifacts_may_appear() -> None:
    """Attack 28 finding 6e: the README said engine artifacts were allowed "only as image volumes" while
    trusted-base-images.yaml allows them as image volumes and KServe modelcars."""
    library = README.parent / "library" / "trusted-base-images.yaml"
    (rule,) = [rule for rule in yaml.safe_load(library.read_text())["spec"]["images"] if "fields" in rule]
    fields = f"`fields: [{', '.join(rule['fields'])}]`"
    text = README.read_text()
    (row,) = [line for line in text.splitlines() if line.startswith("| `library/trusted-base-images.yaml`")]
    assert fields in row, row
    assert "only as image volumes" not in text

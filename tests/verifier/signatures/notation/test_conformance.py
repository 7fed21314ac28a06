"""The conformance harness (conformance.py): every case of the specification suite and of notation-go's test
data gets the verdict they say, and none crashes (bench/notation_conformance.py prints the same table)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.verifier.signatures.notation import conformance

CASES = conformance.cases(Path(__file__).resolve().parents[3] / "data" / "notation-go")


@pytest.mark.parametrize("case", CASES, ids=[f"{c.suite}: {c.name}" for c in CASES])
def test_the_verdict_is_the_one_the_specification_or_upstream_gives(case: conformance.Case) -> None:
    outcome = conformance.run_case(case)
    assert outcome.verdict == "agree", outcome.detail


def test_both_suites_are_there() -> None:
    rows = {row["suite"]: row["cases"] for row in conformance.table([conformance.run_case(CASES[0])])}
    assert rows == {"spec": 1}
    assert {c.suite for c in CASES} == {"spec", "notation-go"} and len(CASES) >= 60

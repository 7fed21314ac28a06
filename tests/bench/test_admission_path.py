"""bench/admission_path.py: the reading-path rules on known calls, and one traced admission of the demo."""

from __future__ import annotations

from pathlib import Path

from bench.admission_path import AdmissionPath, is_flow, report, trace_admission, unit


def test_units_are_rooms_files_of_verifier_and_the_whole_decision_log() -> None:
    assert unit("policies/rules/images.py") == "policies/rules/"
    assert unit("verifier/signatures/notation/verify.py") == "verifier/signatures/"
    assert unit("decisionlog/_sqlite.py") == "decisionlog/"
    assert unit("verifier/manifest.py") == "verifier/manifest.py"
    assert is_flow("webhook/app.py") and is_flow("policies/evaluator.py")
    assert not is_flow("webhook/decisionlog/sqlite.py") and not is_flow("verifier/dsse.py")


def test_the_reading_path_counts_a_room_once_and_leaves_out_the_base() -> None:
    path = AdmissionPath(
        frozenset(
            {
                ("webhook/app.py", "webhook/admission.py"),
                ("webhook/admission.py", "policies/evaluator.py"),
                ("policies/evaluator.py", "policies/rules/images.py"),
                ("policies/evaluator.py", "policies/rules/model.py"),
                ("policies/rules/images.py", "policies/cel/program.py"),  # a room entered from a room
                ("policies/evaluator.py", "verifier/errors.py"),  # the base: not counted
                ("verifier/errors.py", "verifier/digests.py"),
                ("policies/evaluator.py", "verifier/references.py"),
                ("policies/evaluator.py", "verifier/keys.py"),  # a leaf file of verifier: looked up only
                ("webhook/admission.py", "webhook/decisionlog/sqlite.py"),  # a leaf in a room: counted
            }
        )
    )
    assert path.raw == [
        "policies/evaluator.py",
        "policies/rules/images.py",
        "webhook/admission.py",
        "webhook/app.py",
    ]
    assert path.reading == [
        "policies/evaluator.py",
        "policies/rules/",
        "webhook/admission.py",
        "webhook/app.py",
        "webhook/decisionlog/",
    ]
    assert len(path.executed) == 11
    assert path.callees("webhook/admission.py") == ["policies/evaluator.py", "webhook/decisionlog/sqlite.py"]


async def test_one_admission_of_the_demo_is_traced_through_the_webhook(tmp_path: Path) -> None:
    allowed, path = await trace_admission(tmp_path)
    assert allowed
    assert {"webhook/app.py", "webhook/admission.py", "policies/evaluator.py"} <= set(path.raw)
    assert set(path.raw) <= path.executed
    # verification ran (the caches were emptied), in a thread handed over by the evidence code
    assert any(callee.startswith("verifier/signatures/") for _, callee in path.edges)
    assert not any(f.startswith("trtguard/demo/") for f in path.executed)
    lines = list(report(allowed, path))
    assert lines[0].startswith(
        f"allowed: True; files executed: {len(path.executed)}; raw path: {len(path.raw)}"
    )
    assert lines[-1] == "reading path: " + ", ".join(path.reading)

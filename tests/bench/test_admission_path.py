"""bench/admission_path.py: the reading-path rules on made-up calls, and one traced admission of the demo.

The made-up calls name files that do not exist (``toy``), so that no move of issue 26 rewrites them; the
traced admission names real files, which the moves keep current.
"""

from __future__ import annotations

from pathlib import Path

from bench.admission_path import BASE, AdmissionPath, is_flow, report, trace_admission, unit


def test_units_are_rooms_files_of_verifier_and_the_whole_decision_log() -> None:
    assert unit("policies/toy_room/a.py") == "policies/toy_room/"
    assert unit("verifier/toy_room/inner/b.py") == "verifier/toy_room/"
    assert unit("decisionlog/_toy.py") == "decisionlog/"
    assert unit("verifier/toy.py") == "verifier/toy.py"
    assert is_flow("webhook/toy_app.py") and is_flow("policies/toy_evaluator.py")
    assert not is_flow("webhook/toy_log/store.py") and not is_flow("verifier/toy.py")


def test_the_reading_path_counts_a_room_once_and_leaves_out_the_base() -> None:
    path = AdmissionPath(
        frozenset(
            {
                ("webhook/toy_app.py", "webhook/toy_review.py"),
                ("webhook/toy_review.py", "policies/toy_evaluator.py"),
                ("policies/toy_evaluator.py", "policies/toy_rules/images.py"),
                ("policies/toy_evaluator.py", "policies/toy_rules/model.py"),
                ("policies/toy_rules/images.py", "policies/toy_cel/program.py"),  # a room entered from a room
                ("policies/toy_evaluator.py", "verifier/base/_toy_errors.py"),  # the base: not counted
                ("verifier/base/_toy_errors.py", "verifier/base/_toy_digests.py"),
                (
                    "policies/toy_evaluator.py",
                    "verifier/toy_keys.py",
                ),  # a leaf file of verifier: looked up only
                ("webhook/toy_review.py", "webhook/toy_log/store.py"),  # a leaf in a room: counted
            }
        )
    )
    assert set(path.raw) == {
        "policies/toy_evaluator.py",
        "policies/toy_rules/images.py",
        "webhook/toy_review.py",
        "webhook/toy_app.py",
    }
    assert set(path.reading) == {
        "policies/toy_evaluator.py",
        "policies/toy_rules/",
        "webhook/toy_review.py",
        "webhook/toy_app.py",
        "webhook/toy_log/",
    }
    assert path.reading == sorted(path.reading)
    assert len(path.executed) == 10
    assert path.callees("webhook/toy_review.py") == ["policies/toy_evaluator.py", "webhook/toy_log/store.py"]


async def test_one_admission_of_the_demo_is_traced_through_the_webhook(tmp_path: Path) -> None:
    allowed, path = await trace_admission(tmp_path)
    assert allowed
    assert {"webhook/_app.py", "webhook/_admission.py", "policies/evaluator.py"} <= set(path.raw)
    assert set(path.raw) <= path.executed
    # verification ran (the caches were emptied): files of the verifier beyond its base are on the path
    assert any(f.startswith("verifier/") and not f.startswith(BASE) for f in path.raw)
    assert not any(f.startswith("trtguard/demo/") for f in path.executed)
    lines = list(report(allowed, path))
    assert lines[0].startswith(
        f"allowed: True; files executed: {len(path.executed)}; raw path: {len(path.raw)}"
    )
    assert lines[-1] == "reading path: " + ", ".join(path.reading)

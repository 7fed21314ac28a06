"""policies/evaluation/_state.py: an evidence question that failed is kept without its traceback and raised
as a copy each time it is asked, so that judging leaves no cycle for the collector (the traceback's frames
held the evaluation, which held the failure: half the resources of a ``check`` are denied on such an
answer, issue 31)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from policies.evaluation import Evaluation
from policies.evaluator import PolicyEvaluator
from policies.loader import load_policy_set
from policies.workload_model import Workload, extract
from tests.conftest import REPO
from verifier.base import Deadline, EvidenceUnavailable
from verifier.evidence_folder import LocalEvidence

LIBRARY = REPO / "policies" / "library"
RUNTIME = "nvcr.io/nvidia/tensorrt@sha256:" + "a1" * 32
ENGINE = (
    "registry.example.com/models/fp16-good"
    "@sha256:f64c3ad0b953ee69d21a4b8179ddd10189d34e71bdb074dc9bce2bb25ddd2a5e"
)


def _pod(sidecar: str | None) -> dict[str, Any]:
    """``bench/check_10k.py``'s Pod: a runtime, an engine volume, and (denied) an unsigned tag."""
    containers: list[dict[str, Any]] = [
        {"name": "server", "image": RUNTIME, "volumeMounts": [{"name": "engine", "mountPath": "/models"}]}
    ]
    if sidecar is not None:
        containers.append({"name": "metrics", "image": sidecar})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "inference", "namespace": "prod-1"},
        "spec": {"containers": containers, "volumes": [{"name": "engine", "image": {"reference": ENGINE}}]},
    }


@pytest.fixture(scope="module")
def evaluator() -> PolicyEvaluator:
    policies = load_policy_set([LIBRARY, LIBRARY / "tests" / "keys.yaml"])
    return PolicyEvaluator(policies, LocalEvidence(LIBRARY / "tests" / "attestations"))


@pytest.mark.usefixtures("collector_off")
def test_judging_a_resource_denied_on_a_failed_question_leaves_nothing_for_the_collector(
    evaluator: PolicyEvaluator,
) -> None:
    asyncio.run(evaluator.evaluate(_pod("registry.example.com/inference/metrics:1"), pin=True))  # warm
    gc.collect()
    decision = asyncio.run(evaluator.evaluate(_pod("registry.example.com/inference/metrics:2"), pin=True))
    assert not decision.allowed
    assert any("metrics:2" in (v.image or "") and v.error for v in decision.violations)
    assert gc.collect() == 0


def test_a_failed_question_is_raised_as_a_copy_each_time_it_is_asked(evaluator: PolicyEvaluator) -> None:
    failure = EvidenceUnavailable("the registry is away", hint="try later", transient=False)
    calls = []

    async def ask() -> None:
        calls.append(1)
        raise failure

    raised = asyncio.run(_asked_three_times(evaluator, ask))
    assert calls == [1]  # asked once, answered from the kept failure after
    assert failure.__traceback__ is None
    assert len({id(error) for error in raised} | {id(failure)}) == 4
    for error in raised:
        assert type(error) is EvidenceUnavailable
        assert (error.message, error.hint, error.transient, error.args) == (
            failure.message,
            failure.hint,
            failure.transient,
            failure.args,
        )


@pytest.mark.parametrize("explicit", [False, True])
def test_a_copied_failure_keeps_the_chain_it_was_raised_in(
    evaluator: PolicyEvaluator, explicit: bool
) -> None:
    # Attack 39c F1: the copy had lost the implicit context (an OSError behind an EvidenceUnavailable).
    refused = ConnectionRefusedError(111, "refused")

    async def ask() -> None:
        try:
            raise refused
        except OSError as error:
            if explicit:
                raise EvidenceUnavailable("the registry is away", transient=True) from error
            raise EvidenceUnavailable("the registry is away", transient=True)  # noqa: B904 - the implicit chain is the case

    for error in asyncio.run(_asked_three_times(evaluator, ask)):
        assert error.__context__ is refused
        assert error.__cause__ is (refused if explicit else None)
        assert error.__suppress_context__ is explicit


async def _asked_three_times(
    evaluator: PolicyEvaluator, ask: Callable[[], Awaitable[None]]
) -> list[EvidenceUnavailable]:
    """What three askers of one question of one evaluation get raised."""
    workload = extract(_pod(None))
    assert isinstance(workload, Workload)
    state = Evaluation(
        workload=workload,
        context=workload,
        previous=None,
        deadline=Deadline.never(),
        evidence=evaluator.evidence,
        verified=evaluator.verified,
        history=None,
        clock=evaluator.clock,
        cel=evaluator.cel,
    )
    raised = []
    for _ in range(3):
        with pytest.raises(EvidenceUnavailable) as caught:
            await state.once(("question",), ask)
        raised.append(caught.value)
    return raised

"""One long-lived PolicyEvaluator (as ``serve`` holds it) gives every request the verdict ``check`` gives
alone.

The verdict of a resource may depend only on the resource: never on what the same engine was asked before,
nor on what it is asked at the same time. A real registry (one per module) holds signed and unsigned images
that share a digest across repositories, a copied ``.sig`` tag, engines with good and forged build manifests
and an engine mirrored without its manifest (:func:`tests.policies.registry_world.build_world`). The oracle is
``trtguard check --registry`` run on each resource alone; the same property through ``trtguard serve`` over
TLS is in ``tests/webhook/test_verdict_order.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies.evaluator import PolicyEvaluator
from policies.loader import load_policy_set
from tests.policies.registry_world import World, build_world, check_registry, pod
from tests.support.localregistry import LocalRegistry, start_registry
from verifier.registry.client import RegistryClient
from verifier.registry.config import load_registry_config
from verifier.registry.evidence import RegistryEvidence

pytestmark = pytest.mark.registry


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    running = start_registry(tmp_path_factory.mktemp("differential-registry"), http={}, auth=None)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def world(registry: LocalRegistry, tmp_path_factory: pytest.TempPathFactory) -> World:
    return build_world(registry, tmp_path_factory.mktemp("differential-world"))


@pytest.fixture(scope="module")
def alone(world: World, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bool]:
    """Whether ``check --registry`` admits each resource, asked about it alone (the oracle)."""
    folder = tmp_path_factory.mktemp("alone")
    verdicts = {}
    for name, resource in world.resources.items():
        status, _ = check_registry(world, pod(resource.image, resource.engine), folder / name)
        verdicts[name] = status == 0
    return verdicts


def test_check_judges_each_resource_as_expected(world: World, alone: dict[str, bool]) -> None:
    # The oracle itself: a signature binds its repository, a manifest binds its engine layer and files.
    assert alone == {name: resource.allowed for name, resource in world.resources.items()}


async def _judge(world: World, batches: Sequence[Sequence[str]]) -> list[bool]:
    """Send ``batches`` of resource names to one new PolicyEvaluator: each batch at once, batch after
    batch."""
    async with RegistryClient(load_registry_config(world.config)) as client:
        engine = PolicyEvaluator(load_policy_set(world.policies), RegistryEvidence(client))
        verdicts: list[bool] = []
        for batch in batches:
            resources = [world.resources[name] for name in batch]
            decisions = await asyncio.gather(
                *(engine.evaluate(pod(r.image, r.engine, f"p{i}")) for i, r in enumerate(resources))
            )
            verdicts += [decision.allowed for decision in decisions]
        return verdicts


@pytest.mark.parametrize(
    "order",
    [
        ("signed", "unsigned"),  # a signature of inference/signed@D must not admit inference/unsigned@D
        ("signed", "copied-signature"),  # nor a copy of its .sig tag that check refuses
        ("unsigned", "signed"),  # and a failure for the unsigned one must not deny the signed one
        ("copied-signature", "signed"),
        ("good-engine", "mirrored-engine"),  # a manifest in models/good says nothing about models/mirror
        ("mirrored-engine", "good-engine"),
        ("good-engine", "smuggled-engine", "swapped-files"),  # one envelope, three artifacts
        ("good-engine", "good-engine-unsigned-image"),
    ],
    ids="-then-".join,
)
def test_a_verdict_does_not_depend_on_the_requests_before_it(
    world: World, alone: dict[str, bool], order: tuple[str, ...]
) -> None:
    assert asyncio.run(_judge(world, [[name] for name in order])) == [alone[name] for name in order]


def test_a_verdict_does_not_depend_on_requests_in_flight(world: World, alone: dict[str, bool]) -> None:
    names = sorted(world.resources)
    assert asyncio.run(_judge(world, [names])) == [alone[name] for name in names]


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=st.data())
def test_random_request_sequences_agree_with_check_alone(
    world: World, alone: dict[str, bool], data: st.DataObject
) -> None:
    names = sorted(world.resources)
    batches = data.draw(
        st.lists(st.lists(st.sampled_from(names), min_size=1, max_size=3), min_size=1, max_size=5),
        label="batches",
    )
    expected = [alone[name] for batch in batches for name in batch]
    assert asyncio.run(_judge(world, batches)) == expected

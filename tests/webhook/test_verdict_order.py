"""``trtguard serve`` over TLS against a real registry: forged engines are denied, and no verdict depends on
the requests before it or beside it.

One server and one registry per module (:func:`tests.policies.registry_world.build_world`); the oracle is
``trtguard check --registry`` asked about each resource alone. The server's verification cache lives for the
whole module, as it does in production, so every test (and every random sequence) runs after the others.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.policies.registry_world import World, build_world, check_registry, pod
from tests.support.harness import SERVICE, WebhookProcess, review, verify_admission_response
from tests.support.localregistry import LocalRegistry, start_registry

pytestmark = pytest.mark.registry


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    running = start_registry(tmp_path_factory.mktemp("order-registry"), http={}, auth=None)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def world(registry: LocalRegistry, tmp_path_factory: pytest.TempPathFactory) -> World:
    return build_world(registry, tmp_path_factory.mktemp("order-world"))


@pytest.fixture(scope="module")
def alone(world: World, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bool]:
    """Whether ``check --registry`` admits each resource, asked about it alone."""
    folder = tmp_path_factory.mktemp("alone")
    verdicts = {}
    for name, resource in world.resources.items():
        status, _ = check_registry(world, pod(resource.image, resource.engine), folder / name)
        verdicts[name] = status == 0
    assert verdicts == {name: resource.allowed for name, resource in world.resources.items()}
    return verdicts


@pytest.fixture(scope="module")
def server(world: World, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookProcess]:
    process = WebhookProcess(
        [
            "--policies",
            str(world.policies),
            "--registry-config",
            str(world.config),
            "--self-signed",
            "tls",
            "--san",
            SERVICE,
            "--decision-log",
            "sqlite:///decisions.db",
        ],
        tmp_path_factory.mktemp("order-webhook"),
    )
    process.start()
    yield process
    process.stop()


async def _admit(server: WebhookProcess, world: World, batches: Sequence[Sequence[str]]) -> list[bool]:
    """Post ``batches`` of resources to the server (each batch at once); whether each was allowed."""
    verdicts: list[bool] = []
    async with server.client() as client:
        for batch in batches:
            bodies = [
                review(obj=pod(world.resources[name].image, world.resources[name].engine, f"p{i}"))
                for i, name in enumerate(batch)
            ]
            responses = await asyncio.gather(*(client.post(body) for body in bodies))
            for body, response in zip(bodies, responses, strict=True):
                verdicts.append(bool(verify_admission_response(body["request"]["uid"], response)["allowed"]))
    return verdicts


@pytest.mark.parametrize("forged", ["smuggled-engine", "swapped-files"])
def test_serve_denies_an_engine_under_another_engines_manifest(
    server: WebhookProcess, world: World, forged: str
) -> None:
    # After the honest engine that the same signed manifest belongs to was admitted.
    assert asyncio.run(_admit(server, world, [["good-engine"], [forged]])) == [True, False]


@pytest.mark.parametrize(
    "order",
    [
        ("signed", "unsigned"),
        ("signed", "copied-signature"),
        ("good-engine", "mirrored-engine"),
    ],
    ids="-then-".join,
)
def test_serve_agrees_with_check_whatever_came_before(
    server: WebhookProcess, world: World, alone: dict[str, bool], order: tuple[str, ...]
) -> None:
    forward = [[name] for name in order]
    backward = list(reversed(forward))
    verdicts = asyncio.run(_admit(server, world, [*forward, *backward]))
    assert verdicts == [alone[batch[0]] for batch in [*forward, *backward]]


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_serve_agrees_with_check_on_random_request_sequences(
    server: WebhookProcess, world: World, alone: dict[str, bool], data: st.DataObject
) -> None:
    names = sorted(world.resources)
    batches = data.draw(
        st.lists(st.lists(st.sampled_from(names), min_size=1, max_size=4), min_size=1, max_size=4),
        label="batches",
    )
    expected = [alone[name] for batch in batches for name in batch]
    assert asyncio.run(_admit(server, world, batches)) == expected

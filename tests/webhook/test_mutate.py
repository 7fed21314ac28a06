"""``/mutate`` (issue 29): a real ``trtguard serve`` over TLS pins what it verified; ``/validate`` admits it.

The registry is Debian's docker-registry on 127.0.0.1; the image is signed the way ``trtguard sign`` signs
(a classic simple-signing signature). The tag is moved to unsigned bytes between the two calls: the pinned
digest is what still runs, while the tag itself is now refused.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import jsonpointer
import kubernetes_validate
import pytest

from decisionlog import RecordQuery, SQLiteStore
from policies.schema import trusted_keys_yaml
from tests.policies.registry_world import sign_image
from tests.support.harness import SERVICE, StartWebhook, review, verify_admission_response
from tests.support.images import push_image, tiny_image
from tests.support.localregistry import LocalRegistry, plain_config, start_registry
from verifier.base._references import ImageReference
from verifier.keys import generate_private_key
from verifier.registry.client import RegistryClient

pytestmark = pytest.mark.registry

POLICY = """\
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: pinning}
spec:
  match: {namespaces: [prod]}
  images:
    - name: runtime
      match: ["HOST/inference/*"]
      pinDigest: true
      signatures: {keys: [platform/image-signer]}
"""


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    running = start_registry(tmp_path_factory.mktemp("mutate-registry"), http={}, auth=None)
    yield running
    running.stop()


async def _in_registry(registry: LocalRegistry, work: Any) -> Any:
    async with RegistryClient(plain_config(registry.host)) as client:
        return await work(client)


def _serve(host: str, tmp_path: Path, webhook_process: StartWebhook, policy: str = POLICY) -> Any:
    key = generate_private_key()
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "keys.yaml").write_text(trusted_keys_yaml("platform", {"image-signer": key.public_key()}))
    (policies / "policy.yaml").write_text(policy.replace("HOST", host))
    config = tmp_path / "registries.yaml"
    config.write_text(f'registries:\n  "{host}":\n    plain_http: true\n')
    server = webhook_process(
        "--policies", str(policies), "--registry-config", str(config), "--self-signed", "tls",
        "--san", SERVICE, "--decision-log", "sqlite:///decisions.db",
    )  # fmt: skip
    return server, key


def _workload(image: str, volume_image: str) -> dict[str, Any]:
    """A Pod naming one tag in two containers and an init container, and a second image in a volume."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "server", "namespace": "prod"},
        "spec": {
            "initContainers": [{"name": "warmup", "image": image}],
            "containers": [
                {"name": "server", "image": image, "volumeMounts": [{"name": "data", "mountPath": "/d"}]},
                {"name": "metrics", "image": image},
            ],
            "volumes": [{"name": "data", "image": {"reference": volume_image}}],
        },
    }


def _apply(obj: dict[str, Any], operations: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 ``test`` and ``replace`` as the API server applies them (jsonpointer, not trtguard's code)."""
    patched = copy.deepcopy(obj)
    for operation in operations:
        at = jsonpointer.JsonPointer(operation["path"])
        if operation["op"] == "test":
            assert at.resolve(patched) == operation["value"], f"test of {operation['path']} failed"
        else:
            assert operation["op"] == "replace", operation
            at.resolve(patched)  # replace needs the field to exist
            at.set(patched, operation["value"])
    return patched


async def test_a_pinned_digest_still_runs_after_the_tag_moves(
    registry: LocalRegistry, tmp_path: Path, webhook_process: StartWebhook
) -> None:
    tag = ImageReference.parse(f"{registry.host}/inference/server:v1")
    tools = ImageReference.parse(f"{registry.host}/inference/tools:v2")
    signed = await _in_registry(registry, lambda client: push_image(client, tag, tiny_image()))
    tools_digest = await _in_registry(registry, lambda client: push_image(client, tools, tiny_image()))
    server, key = _serve(registry.host, tmp_path, webhook_process)
    await _in_registry(registry, lambda client: sign_image(client, tag.with_digest(signed), key))
    await _in_registry(registry, lambda client: sign_image(client, tools.with_digest(tools_digest), key))
    image, volume_image = f"{registry.host}/inference/server:v1", f"{registry.host}/inference/tools:v2"
    obj = _workload(image, volume_image)
    async with server.client() as client:
        body = review(obj=obj)
        answer = verify_admission_response(
            body["request"]["uid"], await client.post(body, path="/mutate"), mutating=True
        )
        assert answer["allowed"] is True
        operations = json.loads(base64.b64decode(answer["patch"]))
        # every field that names the tag is pinned, each replace guarded by a test of what was judged
        assert [(o["op"], o["path"]) for o in operations] == [
            (op, path)
            for path in (
                "/spec/containers/0/image",
                "/spec/containers/1/image",
                "/spec/initContainers/0/image",
                "/spec/volumes/0/image/reference",
            )
            for op in ("test", "replace")
        ]
        patched = _apply(obj, operations)
        kubernetes_validate.validate(patched, kubernetes_validate.latest_version(), strict=True)
        assert patched["spec"]["containers"][1]["image"] == f"{image}@{signed}"
        assert patched["spec"]["volumes"][0]["image"]["reference"] == f"{volume_image}@{tools_digest}"

        # The tag moves to bytes nobody signed.
        moved = await _in_registry(registry, lambda client: push_image(client, tag, tiny_image()))
        assert moved != signed

        body = review(obj=patched)
        answer = verify_admission_response(body["request"]["uid"], await client.post(body))
        assert answer["allowed"] is True, answer
        # pinned already: /mutate leaves it alone (the reinvocation after another webhook changes nothing)
        body = review(obj=patched)
        again = verify_admission_response(
            body["request"]["uid"], await client.post(body, path="/mutate"), mutating=True
        )
        assert again["allowed"] is True and "patch" not in again
        # the tag itself now names unsigned bytes: /mutate refuses to pin them
        body = review(obj=obj)
        refused = verify_admission_response(
            body["request"]["uid"], await client.post(body, path="/mutate"), mutating=True
        )
        assert refused["allowed"] is False and moved in refused["status"]["message"]
        # a tag that skipped /mutate is refused by /validate, even when it is signed
        body = review(obj=_workload(f"{image}-unused", volume_image))
        skipped = verify_admission_response(body["request"]["uid"], await client.post(body))
        assert skipped["allowed"] is False and "pinDigest" in skipped["status"]["message"]

        # dry run: the same patch, recorded as a dry run
        body = review(obj=_workload(volume_image, volume_image), dry_run=True)
        dry = verify_admission_response(
            body["request"]["uid"], await client.post(body, path="/mutate"), mutating=True
        )
        assert dry["allowed"] is True and dry["auditAnnotations"]["dry-run"] == "true"
        assert len(json.loads(base64.b64decode(dry["patch"]))) == 2 * 4
    server.stop()
    records = await _records(tmp_path / "decisions.db")
    first = records[0]
    assert first["reason"] == "DigestsPinned" and first["engines"] == []
    assert {i["path"]: i.get("pinned") for i in first["images"]} == {
        "spec.initContainers[0].image": f"{image}@{signed}",
        "spec.containers[0].image": f"{image}@{signed}",
        "spec.containers[1].image": f"{image}@{signed}",
        "spec.volumes[0].image.reference": f"{volume_image}@{tools_digest}",
    }
    assert [r["reason"] for r in records[1:3]] == ["Allowed", "NothingToPin"]
    assert records[-1]["dry_run"] is True and records[-1]["reason"] == "DigestsPinned"


async def _records(path: Path) -> list[dict[str, Any]]:
    store = SQLiteStore(path, read_only=True)
    await store.open()
    try:
        return [stored.record.to_json() for stored in await store.query(RecordQuery())]
    finally:
        await store.close()


@pytest.fixture
async def blackhole_registry() -> AsyncIterator[str]:
    """A registry host that accepts connections and never answers."""
    connections: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        await reader.read()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    for writer in connections:
        writer.transport.abort()
    server.close()
    await server.wait_closed()


async def test_a_mutate_timeout_is_a_denial_whatever_on_error_says(
    blackhole_registry: str, tmp_path: Path, webhook_process: StartWebhook
) -> None:
    # onError: Warn lets /validate admit what it could not check (out of time there too); /mutate denies, so
    # the request never gets that far with its tags unpinned
    lenient = POLICY.replace("spec:\n", "spec:\n  onError: Warn\n", 1)
    server, _ = _serve(blackhole_registry, tmp_path, webhook_process, lenient)
    body = review(
        obj=_workload(f"{blackhole_registry}/inference/server:v1", f"{blackhole_registry}/inference/tools:v2")
    )
    async with server.client() as client:
        started = time.perf_counter()
        response = await client.post(body, api_timeout=2, path="/mutate")
        elapsed = time.perf_counter() - started
    answer = verify_admission_response(body["request"]["uid"], response, mutating=True)
    assert elapsed < 2.0, f"answered after {elapsed:.2f} s, past the API server's 2 s"
    assert answer["allowed"] is False and "patch" not in answer
    assert answer["status"]["reason"] in ("EvaluationTimeout", "EvidenceUnavailable"), answer["status"]

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
from tests.support.images import push_image, push_index, tiny_image
from tests.support.localregistry import LocalRegistry, plain_config, start_registry
from verifier.base._references import ImageReference
from verifier.crypto._keys import generate_private_key
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


def _serve(
    host: str, tmp_path: Path, webhook_process: StartWebhook, policy: str = POLICY, *others: str
) -> Any:
    key = generate_private_key()
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "keys.yaml").write_text(trusted_keys_yaml("platform", {"image-signer": key.public_key()}))
    for number, text in enumerate((policy, *others)):
        (policies / f"policy-{number}.yaml").write_text(text.replace("HOST", host))
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


REQUIRE_DIGESTS = """\
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: digests-only}
spec:
  match: {namespaces: [prod]}
  images:
    - name: everything
      match: ["HOST/*"]
      requireDigest: true
"""


async def _mutate(client: Any, obj: dict[str, Any], **request: Any) -> tuple[dict[str, Any], list[Any]]:
    """/mutate's answer for ``obj`` and its JSONPatch (empty when it carries none)."""
    body = review(obj=obj, **request)
    answer = verify_admission_response(
        body["request"]["uid"], await client.post(body, path="/mutate"), mutating=True
    )
    return answer, json.loads(base64.b64decode(answer["patch"])) if "patch" in answer else []


async def _validate(client: Any, obj: dict[str, Any], **request: Any) -> dict[str, Any]:
    body = review(obj=obj, **request)
    answer: dict[str, Any] = verify_admission_response(body["request"]["uid"], await client.post(body))
    return answer


async def test_what_mutate_pins_the_other_policies_admit_in_every_field(
    registry: LocalRegistry, tmp_path: Path, webhook_process: StartWebhook
) -> None:
    """A second policy requires digests: /mutate does not deny what it pins (the API server runs /validate
    after it, on the pinned object). A KServe modelcar is pinned inside its oci:// URI, a tag naming an
    image index is pinned to the index, and an UPDATE, a subresource and a dry run pin only what is new."""
    host = registry.host
    refs = {name: ImageReference.parse(f"{host}/inference/{name}:v1") for name in ("server", "model")}
    digests = {
        name: await _in_registry(registry, lambda client, r=ref: push_image(client, r, tiny_image()))
        for name, ref in refs.items()
    }
    indexed = ImageReference.parse(f"{host}/inference/multiarch:v1")
    digests["multiarch"] = await _in_registry(
        registry, lambda client: push_index(client, indexed, [tiny_image(), tiny_image(architecture="arm64")])
    )
    refs["multiarch"] = indexed
    server, key = _serve(host, tmp_path, webhook_process, POLICY, REQUIRE_DIGESTS)
    for name, ref in refs.items():
        await _in_registry(
            registry, lambda client, r=ref, n=name: sign_image(client, r.with_digest(digests[n]), key)
        )
    image = f"{host}/inference/server:v1"
    pinned = f"{image}@{digests['server']}"
    async with server.client() as client:
        # a Pod: pinned, then admitted by both policies
        answer, patch = await _mutate(client, _workload(image, f"{host}/inference/multiarch:v1"))
        assert answer["allowed"] is True, answer
        patched = _apply(_workload(image, f"{host}/inference/multiarch:v1"), patch)
        assert patched["spec"]["volumes"][0]["image"]["reference"].endswith(f"@{digests['multiarch']}"), (
            "a tag naming an index is pinned to the index, the digest that was signed"
        )
        assert (await _validate(client, patched))["allowed"] is True

        # KServe's modelcar: the image is the oci:// storage URI's
        isvc = {
            "apiVersion": "serving.kserve.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {"name": "llm", "namespace": "prod"},
            "spec": {"predictor": {"model": {"modelFormat": {"name": "pytorch"},
                                             "storageUri": f"oci://{host}/inference/model:v1"}}},
        }  # fmt: skip
        answer, patch = await _mutate(client, isvc)
        assert answer["allowed"] is True, answer
        assert [o for o in patch if o["op"] == "replace"] == [
            {
                "op": "replace",
                "path": "/spec/predictor/model/storageUri",
                "value": f"oci://{host}/inference/model:v1@{digests['model']}",
            }
        ]
        assert (await _validate(client, _apply(isvc, patch)))["allowed"] is True

        # UPDATE: only what is new is pinned (a container of a template, an ephemeral container)
        template = {
            "metadata": {"labels": {"app": "d"}},
            "spec": {"containers": [{"name": "a", "image": pinned}]},
        }
        old: dict[str, Any] = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "prod"},
            "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": template},
        }
        new = copy.deepcopy(old)
        new["spec"]["template"]["spec"]["initContainers"] = [{"name": "warmup", "image": image}]
        for dry_run in (False, True):
            answer, patch = await _mutate(client, new, operation="UPDATE", old=old, dry_run=dry_run)
            assert answer["allowed"] is True, answer
            assert [(o["op"], o["path"]) for o in patch] == [
                ("test", "/spec/template/spec/initContainers/0/image"),
                ("replace", "/spec/template/spec/initContainers/0/image"),
            ]
        running = _workload(pinned, f"{host}/inference/multiarch:v1@{digests['multiarch']}")
        debugged = copy.deepcopy(running)
        debugged["spec"]["ephemeralContainers"] = [{"name": "debug", "image": image}]
        answer, patch = await _mutate(
            client, debugged, operation="UPDATE", old=running, sub_resource="ephemeralcontainers"
        )
        assert answer["allowed"] is True, answer
        assert _apply(debugged, patch)["spec"]["ephemeralContainers"][0]["image"] == pinned
        assert len(patch) == 2, "nothing else is touched"

        # a kind trtguard does not know: its images are found by searching, under keys that need escaping
        widget: dict[str, Any] = {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "w", "namespace": "prod"},
            "spec": {"models": {"a/b~c": {"image": image}, "a": {"b~c": {"image": "untouched"}}}},
        }
        answer, patch = await _mutate(client, widget)
        assert answer["allowed"] is False, "'untouched' is allowed by no image rule"
        widget["spec"]["models"]["a"] = {}
        answer, patch = await _mutate(client, widget)
        assert answer["allowed"] is True, answer
        assert [o["path"] for o in patch] == ["/spec/models/a~1b~0c/image"] * 2
        assert _apply(widget, patch)["spec"]["models"] == {"a/b~c": {"image": pinned}, "a": {}}

        # an image object (found by searching) cannot hold a pin: denied, saying where and why
        composed = copy.deepcopy(widget)
        composed["spec"] = {"server": {"image": {"repository": f"{host}/inference/server", "tag": "v1"}}}
        answer, patch = await _mutate(client, composed)
        assert answer["allowed"] is False and patch == []
        message = answer["status"]["message"]
        assert "pinDigest" in message and "cannot be pinned" in message and "spec.server.image" in message
    server.stop()


BY_FIELD = """\
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: fields}
spec:
  match: {namespaces: [prod]}
  images:
    - name: container-images
      fields: [container, initContainer, ephemeralContainer]
      match: ["HOST/*"]
      pinDigest: true
      signatures: {keys: [platform/image-signer]}
    - name: model-volumes
      fields: [volume]
      match: ["HOST/models/*"]
      signatures: {keys: [platform/image-signer]}
"""


async def test_an_update_that_only_changes_a_storage_uris_scheme_is_judged_again(
    registry: LocalRegistry, tmp_path: Path, webhook_process: StartWebhook
) -> None:
    """``oci+native://REF`` is an image volume, ``oci://REF`` a modelcar container: an UPDATE from one to the
    other keeps the path and the reference, yet the image now runs, under the rules for containers (attack
    29, finding 1). /mutate pins it, and once the tag names unsigned bytes, denies it; /validate denies the
    flip that skipped /mutate."""
    host = registry.host
    tag = ImageReference.parse(f"{host}/models/flip:v1")
    signed = await _in_registry(registry, lambda client: push_image(client, tag, tiny_image()))
    server, key = _serve(host, tmp_path, webhook_process, BY_FIELD)
    await _in_registry(registry, lambda client: sign_image(client, tag.with_digest(signed), key))

    def isvc(scheme: str) -> dict[str, Any]:
        model = {"modelFormat": {"name": "triton"}, "storageUri": f"{scheme}://{tag}"}
        return {
            "apiVersion": "serving.kserve.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {"name": "flip", "namespace": "prod"},
            "spec": {"predictor": {"model": model}},
        }

    volume, modelcar = isvc("oci+native"), isvc("oci")
    async with server.client() as client:
        answer, patch = await _mutate(client, volume)
        assert answer["allowed"] is True and patch == [], "the volume rule does not pin"
        assert (await _validate(client, volume))["allowed"] is True

        answer, patch = await _mutate(client, modelcar, operation="UPDATE", old=volume)
        assert answer["allowed"] is True, answer
        assert [o for o in patch if o["op"] == "replace"] == [
            {"op": "replace", "path": "/spec/predictor/model/storageUri", "value": f"oci://{tag}@{signed}"}
        ]
        skipped = await _validate(client, modelcar, operation="UPDATE", old=volume)
        assert skipped["allowed"] is False and "container-images.pinDigest" in skipped["status"]["message"]

        moved = await _in_registry(registry, lambda client: push_image(client, tag, tiny_image()))
        answer, patch = await _mutate(client, modelcar, operation="UPDATE", old=volume)
        assert answer["allowed"] is False and patch == []
        assert (
            "container-images.signatures" in answer["status"]["message"]
            and moved in answer["status"]["message"]
        )
    server.stop()


COMPOSED = """\
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: composed}
spec:
  match: {namespaces: [prod]}
  images:
    - name: pinned
      match: ["HOST/inference/*"]
      pinDigest: true
      signatures: {keys: [platform/image-signer]}
    - name: signed
      match: ["HOST/plain/*"]
      signatures: {keys: [platform/image-signer]}
"""


async def test_an_image_with_its_tag_beside_it_is_judged_at_that_tag_and_never_pinned(
    registry: LocalRegistry, tmp_path: Path, webhook_process: StartWebhook
) -> None:
    """``{image: REPO, tag: v1}`` in a kind trtguard does not know: an operator composing ``REPO:v1`` runs
    v1, so v1 is judged (beside ``REPO`` as written, which another operator would run), and /mutate never
    rewrites ``image``, which would make such an operator compose ``REPO@sha256:…:v1`` (attack 29, F2)."""
    host = registry.host
    refs = {
        (repo, tag): ImageReference.parse(f"{host}/{repo}:{tag}")
        for repo in ("plain/server", "plain/other", "inference/server")
        for tag in ("latest", "v1")
    }
    digests = {
        at: await _in_registry(registry, lambda client, r=ref: push_image(client, r, tiny_image()))
        for at, ref in refs.items()
    }
    server, key = _serve(host, tmp_path, webhook_process, COMPOSED)
    for at, ref in refs.items():
        if at != ("plain/server", "v1"):  # latest is signed, v1 (what a composing operator runs) is not
            await _in_registry(
                registry, lambda client, r=ref, d=digests[at]: sign_image(client, r.with_digest(d), key)
            )

    def custom(repo: str) -> dict[str, Any]:
        return {
            "apiVersion": "example.com/v1",
            "kind": "ModelServer",
            "metadata": {"name": "m", "namespace": "prod"},
            "spec": {"server": {"image": f"{host}/{repo}", "tag": "v1"}},
        }

    async with server.client() as client:
        answer, patch = await _mutate(client, custom("plain/server"))
        assert answer["allowed"] is False and patch == []
        message = answer["status"]["message"]
        assert f"{host}/plain/server:v1@{digests['plain/server', 'v1']}: no signature found" in message
        assert (await _validate(client, custom("plain/server")))["allowed"] is False
        answer, patch = await _mutate(client, custom("plain/other"))
        assert answer["allowed"] is True and patch == [], answer["status"]["message"]

        # every reading signed, but neither field holds a reference a patch could pin
        answer, patch = await _mutate(client, custom("inference/server"))
        assert answer["allowed"] is False and patch == []
        message = answer["status"]["message"]
        assert message.count("pinned.pinDigest") == 2 and "cannot be pinned" in message, message
        assert "spec.server.image names it" in message and "spec.server names it" in message
    server.stop()

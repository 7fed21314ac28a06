"""Digest pinning (issue 29): ``pinDigest`` rules, the JSONPatch of :mod:`policies.pinning`, ``check --fix``.

The registry cases push and sign real images in Debian's docker-registry on 127.0.0.1 and run ``trtguard
check --fix`` over a Deployment (init and two containers with one image), a KubeRay RayCluster (an operator
kind: head and worker templates) and a Pod with an ephemeral container; what it prints is checked again
without ``--fix`` (admitted, pinned) and against the Kubernetes schema.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from policies.evaluator import PolicyEvaluator
from policies.loader import load_policy_set
from policies.pinning import apply_patch, patch_for, pointer, written
from policies.results import ArtifactRecord, Decision
from policies.schema import trusted_keys_yaml
from tests.policies.registry_world import run_cli, sign_image
from tests.support.images import push_image, tiny_image
from tests.support.localregistry import LocalRegistry, plain_config, start_registry
from verifier.base import Deadline, InputError
from verifier.base._references import ImageReference
from verifier.crypto._keys import generate_private_key
from verifier.registry.client import RegistryClient
from verifier.registry.evidence import RegistryEvidence

DIGEST = "sha256:" + "ab" * 32
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
      requireDigest: true
      signatures: {keys: [platform/image-signer]}
"""


def _pod(*images: str) -> dict[str, Any]:
    containers = [{"name": f"c{n}", "image": image} for n, image in enumerate(images)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": containers}}


def _decision(*pins: tuple[str, str]) -> Decision:
    images = tuple(ArtifactRecord(ref, DIGEST, path, pinned=f"{ref}@{DIGEST}") for path, ref in pins)
    return Decision("Pod", "prod", "p", "rev", images=images)


def test_the_patch_tests_each_field_before_it_replaces_it() -> None:
    obj = _pod("r/a:1", "r/a:1")
    decision = _decision(("spec.containers[0].image", "r/a:1"), ("spec.containers[1].image", "r/a:1"))
    operations = patch_for(obj, decision)
    assert operations == [
        {"op": "test", "path": "/spec/containers/0/image", "value": "r/a:1"},
        {"op": "replace", "path": "/spec/containers/0/image", "value": f"r/a:1@{DIGEST}"},
        {"op": "test", "path": "/spec/containers/1/image", "value": "r/a:1"},
        {"op": "replace", "path": "/spec/containers/1/image", "value": f"r/a:1@{DIGEST}"},
    ]
    pinned = apply_patch(obj, operations)
    assert [c["image"] for c in pinned["spec"]["containers"]] == [f"r/a:1@{DIGEST}"] * 2
    assert obj["spec"]["containers"][0]["image"] == "r/a:1", "the object itself is left alone"


def test_a_reordered_object_fails_the_test_rather_than_pin_the_wrong_container() -> None:
    obj = _pod("r/verified:1", "r/other:1")
    operations = patch_for(obj, _decision(("spec.containers[0].image", "r/verified:1")))
    # another mutating webhook put a container in front: the replace would hit the wrong one
    reordered = _pod("r/other:1", "r/verified:1")
    with pytest.raises(InputError, match="test of /spec/containers/0/image failed"):
        apply_patch(reordered, operations)
    # and a patch is never built against an object other than the one judged
    with pytest.raises(InputError, match="does not hold 'r/verified:1'"):
        patch_for(reordered, _decision(("spec.containers[0].image", "r/verified:1")))


def test_pointers_read_brackets_by_what_the_object_holds() -> None:
    obj = {"spec": {"models": {"a/b": {"3": {"image": "x"}}}, "list": [{"image": "y"}]}}
    assert pointer(obj, "spec.models[a/b][3].image") == "/spec/models/a~1b/3/image"
    assert pointer(obj, "spec.list[0].image") == "/spec/list/0/image"
    for missing in ("spec.list[1].image", "spec.models[a/b]", "spec.nothing.image", "spec..list"):
        with pytest.raises(InputError):
            pointer(obj, missing)


def test_pin_digest_needs_something_verified_at_the_digest(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text(
        POLICY.replace("      signatures: {keys: [platform/image-signer]}\n", "").replace("HOST", "r")
    )
    with pytest.raises(InputError, match="pinDigest pins the digest this rule verified"):
        load_policy_set([tmp_path])


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    running = start_registry(tmp_path_factory.mktemp("pinning-registry"), http={}, auth=None)
    yield running
    running.stop()


def _manifests(host: str) -> list[dict[str, Any]]:
    image, other = f"{host}/inference/server:v1", f"{host}/inference/sidecar:v1"
    template = {
        "metadata": {"labels": {"app": "a"}},
        "spec": {
            "initContainers": [{"name": "warmup", "image": image}],
            "containers": [{"name": "a", "image": image}, {"name": "b", "image": image}],
        },
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "prod"},
        "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": template},
    }
    ray = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "ray", "namespace": "prod"},
        "spec": {
            "headGroupSpec": {"template": {"spec": {"containers": [{"name": "head", "image": image}]}}},
            "workerGroupSpecs": [
                {"groupName": "gpu", "template": {"spec": {"containers": [{"name": "w", "image": other}]}}}
            ],
        },
    }
    debugged = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "prod"},
        "spec": {
            "containers": [{"name": "a", "image": f"{image}@sha256:{'0' * 64}"}],
            "ephemeralContainers": [{"name": "debug", "image": other}],
        },
    }
    return [deployment, ray, debugged]


@pytest.mark.registry
def test_check_fix_prints_what_the_webhook_would_run(registry: LocalRegistry, tmp_path: Path) -> None:
    key = generate_private_key()
    host = registry.host
    digests: dict[str, str] = {}

    async def publish() -> None:
        async with RegistryClient(plain_config(host)) as client:
            for repository in ("server", "sidecar"):
                ref = ImageReference.parse(f"{host}/inference/{repository}:v1")
                digests[repository] = await push_image(client, ref, tiny_image())
                await sign_image(client, ref.with_digest(digests[repository]), key)

    asyncio.run(publish())
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "keys.yaml").write_text(trusted_keys_yaml("platform", {"image-signer": key.public_key()}))
    (policies / "policy.yaml").write_text(POLICY.replace("HOST", host))
    config = tmp_path / "registries.yaml"
    config.write_text(f'registries:\n  "{host}":\n    plain_http: true\n')
    manifests = _manifests(host)[:2]
    source = tmp_path / "app.yaml"
    source.write_text(yaml.safe_dump_all(manifests))
    common = ("--policies", policies, "--registry-config", config)

    # judged as admitted: the mutating webhook pins the tags, the policies then judge the pinned object
    status, out, _ = run_cli("check", *common, source)
    assert status == 0, out
    assert out.count("  pinned: ") == 5 and "  pinned: spec.template.spec.initContainers[0].image -> " in out
    status, out, err = run_cli("check", *common, "--fix", source)
    assert status == 0, err
    assert "d" in err and "ray" in err, "the report goes to stderr"
    deployment, ray = yaml.safe_load_all(out)
    server, sidecar = (f"{host}/inference/{r}:v1@{digests[r]}" for r in ("server", "sidecar"))
    spec = deployment["spec"]["template"]["spec"]
    assert [c["image"] for c in spec["initContainers"] + spec["containers"]] == [server] * 3
    assert ray["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] == server
    assert ray["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["image"] == sidecar
    kubernetes_validate.validate(deployment, kubernetes_validate.latest_version(), strict=True)
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text(out)
    status, out, err = run_cli("check", *common, "--fix", fixed)
    assert status == 0, err
    assert list(yaml.safe_load_all(out)) == [deployment, ray], "pinning twice changes nothing"
    status, _, err = run_cli("check", *common, fixed)
    assert status == 0, err


@pytest.mark.registry
def test_an_ephemeral_container_is_pinned_and_a_pinned_image_is_left_alone(
    registry: LocalRegistry, tmp_path: Path
) -> None:
    key = generate_private_key()
    host = registry.host

    async def publish() -> tuple[str, str]:
        async with RegistryClient(plain_config(host)) as client:
            found = []
            for repository in ("server", "sidecar"):
                ref = ImageReference.parse(f"{host}/inference/{repository}:v1")
                digest = await push_image(client, ref, tiny_image())
                await sign_image(client, ref.with_digest(digest), key)
                found.append(digest)
            return found[0], found[1]

    server, sidecar = asyncio.run(publish())
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "keys.yaml").write_text(trusted_keys_yaml("platform", {"image-signer": key.public_key()}))
    (policies / "policy.yaml").write_text(POLICY.replace("HOST", host))
    config = tmp_path / "registries.yaml"
    config.write_text(f'registries:\n  "{host}":\n    plain_http: true\n')
    pod = _manifests(host)[2]
    pod["spec"]["containers"][0]["image"] = f"{host}/inference/server:v1@{server}"
    source = tmp_path / "pod.yaml"
    source.write_text(yaml.safe_dump(pod))
    status, out, err = run_cli("check", "--policies", policies, "--registry-config", config, "--fix", source)
    assert status == 0, err
    [fixed] = yaml.safe_load_all(out)
    assert fixed["spec"]["containers"] == pod["spec"]["containers"]
    assert fixed["spec"]["ephemeralContainers"][0]["image"] == f"{host}/inference/sidecar:v1@{sidecar}"
    kubernetes_validate.validate(fixed, kubernetes_validate.latest_version(), strict=True)


def test_a_storage_uri_is_pinned_inside_its_scheme() -> None:
    # KServe runs oci:// storage as a modelcar: the field holds the image behind its scheme
    model = {"storageUri": "oci://r/m:1", "storageUris": [{"uri": "oci+native://r/m:1"}]}
    obj = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "spec": {"predictor": model},
    }
    decision = _decision(
        ("spec.predictor.storageUri", "r/m:1"), ("spec.predictor.storageUris[0].uri", "r/m:1")
    )
    assert written(obj, "spec.predictor.storageUri", "r/m:1") == "oci://"
    assert apply_patch(obj, patch_for(obj, decision))["spec"]["predictor"] == {
        "storageUri": f"oci://r/m:1@{DIGEST}",
        "storageUris": [{"uri": f"oci+native://r/m:1@{DIGEST}"}],
    }
    # a field that names the image otherwise cannot hold a pin: nothing may be written there
    composed: dict[str, Any] = {
        "spec": {"image": {"repository": "r/m", "tag": "1"}, "name": {"image": "m", "repository": "r"}}
    }
    assert written(composed, "spec.image", "r/m:1") is None
    assert written(composed, "spec.name.image", "r/m") is None
    assert written({"spec": {"u": "s3://r/m:1"}}, "spec.u", "r/m:1") is None


def _publish(host: str, *repositories: str) -> tuple[Any, dict[str, str]]:
    """Push and sign ``HOST/inference/REPO:v1`` for each repository; the signing key and the digests."""
    key = generate_private_key()
    digests: dict[str, str] = {}

    async def publish() -> None:
        async with RegistryClient(plain_config(host)) as client:
            for repository in repositories:
                ref = ImageReference.parse(f"{host}/inference/{repository}:v1")
                digests[repository] = await push_image(client, ref, tiny_image())
                await sign_image(client, ref.with_digest(digests[repository]), key)

    asyncio.run(publish())
    return key, digests


def _check_args(host: str, key: Any, tmp_path: Path, *policies: str) -> tuple[object, ...]:
    folder = tmp_path / "policies"
    folder.mkdir()
    (folder / "keys.yaml").write_text(trusted_keys_yaml("platform", {"image-signer": key.public_key()}))
    for number, policy in enumerate(policies or (POLICY,)):
        (folder / f"policy-{number}.yaml").write_text(policy.replace("HOST", host))
    config = tmp_path / "registries.yaml"
    config.write_text(f'registries:\n  "{host}":\n    plain_http: true\n')
    return ("--policies", folder, "--registry-config", config)


@pytest.mark.registry
def test_check_fix_pins_a_kserve_modelcar(registry: LocalRegistry, tmp_path: Path) -> None:
    host = registry.host
    key, digests = _publish(host, "model")
    common = _check_args(host, key, tmp_path)
    isvc: dict[str, Any] = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "llm", "namespace": "prod"},
        "spec": {
            "predictor": {
                "model": {
                    "modelFormat": {"name": "pytorch"},
                    "storageUri": f"oci://{host}/inference/model:v1",
                }
            }
        },
    }
    source = tmp_path / "isvc.yaml"
    source.write_text(yaml.safe_dump(isvc, sort_keys=False))
    status, out, err = run_cli("check", *common, "--fix", source)
    assert status == 0, err
    [fixed] = yaml.safe_load_all(out)
    pinned = f"oci://{host}/inference/model:v1@{digests['model']}"
    assert fixed["spec"]["predictor"]["model"]["storageUri"] == pinned
    fixed["spec"]["predictor"]["model"]["storageUri"] = isvc["spec"]["predictor"]["model"]["storageUri"]
    assert fixed == isvc, "nothing but the storage URI changed"
    again = tmp_path / "fixed.yaml"
    again.write_text(out)
    status, out_again, err = run_cli("check", *common, "--fix", again)
    assert status == 0 and out_again == out, err


@pytest.mark.registry
def test_check_fix_leaves_what_it_cannot_pin_as_it_was_and_says_so(
    registry: LocalRegistry, tmp_path: Path
) -> None:
    host = registry.host
    key, digests = _publish(host, "server")
    common = _check_args(host, key, tmp_path, POLICY.replace("match: {namespaces: [prod]}", "match: {}"))
    image = f"{host}/inference/server:v1"
    # kinds trtguard does not know, judged as the webhook judges them: images found by searching
    composed: dict[str, Any] = {
        "kind": "Widget",
        "apiVersion": "example.com/v1",
        "metadata": {"name": "composed", "namespace": "prod"},
        "spec": {"server": {"image": {"repository": f"{host}/inference/server", "tag": "v1"}}},
    }
    odd_keys: dict[str, Any] = {
        "kind": "Widget",
        "apiVersion": "example.com/v1",
        "metadata": {"name": "odd-keys", "namespace": "prod"},
        "spec": {"models": {"a/b~c.d": {"image": image}, "z": {"image": image}}, "copy": {"note": image}},
    }
    source = tmp_path / "widgets.yaml"
    source.write_text(yaml.safe_dump_all([composed, odd_keys], sort_keys=False))
    status, out, err = run_cli("check", *common, "--unknown-kinds", "judge", "--fix", source)
    assert status == 1, err
    left, pinned = yaml.safe_load_all(out)
    assert left == composed and list(left) == list(composed), "printed as it was, in its own key order"
    assert "pinDigest" in err and "cannot be pinned" in err and "spec.server.image" in err
    assert "Widget prod/composed" in err and "printed as it was" in err
    assert pinned["spec"]["models"] == {
        "a/b~c.d": {"image": f"{image}@{digests['server']}"},
        "z": {"image": f"{image}@{digests['server']}"},
    }
    assert pinned["spec"]["copy"] == odd_keys["spec"]["copy"] and list(pinned) == list(odd_keys)
    # not judged (an unknown kind, by default): untouched, and said so
    status, out, err = run_cli("check", *common, "--fix", source)
    assert status == 0, err
    assert list(yaml.safe_load_all(out)) == [composed, odd_keys]
    assert "Widget prod/odd-keys" in err and "not judged" in err and "printed as it was" in err


POLICY_REQUIRING_DIGESTS = """\
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
POLICY_PINNING_ENGINES = """\
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: engines}
spec:
  match: {namespaces: [prod]}
  images:
    - name: runtime
      match: ["HOST/inference/*"]
      pinDigest: true
      signatures: {keys: [platform/image-signer]}
  models:
    engines: ["HOST/inference/engine*"]
"""


@pytest.mark.registry
def test_check_judges_as_admission_does_pinned_first_then_validated(
    registry: LocalRegistry, tmp_path: Path
) -> None:
    """pinDigest in one policy, a digest required by another (an image rule, an engine rule): the cluster
    runs the mutating webhook first, so the other policies judge the pinned references."""
    host = registry.host
    key, digests = _publish(host, "server", "engine")
    common = _check_args(host, key, tmp_path, POLICY, POLICY_REQUIRING_DIGESTS, POLICY_PINNING_ENGINES)
    server, engine = f"{host}/inference/server:v1", f"{host}/inference/engine:v1"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "prod"},
        "spec": {
            "containers": [
                {"name": "a", "image": server, "volumeMounts": [{"name": "e", "mountPath": "/e"}]}
            ],
            "volumes": [{"name": "e", "image": {"reference": engine}}],
        },
    }
    source = tmp_path / "pod.yaml"
    source.write_text(yaml.safe_dump(pod))
    status, out, err = run_cli("check", *common, source)
    assert status == 0, out
    assert "ALLOW" in out and f"pinned: spec.containers[0].image -> {server}@{digests['server']}" in out
    assert f"pinned: spec.volumes[0].image.reference -> {engine}@{digests['engine']}" in out
    status, out, err = run_cli("check", *common, "--fix", source)
    assert status == 0, err
    [fixed] = yaml.safe_load_all(out)
    assert fixed["spec"]["containers"][0]["image"] == f"{server}@{digests['server']}"
    assert fixed["spec"]["volumes"][0]["image"]["reference"] == f"{engine}@{digests['engine']}"
    # what another rule refuses is still refused, pinned or not
    unsigned = pod | {"metadata": {"name": "q", "namespace": "prod"}}
    unsigned["spec"] = {"containers": [{"name": "a", "image": f"{host}/other/server:v1"}]}
    source.write_text(yaml.safe_dump(unsigned))
    status, out, _ = run_cli("check", *common, source)
    assert status == 1 and "digests-only/images.everything.requireDigest" in out


class _MovingTag(RegistryEvidence):
    """The real registry's evidence, which moves ``tag`` to other bytes right after resolving it the first
    time: any later resolution would name bytes nobody signed."""

    def __init__(self, client: RegistryClient, tag: ImageReference) -> None:
        super().__init__(client)
        self.registry, self.tag, self.resolved = client, tag, list[str]()

    async def resolve_digest(self, reference: ImageReference, deadline: Deadline) -> str:
        digest = await super().resolve_digest(reference, deadline)
        if str(reference) == str(self.tag):
            self.resolved.append(digest)
            if len(self.resolved) == 1:
                await push_image(self.registry, self.tag, tiny_image())
        return digest


@pytest.mark.registry
async def test_the_pins_and_the_verdict_rest_on_one_resolution_of_the_tag(
    registry: LocalRegistry, tmp_path: Path
) -> None:
    """Three policies ask about one tag (two of them pin it), and the pinned object is judged again: the tag
    is resolved once, though it moves right after, so the patch names the bytes every rule judged."""
    host = registry.host
    key, digests = await asyncio.to_thread(_publish, host, "server")
    args = _check_args(host, key, tmp_path, POLICY, POLICY_REQUIRING_DIGESTS, POLICY_PINNING_ENGINES)
    tag = ImageReference.parse(f"{host}/inference/server:v1")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "prod"},
        "spec": {"containers": [{"name": "a", "image": str(tag)}, {"name": "b", "image": str(tag)}]},
    }
    async with RegistryClient(plain_config(host)) as client:
        evidence = _MovingTag(client, tag)
        engine = PolicyEvaluator(load_policy_set([Path(str(args[1]))]), evidence)
        decision = await engine.evaluate(pod, pin=True)
    assert decision.allowed, decision.violations
    assert [pin.pinned for pin in decision.pins] == [f"{tag}@{digests['server']}"] * 2
    assert evidence.resolved == [digests["server"]], "resolved once; moved after, and never asked again"

"""The MutatingWebhookConfiguration (issue 29): the validating webhook's requests, fail-closed, at /mutate.

And what it sends back: for every built-in kind its rules match, ``trtguard check --fix`` (the same patch as
``/mutate``) against a real registry pins every image field, and the patched object is still a valid object
of its kind (``kubernetes-validate``, strict, at the chart's Kubernetes versions).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from policies.schema import trusted_keys_yaml
from tests.charts.helm_chart import KUBE_VERSIONS, one, render
from tests.charts.test_chart_webhook import OPERATORS, SELECTOR_VALUES, webhook
from tests.policies.registry_world import run_cli, sign_image
from tests.support.images import push_image, tiny_image
from tests.support.localregistry import LocalRegistry, plain_config, start_registry
from verifier.base._references import ImageReference
from verifier.crypto._keys import generate_private_key
from verifier.registry.client import RegistryClient

pytestmark = pytest.mark.helm
ENABLED = {"mutatingWebhook.enabled": True}


def mutating(docs: list[dict[str, Any]]) -> dict[str, Any]:
    configuration = one(docs, "MutatingWebhookConfiguration")
    assert len(configuration["webhooks"]) == 1
    hook: dict[str, Any] = configuration["webhooks"][0]
    return hook


def test_off_by_default() -> None:
    assert not [d for d in render() if d["kind"] == "MutatingWebhookConfiguration"]


@pytest.mark.parametrize("case", sorted(SELECTOR_VALUES))
def test_it_sees_what_the_validating_webhook_sees(case: str) -> None:
    docs = render(set_json={**SELECTOR_VALUES[case], **ENABLED, "webhook.operators": list(OPERATORS)})
    validating, pinning = webhook(docs), mutating(docs)
    assert pinning.pop("name") == "pins.trtguard.dev"
    assert pinning.pop("reinvocationPolicy") == "IfNeeded"
    assert pinning["clientConfig"]["service"].pop("path") == "/mutate"
    assert validating["clientConfig"]["service"].pop("path") == "/validate"
    del validating["name"]
    assert pinning == validating, "the same namespaces, conditions, rules, timeout and service"


def test_it_fails_closed_whatever_the_validating_webhook_does() -> None:
    docs = render(set_json={**ENABLED, "webhook.failurePolicy": "Ignore"})
    assert webhook(docs)["failurePolicy"] == "Ignore"
    assert mutating(docs)["failurePolicy"] == "Fail"


@pytest.mark.parametrize("version", KUBE_VERSIONS)
def test_the_configuration_is_valid(version: str) -> None:
    configuration = one(render(set_json=ENABLED), "MutatingWebhookConfiguration")
    kubernetes_validate.validate(configuration, version, strict=True)


POLICY = """\
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: pinning}
spec:
  images:
    - name: runtime
      match: ["HOST/inference/*"]
      pinDigest: true
      signatures: {keys: [platform/image-signer]}
"""
#: The built-in kinds by resource name, as the rules name them.
KINDS = {
    "pods": ("v1", "Pod"),
    "replicationcontrollers": ("v1", "ReplicationController"),
    "deployments": ("apps/v1", "Deployment"),
    "replicasets": ("apps/v1", "ReplicaSet"),
    "statefulsets": ("apps/v1", "StatefulSet"),
    "daemonsets": ("apps/v1", "DaemonSet"),
    "jobs": ("batch/v1", "Job"),
    "cronjobs": ("batch/v1", "CronJob"),
}


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    running = start_registry(tmp_path_factory.mktemp("chart-pinning-registry"), http={}, auth=None)
    yield running
    running.stop()


def _pod_spec(image: str, volume: str) -> dict[str, Any]:
    return {
        "initContainers": [{"name": "warmup", "image": image}],
        "containers": [
            {"name": "server", "image": image, "volumeMounts": [{"name": "d", "mountPath": "/d"}]}
        ],
        "volumes": [{"name": "d", "image": {"reference": volume}}],
    }


def _workload(api_version: str, kind: str, image: str, volume: str) -> dict[str, Any]:
    metadata = {"name": kind.lower(), "namespace": "prod", "labels": {"app": "a"}}
    spec = _pod_spec(image, volume)
    if kind == "Pod":
        spec["ephemeralContainers"] = [{"name": "debug", "image": volume}]
        return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec}
    template = {"metadata": {"labels": {"app": "a"}}, "spec": spec}
    if kind in ("Job", "CronJob"):
        spec["restartPolicy"] = "Never"
        job: dict[str, Any] = {"template": template}
        if kind == "Job":
            return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": job}
        cron = {"schedule": "0 * * * *", "jobTemplate": {"spec": job}}
        return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": cron}
    selector: dict[str, Any] = (
        {"app": "a"} if kind == "ReplicationController" else {"matchLabels": {"app": "a"}}
    )
    body: dict[str, Any] = {"selector": selector, "template": template}
    if kind == "StatefulSet":
        body["serviceName"] = "s"
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": body}


@pytest.mark.registry
def test_every_kind_it_matches_is_patched_into_a_valid_object(
    registry: LocalRegistry, tmp_path: Path
) -> None:
    hook = mutating(render(set_json=ENABLED))
    resources = [r for rule in hook["rules"] for r in rule["resources"] if "/" not in r]
    assert sorted(resources) == sorted(KINDS), "a kind the webhook matches that this test does not patch"
    key, host = generate_private_key(), registry.host
    image, volume = f"{host}/inference/server:v1", f"{host}/inference/tools:v1"
    digests: dict[str, str] = {}

    async def publish() -> None:
        async with RegistryClient(plain_config(host)) as client:
            for text in (image, volume):
                ref = ImageReference.parse(text)
                digests[text] = await push_image(client, ref, tiny_image())
                await sign_image(client, ref.with_digest(digests[text]), key)

    asyncio.run(publish())
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "keys.yaml").write_text(trusted_keys_yaml("platform", {"image-signer": key.public_key()}))
    (policies / "policy.yaml").write_text(POLICY.replace("HOST", host))
    config = tmp_path / "registries.yaml"
    config.write_text(f'registries:\n  "{host}":\n    plain_http: true\n')
    source = tmp_path / "workloads.yaml"
    source.write_text(yaml.safe_dump_all([_workload(*KINDS[r], image, volume) for r in sorted(KINDS)]))
    status, out, err = run_cli(
        "check", "--policies", policies, "--registry-config", config, "--namespace", "prod", "--fix", source
    )
    assert status == 0, err
    patched = list(yaml.safe_load_all(out))
    assert [d["kind"] for d in patched] == [KINDS[r][1] for r in sorted(KINDS)]
    text = yaml.safe_dump_all(patched)
    assert f"{image}@{digests[image]}" in text and f"{volume}@{digests[volume]}" in text
    assert "tools:v1\n" not in text and "server:v1\n" not in text, "every image field is pinned"
    for document in patched:
        for version in KUBE_VERSIONS:
            kubernetes_validate.validate(document, version, strict=True)

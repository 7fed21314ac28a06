"""Issue 20 end to end: the library's scanned-images, gitops-deployers and gpu-fit policies through
``trtguard check --registry`` and a real ``trtguard serve``, against a real registry.

Images are pushed to Debian's docker-registry; their SBOM (real cyclonedx-py output) and scans (real
pip-audit output, and the VEX document 609) are signed with ``trtguard attest`` and pushed with
``--push``; an engine is pushed with ``push-engine`` and its build manifest attached. Scan times are
written at test time (now, or 30 days ago), so the verdicts do not depend on when the suite runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml

from tests.conftest import DATA
from tests.policies.conftest import manifest_data
from tests.support.harness import SERVICE, WebhookProcess, review
from tests.support.images import push_image, tiny_image
from tests.support.localregistry import LocalRegistry, plain_config, start_registry
from trtguard.cli import main
from trtguard.demo.material import LIBRARY
from verifier.base._references import ImageReference
from verifier.crypto._keys import encrypt_private_key, generate_private_key
from verifier.registry.client import RegistryClient

pytestmark = pytest.mark.registry

PASSWORD = "checklist test"
VULN = "https://cosign.sigstore.dev/attestation/vuln/v1"
CDX = "https://cyclonedx.org/bom"
NO_CRITICAL = f"images.containers.attestations[{VULN}].vulnerabilities"
ARGOCD = "system:serviceaccount:argocd:argocd-application-controller"
H200 = {"nvidia.com/gpu.compute.major": "9", "nvidia.com/gpu.compute.minor": "0"}
#: Lt 10 and Lt 1 to the scheduler (strconv.ParseInt reads any number of leading zeros): 7.0, 8.0 and 9.0 GPUs
ZEROS = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {
                            "key": "nvidia.com/gpu.compute.major",
                            "operator": "Lt",
                            "values": ["0000000000000000010"],
                        },
                        {
                            "key": "nvidia.com/gpu.compute.minor",
                            "operator": "Lt",
                            "values": ["00000000000000000001"],
                        },
                    ]
                }
            ]
        }
    }
}


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    running = start_registry(tmp_path_factory.mktemp("checklist-registry"), http={}, auth=None)
    yield running
    running.stop()


def _cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        status = main(list(args))
    return status, out.getvalue()


def _time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _scan(result: str, finished: datetime) -> dict[str, Any]:
    moment = _time(finished)
    return {
        "scanner": {"uri": "pkg:pypi/pip-audit@2.10.1", "result": json.loads((DATA / result).read_text())},
        "metadata": {"scanStartedOn": moment, "scanFinishedOn": moment},
    }


@pytest.fixture(scope="module")
def world(registry: LocalRegistry, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Images with signed SBOMs and scans, an engine with a signed manifest, the library policies."""
    root = tmp_path_factory.mktemp("checklist")
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("TRTGUARD_PASSWORD", PASSWORD)
    host = registry.host
    config = root / "registries.yaml"
    config.write_text(f'registries:\n  "{host}":\n    plain_http: true\n')
    keys = {name: generate_private_key() for name in ("image-signer", "build-signer")}
    policies = root / "policies"
    policies.mkdir()
    for name, key in keys.items():
        (root / f"{name}.key").write_bytes(encrypt_private_key(key, PASSWORD.encode()))
        (policies / f"{name}.pub").write_bytes(key.public_key().to_pem())
    (policies / "keys.yaml").write_text(
        "apiVersion: trtguard.dev/v1alpha1\nkind: TrustedKeys\nmetadata: {name: platform}\nspec:\n  keys:\n"
        "    - {name: image-signer, file: image-signer.pub}\n"
        "    - {name: build-signer, file: build-signer.pub}\n"
    )
    # The three checklist policies as shipped, each in a namespace of its own, so one server holds them.
    for name, namespace in (
        ("scanned-images.yaml", "prod-scans"),
        ("gitops-deployers.yaml", "prod-deploy"),
        ("gpu-fit.yaml", "prod-gpu"),
    ):
        text = (LIBRARY.parent / "templates" / name).read_text()
        assert 'namespaces: ["prod", "prod-*"]' in text
        (policies / name).write_text(
            text.replace('namespaces: ["prod", "prod-*"]', f"namespaces: [{namespace}]")
        )

    images = {name: tiny_image(name) for name in ("clean", "critical", "stale", "future", "runtime")}

    async def push() -> None:
        async with RegistryClient(plain_config(host)) as client:
            for name, image in images.items():
                await push_image(client, ImageReference.parse(f"{host}/team/{name}:1.0"), image)

    asyncio.run(push())
    now = datetime.now(UTC)
    scans = {
        "clean": _scan("606-pip-audit-clean.cdx.json", now),
        "critical": _scan("609-cyclonedx-vex-pyyaml-ratings.cdx.json", now),
        "stale": _scan("606-pip-audit-clean.cdx.json", now - timedelta(days=30)),
        "future": _scan("606-pip-audit-clean.cdx.json", now),
    }
    sbom = json.loads((DATA / "607-cyclonedx-py-requirements.cdx.json").read_text())
    sboms = {name: [sbom] for name in scans}
    # today's SBOM lists nothing (pip-audit offline: cannot tell); one dated next month would be the
    # newest, and hide it, were it not refused
    ahead = {**sbom, "metadata": {**sbom["metadata"], "timestamp": _time(now + timedelta(days=30))}}
    sboms["future"] = [json.loads((DATA / "602-pip-audit-offline-skipped.cdx.json").read_text()), ahead]
    for name, scan in scans.items():
        subject = root / f"{name}.manifest.json"
        subject.write_bytes(images[name].manifest)  # the image manifest: its sha256 is the image digest
        for index, (predicate_type, predicate) in enumerate(
            [(VULN, scan), *((CDX, document) for document in sboms[name])]
        ):
            file = root / f"{name}.{index}.json"
            file.write_text(json.dumps(predicate))
            status, _ = _cli(
                "attest", "--predicate", str(file), "--type", predicate_type, "--subject", str(subject),
                "--key", str(root / "image-signer.key"), "--push", f"{host}/team/{name}:1.0",
                "--registry-config", str(config),
            )  # fmt: skip
            assert status == 0

    runtime = f"{host}/team/runtime@{images['runtime'].digest}"
    engine = root / "model.plan"
    engine.write_bytes(b"a TensorRT engine built on an H200, for the checklist test" * 50)
    predicate = root / "manifest.json"
    toolchain = {"image": runtime, "tensorrt_version": "10.5.0.18", "cuda_version": "12.6.3"}
    predicate.write_text(json.dumps(manifest_data(engine.read_bytes(), toolchain=toolchain)))
    envelope = root / "manifest.dsse.json"
    status, _ = _cli(
        "attest", "--predicate", str(predicate), "--type", "https://trtguard.dev/attestations/engine-build/v1",
        "--subject", str(engine), "--key", str(root / "build-signer.key"), "--output", str(envelope),
    )  # fmt: skip
    assert status == 0
    status, out = _cli(
        "push-engine", str(engine), "--to", f"{host}/models/resnet:v1", "--registry-config", str(config)
    )
    assert status == 0
    engine_ref = out.strip()
    status, _ = _cli(
        "attach-attestation", str(envelope), "--to", engine_ref, "--registry-config", str(config)
    )
    assert status == 0
    return {
        "root": root,
        "config": config,
        "policies": policies,
        "host": host,
        "runtime": runtime,
        "engine": engine_ref,
        "monkeypatch": monkeypatch,
    }


def _pod(name: str, namespace: str, image: str, *, engine: str | None = None, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "server", "image": image}
    body: dict[str, Any] = {"containers": [container], **spec}
    if engine is not None:
        container["volumeMounts"] = [{"name": "engine", "mountPath": "/models"}]
        body["volumes"] = [{"name": "engine", "image": {"reference": engine}}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": body,
    }


def _deployment(world: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "server", "namespace": "prod-deploy"},
        "spec": {
            "selector": {"matchLabels": {"app": "server"}},
            "template": {
                "metadata": {"labels": {"app": "server"}},
                "spec": {"containers": [{"name": "server", "image": world["runtime"]}]},
            },
        },
    }


def _scanned(world: dict[str, Any], name: str) -> dict[str, Any]:
    return _pod(name, "prod-scans", f"{world['host']}/team/{name}:1.0")


def _gpu(world: dict[str, Any], name: str, **spec: Any) -> dict[str, Any]:
    return _pod(name, "prod-gpu", world["runtime"], engine=world["engine"], **spec)


def check(world: dict[str, Any], obj: dict[str, Any], *extra: str) -> tuple[int, dict[str, Any]]:
    path = world["root"] / f"{obj['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(obj))
    status, out = _cli(
        "check", "--policies", str(world["policies"]), "--registry-config", str(world["config"]),
        "--format", "json", *extra, str(path),
    )  # fmt: skip
    [result] = json.loads(out)
    return status, result


def rules(result: dict[str, Any]) -> set[tuple[str, str, bool]]:
    return {(v["policy"], v["rule"], v["error"]) for v in result["violations"]}


def test_check_admits_a_fresh_clean_scan_and_denies_a_critical_finding_and_a_stale_scan(
    world: dict[str, Any],
) -> None:
    status, result = check(world, _scanned(world, "clean"))
    assert status == 0, result
    status, result = check(world, _scanned(world, "critical"))
    assert status == 1
    assert rules(result) == {("scanned-images", NO_CRITICAL, False)}
    status, result = check(world, _scanned(world, "stale"))
    assert rules(result) == {("scanned-images", f"images.containers.attestations[{VULN}].maxAge", False)}
    assert "more than the 7d allowed" in result["violations"][0]["message"]


def test_check_refuses_an_sbom_dated_in_the_future_that_would_hide_todays(world: dict[str, Any]) -> None:
    status, result = check(world, _scanned(world, "future"))
    assert status == 1
    assert rules(result) == {("scanned-images", f"images.containers.attestations[{CDX}]", False)}
    assert "says it was made in the future" in result["violations"][0]["message"]


def test_check_as_names_the_requester(world: dict[str, Any]) -> None:
    deployment = _deployment(world)
    assert check(world, deployment, "--as", ARGOCD)[0] == 0
    status, result = check(world, deployment, "--as", "alice@example.com", "--as-group", "ml-engineers")
    assert status == 1 and rules(result) == {("gitops-deployers", "requester", False)}
    assert (
        "requester alice@example.com (groups: ml-engineers, system:authenticated)"
        in (result["violations"][0]["message"])
    )
    # without --as the rule cannot be checked: never passed; --unverifiable decides what that does
    status, result = check(world, deployment)
    assert status == 1 and rules(result) == {("gitops-deployers", "requester", True)}
    status, result = check(world, deployment, "--unverifiable", "warn")
    assert status == 0 and result["violations"] == []
    [warning] = result["warnings"]
    assert warning.startswith("gitops-deployers/requester:") and "the requester is unknown" in warning


def test_check_as_group_needs_as(world: dict[str, Any]) -> None:
    status, _ = _cli("check", "--policies", str(world["policies"]), "--as-group", "g", "-")
    assert status == 2


def test_check_denies_an_engine_the_node_selection_does_not_fit(world: dict[str, Any]) -> None:
    assert check(world, _gpu(world, "fits", nodeSelector=H200))[0] == 0
    status, result = check(world, _gpu(world, "unconfined"))
    assert status == 1
    assert rules(result) == {("engines-fit-gpus", "models.rules.gpuCompatibility.nodes", False)}
    assert 'nvidia.com/gpu.compute.major: "9"' in result["violations"][0]["fix"]
    status, result = check(world, _gpu(world, "zeros", affinity=ZEROS))
    assert status == 1
    assert rules(result) == {("engines-fit-gpus", "models.rules.gpuCompatibility.nodes", False)}
    assert "8.0, 9.0, where the engine does not load" in result["violations"][0]["message"]


@pytest.fixture(scope="module")
def server(world: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookProcess]:
    process = WebhookProcess(
        [
            "--policies",
            str(world["policies"]),
            "--registry-config",
            str(world["config"]),
            "--self-signed",
            "tls",
            "--san",
            SERVICE,
            "--decision-log",
            "sqlite:///decisions.db",
        ],
        tmp_path_factory.mktemp("checklist-serve"),
    )
    process.start()
    yield process
    process.stop()


async def _serve(
    server: WebhookProcess, obj: dict[str, Any], user: dict[str, Any] | None = None
) -> dict[str, Any]:
    body = review(obj=obj)
    if user is not None:
        body["request"]["userInfo"] = user
    async with server.client() as client:
        answer: dict[str, Any] = (await client.post(body)).json()["response"]
    return answer


async def test_serve_denies_a_critical_finding_and_a_stale_scan(
    world: dict[str, Any], server: WebhookProcess
) -> None:
    assert (await _serve(server, _scanned(world, "clean")))["allowed"] is True
    critical = await _serve(server, _scanned(world, "critical"))
    assert critical["allowed"] is False
    assert f"scanned-images/{NO_CRITICAL}" in critical["status"]["message"]
    stale = await _serve(server, _scanned(world, "stale"))
    assert stale["allowed"] is False and "more than the 7d allowed" in stale["status"]["message"]
    future = await _serve(server, _scanned(world, "future"))
    assert future["allowed"] is False
    assert f"scanned-images/images.containers.attestations[{CDX}]" in future["status"]["message"]
    assert "says it was made in the future" in future["status"]["message"]


async def test_serve_judges_the_requester_from_user_info(
    world: dict[str, Any], server: WebhookProcess
) -> None:
    deployment = _deployment(world)
    argocd = {"username": ARGOCD, "groups": ["system:serviceaccounts", "system:authenticated"]}
    assert (await _serve(server, deployment, argocd))["allowed"] is True
    alice = await _serve(server, deployment, {"username": "alice@example.com", "groups": ["ml-engineers"]})
    assert alice["allowed"] is False
    assert "gitops-deployers/requester" in alice["status"]["message"]
    assert "requester alice@example.com (groups: ml-engineers)" in alice["status"]["message"]
    # a request without userInfo says nothing about who asks: onError denies
    unknown = await _serve(
        server, {**deployment, "metadata": {"name": "other", "namespace": "prod-deploy"}}, {}
    )
    assert unknown["allowed"] is False and "the requester is unknown" in unknown["status"]["message"]


async def test_serve_denies_an_engine_the_node_selection_does_not_fit(
    world: dict[str, Any], server: WebhookProcess
) -> None:
    assert (await _serve(server, _gpu(world, "fits", nodeSelector=H200)))["allowed"] is True
    elsewhere = await _serve(
        server, _gpu(world, "elsewhere", nodeSelector={**H200, "nvidia.com/gpu.compute.major": "8"})
    )
    assert elsewhere["allowed"] is False
    assert "engines-fit-gpus/models.rules.gpuCompatibility.nodes" in elsewhere["status"]["message"]
    assert "compute capability 8.0" in elsewhere["status"]["message"]
    zeros = await _serve(server, _gpu(world, "zeros", affinity=ZEROS))
    assert zeros["allowed"] is False
    assert "8.0, 9.0, where the engine does not load" in zeros["status"]["message"]

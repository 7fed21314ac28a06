"""The GPU engine verifier Job and the engine build Job (disabled by default)."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from tests.charts.helm_chart import (
    CHART,
    FULLNAME,
    NAMESPACE,
    of_kind,
    one,
    pod_spec,
    render,
    render_error,
    selector_matches,
)
from trtguard.cli import parse_args
from verifier.registry.config import load_registry_config

pytestmark = pytest.mark.helm

JOBS = CHART / "ci" / "jobs-values.yaml"
PUBLISHED = "registry.example.com/models/resnet50:chg-2026-0042"
PUBLISH_CONFIG = f"{FULLNAME}-engine-build-registry"
BUILDER = (
    "registry.example.com/inference/tensorrt-trtguard@sha256:"
    "1111111111111111111111111111111111111111111111111111111111111111"
)


def job(docs: list[dict[str, Any]], component: str) -> dict[str, Any]:
    found = [
        j for j in of_kind(docs, "Job") if j["metadata"]["labels"]["app.kubernetes.io/component"] == component
    ]
    assert len(found) == 1, component
    return found[0]


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def mounts_of(container: dict[str, Any]) -> dict[str, str]:
    return {m["name"]: m["mountPath"] for m in container["volumeMounts"]}


def test_no_jobs_by_default() -> None:
    docs = render()
    assert not of_kind(docs, "Job")
    assert not [d for d in of_kind(docs, "NetworkPolicy") if "engine-build" in d["metadata"]["name"]]


def test_verifier_job_runs_verify_engine_on_a_gpu() -> None:
    verify = job(render(JOBS), "engine-verifier")
    spec = pod_spec(verify)
    (container,) = spec["containers"]
    assert container["image"] == BUILDER
    assert container["command"] == ["trtguard"]
    args = container["args"]
    assert args[:10] == [
        "verify-engine",
        "/artifacts/resnet50.engine",
        "--manifest",
        "/artifacts/resnet50.engine.manifest.json",
        "--key",
        "/etc/trtguard/verification-key/build-signer.pub",
        "--gpu",
        "--format",
        "json",
        "--attest",
    ]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert container["resources"]["requests"] == {"cpu": "2", "memory": "8Gi"}
    volumes = {v["name"]: v for v in spec["volumes"]}
    # The engine and its manifest come as an OCI artifact pinned by digest, read-only.
    assert volumes["artifacts"]["image"]["reference"].startswith(
        "registry.example.com/models/resnet50@sha256:"
    )
    assert mounts_of(container)["artifacts"] == "/artifacts"
    assert volumes["verification-key"]["configMap"]["name"] == "build-signer-public-key"
    env = env_of(container)
    # The key's password is a file from its Secret, never an environment variable (checkov CKV_K8S_35).
    assert "TRTGUARD_PASSWORD" not in env
    assert args[args.index("--password-file") + 1] == "/etc/trtguard/signing-password/password"
    assert mounts_of(container)["signing-password"] == "/etc/trtguard/signing-password"
    assert volumes["signing-password"]["secret"]["secretName"] == "gpu-verifier-key"
    assert volumes["signing-password"]["secret"]["items"] == [{"key": "password", "path": "password"}]
    assert env["ATTESTATION_KEY"]["value"] == "/etc/trtguard/signing/cosign.key"
    assert mounts_of(container)["signing"] == "/etc/trtguard/signing"
    assert spec["restartPolicy"] == "Never"
    assert spec["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H200"}
    assert verify["spec"]["backoffLimit"] == 0 and verify["spec"]["activeDeadlineSeconds"] == 1800


def test_verifier_job_reads_a_claim_and_a_key_secret_without_attestation() -> None:
    docs = render(
        JOBS,
        set_json={
            "verifierJob.artifacts": {"imageReference": "", "persistentVolumeClaim": "engines"},
            "verifierJob.verificationKey": {"configMap": "", "secret": "build-signer", "key": "cosign.pub"},
            "verifierJob.attestation.enabled": False,
        },
    )
    spec = pod_spec(job(docs, "engine-verifier"))
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["artifacts"]["persistentVolumeClaim"] == {"claimName": "engines", "readOnly": True}
    assert volumes["verification-key"]["secret"]["secretName"] == "build-signer"
    assert "signing" not in volumes and "signing-password" not in volumes
    (container,) = spec["containers"]
    assert "--attest" not in container["args"] and "--password-file" not in container["args"]


def test_build_job_builds_records_signs_then_publishes_in_the_pinned_image() -> None:
    build = job(render(JOBS), "engine-build")
    spec = pod_spec(build)
    steps: list[dict[str, Any]] = [*spec["initContainers"], *spec["containers"]]
    assert [c["name"] for c in spec["initContainers"]] == ["build", "record", "sign"]
    assert [c["name"] for c in spec["containers"]] == ["publish"]
    assert {c["image"] for c in steps} == {BUILDER}
    build_step, record, sign, publish = steps
    assert build_step["command"][:2] == ["/bin/sh", "-ec"]
    assert "trtexec" in build_step["command"][2]
    assert record["command"] == ["trtguard", "manifest", "create"]
    assert sign["command"] == ["trtguard", "attest"]
    env = env_of(record)
    assert env["TOOLCHAIN_IMAGE"]["value"] == BUILDER
    assert env["AUDIT_ID"]["value"] == "CHG-2026-0042"
    assert env["ENGINE_PATH"]["value"] == "/workspace/out/resnet50.engine"
    assert env["ONNX_PATH"]["value"] == "/workspace/input/models/resnet50.onnx"
    assert "$(TOOLCHAIN_IMAGE)" in record["args"] and "$(AUDIT_ID)" in record["args"]
    # The user's build script and the recording step run on the GPU; signing and publishing need none.
    for step in (build_step, record):
        assert step["resources"]["limits"]["nvidia.com/gpu"] == 1
    for step in (sign, publish):
        assert "nvidia.com/gpu" not in step.get("resources", {}).get("limits", {})
    assert (
        env_of(publish)["ENGINE_REFERENCE"]["value"] == "registry.example.com/models/resnet50:chg-2026-0042"
    )
    assert build["metadata"]["annotations"]["trtguard.dev/audit-id"] == "CHG-2026-0042"


def test_without_publish_signing_is_the_last_step() -> None:
    docs = render(JOBS, set_json={"buildJob.publish.reference": ""})
    spec = pod_spec(job(docs, "engine-build"))
    assert [c["name"] for c in spec["initContainers"]] == ["build", "record"]
    assert [c["name"] for c in spec["containers"]] == ["sign"]
    assert not [
        c for c in of_kind(docs, "ConfigMap") if c["metadata"]["name"].endswith("-engine-build-registry")
    ]


def test_only_signing_sees_the_key_and_only_publishing_the_registry_credentials(tmp_path: Path) -> None:
    docs = render(JOBS)
    spec = pod_spec(job(docs, "engine-build"))
    steps: list[dict[str, Any]] = [*spec["initContainers"], *spec["containers"]]
    build_step, record, sign, publish = steps
    for step in (build_step, record, publish):
        assert "signing" not in mounts_of(step) and "signing-password" not in mounts_of(step)
    for step in steps:
        assert "TRTGUARD_PASSWORD" not in env_of(step)
    for step in (build_step, record, sign):
        assert "publish-credentials" not in mounts_of(step)
    assert mounts_of(sign)["signing"] == "/etc/trtguard/signing"
    # The password is a file from its Secret, never an environment variable (checkov CKV_K8S_35).
    assert sign["args"][-2:] == ["--password-file", "/etc/trtguard/signing-password/password"]
    assert mounts_of(sign)["signing-password"] == "/etc/trtguard/signing-password"
    assert env_of(sign)["SIGNING_KEY"]["value"] == "/etc/trtguard/signing/cosign.key"
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["signing-password"]["secret"]["secretName"] == "build-signer-key"
    assert volumes["signing-password"]["secret"]["items"] == [{"key": "password", "path": "password"}]
    assert volumes["inputs"]["persistentVolumeClaim"] == {"claimName": "model-inputs", "readOnly": True}
    assert volumes["out"]["persistentVolumeClaim"] == {"claimName": "engine-outputs"}
    # The publish step's registry configuration loads and names the mounted push credentials.
    config_path = Path(env_of(publish)["TRTGUARD_REGISTRY_CONFIG"]["value"])
    config_map = next(
        c for c in of_kind(docs, "ConfigMap") if c["metadata"]["name"].endswith("-engine-build-registry")
    )
    assert volumes["publish-registry"]["configMap"]["name"] == config_map["metadata"]["name"]
    assert config_path.parent == Path(mounts_of(publish)["publish-registry"])
    (tmp_path / config_path.name).write_text(config_map["data"][config_path.name])
    config = load_registry_config(tmp_path / config_path.name)
    assert config.credentials_file is not None
    assert config.credentials_file.parent == Path(mounts_of(publish)["publish-credentials"])
    assert volumes["publish-credentials"]["secret"]["secretName"] == "engine-push"
    assert volumes["publish-credentials"]["secret"]["items"] == [
        {"key": ".dockerconfigjson", "path": config.credentials_file.name}
    ]


CLUSTER_DNS = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
}


def network_policy(docs: list[dict[str, Any]], component: str) -> dict[str, Any]:
    [policy] = [
        p for p in of_kind(docs, "NetworkPolicy") if p["metadata"]["name"] == f"{FULLNAME}-{component}"
    ]
    return policy


def test_build_pod_reaches_only_the_cluster_dns_and_the_registry() -> None:
    docs = render(JOBS)
    policy = network_policy(docs, "engine-build")
    assert policy["metadata"]["namespace"] == NAMESPACE
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert policy["spec"]["ingress"] == []
    dns, registry = policy["spec"]["egress"]
    # DNS only to the cluster's resolver Pods, not to any address on port 53.
    assert dns["to"] == [CLUSTER_DNS]
    assert {(p["port"], p["protocol"]) for p in dns["ports"]} == {(53, "UDP"), (53, "TCP")}
    assert registry == {
        "to": [{"ipBlock": {"cidr": "10.30.0.10/32"}}],
        "ports": [{"port": 443, "protocol": "TCP"}],
    }
    build_labels = job(docs, "engine-build")["spec"]["template"]["metadata"]["labels"]
    verifier_labels = job(docs, "engine-verifier")["spec"]["template"]["metadata"]["labels"]
    webhook_labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    selector = policy["spec"]["podSelector"]
    assert selector_matches(selector, build_labels)
    assert not selector_matches(selector, verifier_labels)
    assert not selector_matches(selector, webhook_labels)


def test_verifier_pod_gets_no_network_at_all() -> None:
    """It deserialises an untrusted engine on a GPU node: nothing in, nothing out (not even DNS)."""
    docs = render(JOBS)
    policy = network_policy(docs, "engine-verifier")
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert policy["spec"]["ingress"] == [] and policy["spec"]["egress"] == []
    selector = policy["spec"]["podSelector"]
    assert selector_matches(selector, job(docs, "engine-verifier")["spec"]["template"]["metadata"]["labels"])
    assert not selector_matches(selector, job(docs, "engine-build")["spec"]["template"]["metadata"]["labels"])
    assert not selector_matches(selector, one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"])
    # Arguments that push somewhere get the registry and DNS, and nothing else.
    docs = render(JOBS, set_json={"verifierJob.networkPolicy.registry.cidrs": ["10.30.0.10/32"]})
    dns, registry = network_policy(docs, "engine-verifier")["spec"]["egress"]
    assert dns["to"] == [CLUSTER_DNS]
    assert registry["to"] == [{"ipBlock": {"cidr": "10.30.0.10/32"}}]


def test_a_build_that_publishes_nothing_gets_no_network_at_all() -> None:
    docs = render(
        JOBS, set_json={"buildJob.publish.reference": "", "buildJob.networkPolicy.registry.cidrs": []}
    )
    assert network_policy(docs, "engine-build")["spec"]["egress"] == []


def test_publishing_needs_the_registry_addresses() -> None:
    error = render_error(JOBS, set_json={"buildJob.networkPolicy.registry.cidrs": []})
    assert "buildJob.publish.reference needs buildJob.networkPolicy.registry.cidrs" in error
    # Without the chart's NetworkPolicy the cluster's own policies decide.
    docs = render(
        JOBS,
        set_json={"buildJob.networkPolicy.registry.cidrs": [], "buildJob.networkPolicy.enabled": False},
    )
    assert not [p for p in of_kind(docs, "NetworkPolicy") if p["metadata"]["name"].endswith("-engine-build")]


def test_every_job_container_has_cpu_and_memory_requests_and_limits_by_default() -> None:
    """A TensorRT build or an engine load must not exhaust a shared GPU node (checkov CKV_K8S_10..13)."""
    docs = render(
        set_json={
            "verifierJob.enabled": True,
            "verifierJob.image": {"repository": "nvcr.io/nvidia/tensorrt", "digest": "sha256:" + "3" * 64},
            "verifierJob.artifacts.persistentVolumeClaim": "engines",
            "verifierJob.verificationKey.configMap": "keys",
            "buildJob.enabled": True,
            "buildJob.image": {"repository": "nvcr.io/nvidia/tensorrt", "digest": "sha256:" + "3" * 64},
            "buildJob.auditId": "CHG-1",
            "buildJob.script": "true",
            "buildJob.inputs.persistentVolumeClaim": "inputs",
            "buildJob.signingKey.secretName": "signer",
            "buildJob.passwordSecret.name": "signer",
        }
    )
    gpu_steps = {"verify-engine", "build", "record"}
    for component in ("engine-verifier", "engine-build"):
        spec = pod_spec(job(docs, component))
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            resources = container["resources"]
            for kind in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(resources[kind]), (container["name"], kind)
            assert ("nvidia.com/gpu" in resources["limits"]) is (container["name"] in gpu_steps)
    verify = pod_spec(job(docs, "engine-verifier"))["containers"][0]["resources"]
    assert verify == {
        "requests": {"cpu": "2", "memory": "8Gi"},
        "limits": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": 1},
    }


def test_a_changed_job_is_a_new_job() -> None:
    """Job Pod templates are immutable: a changed configuration must not try to update the old Job."""
    first = job(render(JOBS), "engine-build")["metadata"]["name"]
    again = job(render(JOBS), "engine-build")["metadata"]["name"]
    changed = job(render(JOBS, set_json={"buildJob.auditId": "CHG-2026-0043"}), "engine-build")["metadata"][
        "name"
    ]
    assert first == again != changed
    assert len(changed) <= 63


@pytest.mark.parametrize(
    ("set_json", "message"),
    [
        (
            {"buildJob.enabled": True, "buildJob.image.repository": "nvcr.io/nvidia/tensorrt"},
            "buildJob.enabled needs buildJob.image.repository and buildJob.image.digest (sha256:…): "
            "Jobs run only images pinned by digest",
        ),
        ({"buildJob.image.digest": "latest"}, "at '/buildJob/image/digest'"),
        (
            {"verifierJob.artifacts.imageReference": "registry.example.com/models/resnet50:v1"},
            "at '/verifierJob/artifacts/imageReference'",
        ),
    ],
)
def test_jobs_refuse_unpinned_images(set_json: dict[str, Any], message: str) -> None:
    assert message in render_error(set_json=set_json)


def test_build_job_needs_its_inputs_audit_id_and_key() -> None:
    base = {"buildJob.enabled": False}
    values = {
        **base,
        "buildJob.enabled": True,
        "buildJob.image": {"repository": "nvcr.io/nvidia/tensorrt", "digest": "sha256:" + "3" * 64},
        "buildJob.inputs.persistentVolumeClaim": "inputs",
    }
    assert "buildJob.enabled needs buildJob.auditId" in render_error(set_json=values)
    values["buildJob.auditId"] = "CHG-1"
    assert "buildJob.enabled needs buildJob.script" in render_error(set_json=values)
    values["buildJob.script"] = "true"
    assert "buildJob.enabled needs buildJob.signingKey.secretName" in render_error(set_json=values)
    values["buildJob.inputs.imageReference"] = "registry.example.com/m@sha256:" + "4" * 64
    assert "buildJob.inputs needs exactly one of imageReference" in render_error(set_json=values)


def kubelet_expand(args: list[str], env: dict[str, dict[str, Any]]) -> list[str]:
    """Replace $(NAME) with the container's variable, as the kubelet does (secrets get a stand-in)."""
    values = {name: variable.get("value", f"<{name}>") for name, variable in env.items()}
    return [re.sub(r"\$\(([A-Z_][A-Z0-9_]*)\)", lambda m: values[m.group(1)], arg) for arg in args]


def parse_cli(argv: list[str]) -> argparse.Namespace:
    """The real `trtguard` argument parser on ``argv``; a rejected command line fails the test."""
    try:
        return parse_args(argv)
    except SystemExit:
        pytest.fail(f"trtguard rejects the command line the chart renders: {argv}")


def test_job_command_lines_are_accepted_by_the_trtguard_cli() -> None:
    docs = render(JOBS)
    (verify,) = pod_spec(job(docs, "engine-verifier"))["containers"]
    parsed = parse_cli([*verify["command"][1:], *kubelet_expand(verify["args"], env_of(verify))])
    assert parsed.engine == Path("/artifacts/resnet50.engine")
    assert parsed.manifest == Path("/artifacts/resnet50.engine.manifest.json")
    assert parsed.key == [Path("/etc/trtguard/verification-key/build-signer.pub")]
    assert (parsed.gpu, parsed.format, parsed.attest) == (True, "json", True)
    assert parsed.attest_key == Path("/etc/trtguard/signing/cosign.key")
    assert parsed.attest_output == Path("/workspace/out/verification.json")
    assert parsed.password_file == Path(mounts_of(verify)["signing-password"]) / "password"

    spec = pod_spec(job(docs, "engine-build"))
    steps: list[dict[str, Any]] = [*spec["initContainers"], *spec["containers"]]
    _, record, sign, publish = steps
    parsed = parse_cli([*record["command"][1:], *kubelet_expand(record["args"], env_of(record))])
    assert parsed.onnx == Path("/workspace/input/models/resnet50.onnx")
    assert parsed.engine == Path("/workspace/out/resnet50.engine")
    assert parsed.toolchain_image == BUILDER and parsed.audit_id == "CHG-2026-0042"
    assert parsed.predicate_only is True
    parsed = parse_cli([*sign["command"][1:], *kubelet_expand(sign["args"], env_of(sign))])
    assert parsed.password_file == Path(mounts_of(sign)["signing-password"]) / "password"
    assert parsed.predicate == parsed_output(record)
    assert parsed.subject == Path("/workspace/out/resnet50.engine")
    assert parsed.key == Path("/etc/trtguard/signing/cosign.key")
    assert parsed.output == Path("/workspace/out/resnet50.engine.manifest.dsse.json")

    # The publish step is a shell line: each trtguard command in it must parse too.
    variables = {name: variable.get("value", "") for name, variable in env_of(publish).items()}
    script = publish["command"][2]
    commands = re.findall(r"trtguard ([^;)]+)", script)
    assert [c.split()[0] for c in commands] == ["push-engine", "attach-attestation"]
    for command in commands:
        words = [
            re.sub(r"^\$(\w+)$", lambda m: variables.get(m.group(1), "ref@sha256:" + "0" * 64), w)
            for w in shlex.split(command)
        ]
        parse_cli(words)


def parsed_output(record: dict[str, Any]) -> Path:
    args = kubelet_expand(record["args"], env_of(record))
    return Path(args[args.index("--output") + 1])

"""examples/k8s/verify-engine-job.yaml: a valid Job whose verify-engine command line parses."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from trtguard.cli import verify_engine as engine_cli

JOB = Path(__file__).resolve().parents[3] / "examples" / "k8s" / "verify-engine-job.yaml"


@pytest.fixture(scope="module")
def job() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(JOB.read_text())
    return document


def test_valid_job_for_kubernetes_1_33(job: dict[str, Any]) -> None:
    kubernetes_validate.validate(job, "1.33.0", strict=True)


def test_gpu_node_and_restricted_security(job: dict[str, Any]) -> None:
    pod = job["spec"]["template"]["spec"]
    assert job["spec"]["backoffLimit"] == 0
    assert pod["nodeSelector"]["nvidia.com/gpu.present"] == "true"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert pod["automountServiceAccountToken"] is False
    verify = next(c for c in pod["initContainers"] if c["name"] == "verify")
    assert verify["resources"]["limits"]["nvidia.com/gpu"] == 1
    for container in [*pod["initContainers"], *pod["containers"]]:
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False
        assert context["readOnlyRootFilesystem"] is True
        assert context["capabilities"]["drop"] == ["ALL"]
        assert "@sha256:" in container["image"]


def test_verify_command_uses_real_flags(job: dict[str, Any]) -> None:
    verify = next(c for c in job["spec"]["template"]["spec"]["initContainers"] if c["name"] == "verify")
    script = verify["args"][0].replace("\\\n", " ")
    argv = shlex.split(script.splitlines()[0])
    assert argv[:2] == ["trtguard", "verify-engine"]
    parser = argparse.ArgumentParser(prog="trtguard")
    engine_cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv[1:])
    assert args.gpu and args.attest
    assert str(args.attest_output) == "/work/verification.dsse.json"
    attach = job["spec"]["template"]["spec"]["containers"][0]["args"][0]
    assert "cosign attach attestation --attestation /work/verification.dsse.json" in attach

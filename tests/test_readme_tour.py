"""The README's tour runs as written: ``helm template … | trtguard check … -`` on an operator's chart, the
activation lines, and ``trtguard review`` and ``curl`` against the webhook ``make demo`` leaves running.

The chart's real ``helm template`` output is saved (tests/data/501-operator-manifests/helm/ray-cluster.yaml,
SOURCES.md there); the README's own ``trtguard check`` command line reads it on standard input, with the
library's test keys and attestations in place of ``my-keys.yaml`` and ``att/``, and prints the README's
output (the policy revision aside, which any edit of the library changes).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import DATA, REPO
from verifier.crypto._keys import generate_private_key

TRTGUARD = Path(sys.executable).with_name("trtguard")
CHART_OUTPUT = DATA / "501-operator-manifests" / "helm" / "ray-cluster.yaml"
_TOUR = re.compile(
    r"```sh\n(?P<repo>helm repo add [^\n]*)\n(?P<helm>helm template [^\n]*)\\\n\s*\| "
    r"(?P<check>trtguard check [^\n]*)\n```\n\n```text\n(?P<out>.*?)```",
    re.DOTALL,
)
#: The README's my-keys.yaml: the TrustedKeys document the tour's check commands load beside the library.
_MY_KEYS = re.compile(
    r"```yaml\n(?P<keys>apiVersion: trtguard\.dev/v1alpha1\nkind: TrustedKeys\n.*?)```", re.DOTALL
)
KUBERAY_CHARTS = "https://ray-project.github.io/kuberay-helm/"
_REVISION = re.compile(r"policy revision sha256:[0-9a-f]{64}")


def _my_keys(folder: Path) -> Path:
    """The README's my-keys.yaml, written into ``folder`` with a fresh key pair for each key it names."""
    found = _MY_KEYS.search((REPO / "README.md").read_text())
    assert found is not None, "the README no longer shows what my-keys.yaml holds"
    document = yaml.safe_load(found["keys"])
    assert document["metadata"]["name"] == "platform"
    assert [key["name"] for key in document["spec"]["keys"]] == ["image-signer", "build-signer"]
    for key in document["spec"]["keys"]:
        (folder / key["file"]).write_bytes(generate_private_key().public_key().to_pem())
    (folder / "my-keys.yaml").write_text(found["keys"])
    return folder / "my-keys.yaml"


def test_the_readme_tour_checks_an_operator_charts_helm_output(tmp_path: Path) -> None:
    found = _TOUR.search((REPO / "README.md").read_text())
    assert found is not None, "the README's helm template | trtguard check example is gone"
    # Attack 28 finding 6h: `kuberay/ray-cluster` needs KubeRay's chart repository added first.
    assert shlex.split(found["repo"]) == ["helm", "repo", "add", "kuberay", KUBERAY_CHARTS]
    helm = shlex.split(found["helm"])
    assert helm[:4] == ["helm", "template", "ray-cluster", "kuberay/ray-cluster"] and "--namespace" in helm
    assert f"--namespace {helm[helm.index('--namespace') + 1]}" in found["helm"]
    # Attack 28 finding 6g: my-keys.yaml is the one the README shows, with keys of the reader's own.
    replacements = {
        "my-keys.yaml": str(_my_keys(tmp_path)),
        "att/": "policies/library/tests/attestations",
    }
    argv = [replacements.get(arg, arg) for arg in shlex.split(found["check"])]
    assert argv[-1] == "-"
    result = subprocess.run(
        [str(TRTGUARD), *argv[1:]],
        input=CHART_OUTPUT.read_text(),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert _REVISION.sub("policy revision sha256:…", result.stdout) == found["out"]


_TRY = re.compile(r"\*\*Trying the webhook without a cluster:\*\*.*?```sh\n(?P<block>.*?)```", re.DOTALL)
_ACTIVATE = re.compile(r"```sh\n(?P<block>\. \.venv/bin/activate\n.*?)```", re.DOTALL)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _lines(block: str) -> list[str]:
    """The block's commands, continuation lines joined, comments dropped."""
    joined = block.replace("\\\n", " ")
    return [line.split("  #", 1)[0].strip() for line in joined.splitlines() if line.strip()]


def test_the_readme_activation_lines_run_as_written(tmp_path: Path) -> None:
    found = _ACTIVATE.search((REPO / "README.md").read_text())
    assert found is not None, "the README's activation block is gone"
    result = subprocess.run(
        ["bash", "-ec", found["block"]], capture_output=True, text=True, cwd=REPO, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("trtguard ")


def test_the_readme_review_and_curl_lines_answer_from_the_demo_webhook(tmp_path: Path) -> None:
    """``make demo DEMO_FLAGS=--keep-running``, then the README's first ``review`` line and its ``curl``."""
    found = _TRY.search((REPO / "README.md").read_text())
    assert found is not None, "the README's review block is gone"
    review, update, curl = _lines(found["block"])
    assert review.startswith("trtguard review .trtguard-demo/pods.yaml") and curl.startswith("curl ")
    assert update.startswith("trtguard review new.yaml --operation UPDATE --old running.yaml")
    port = str(_free_port())
    demo = subprocess.Popen(
        [sys.executable, "-m", "trtguard.demo", "--port", port, "--keep-running"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        assert demo.stdout is not None
        printed = []
        for line in demo.stdout:  # the demo prints this once its webhook is up and its files are written
            printed.append(line)
            if "The webhook keeps running" in line:
                break
        else:
            raise AssertionError("".join(printed))
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRTGUARD_")}
        env["PATH"] = f"{TRTGUARD.parent}:{env['PATH']}"
        answers = []
        for command in (review, curl):
            argv = [arg.replace("PORT", port) for arg in shlex.split(command)]
            answers.append(
                subprocess.run(
                    argv, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120, check=False
                )
            )
        assert answers[0].returncode == 1, answers[0].stdout + answers[0].stderr  # one admitted, four denied
        assert "5 resources: 1 allowed, 4 denied, 0 errors" in answers[0].stdout
        assert answers[1].returncode == 0, answers[1].stderr
        body = json.loads(answers[1].stdout)
        assert body["kind"] == "AdmissionReview" and body["response"]["allowed"] is True
    finally:
        demo.send_signal(signal.SIGINT)
        demo.wait(timeout=60)

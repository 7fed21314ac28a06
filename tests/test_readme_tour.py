"""The README's tour runs as written: ``helm template … | trtguard check … -`` on an operator's chart.

The chart's real ``helm template`` output is saved (tests/data/501-operator-manifests/helm/ray-cluster.yaml,
SOURCES.md there); the README's own ``trtguard check`` command line reads it on standard input, with the
library's test keys and attestations in place of ``my-keys.yaml`` and ``att/``, and prints the README's
output (the policy revision aside, which any edit of the library changes).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.conftest import DATA, REPO

TRTGUARD = Path(sys.executable).with_name("trtguard")
CHART_OUTPUT = DATA / "501-operator-manifests" / "helm" / "ray-cluster.yaml"
_TOUR = re.compile(
    r"```sh\n(?P<helm>helm template [^\n]*)\\\n\s*\| (?P<check>trtguard check [^\n]*)\n```\n\n"
    r"```text\n(?P<out>.*?)```",
    re.DOTALL,
)
_REVISION = re.compile(r"policy revision sha256:[0-9a-f]{64}")


def test_the_readme_tour_checks_an_operator_charts_helm_output() -> None:
    found = _TOUR.search((REPO / "README.md").read_text())
    assert found is not None, "the README's helm template | trtguard check example is gone"
    helm = shlex.split(found["helm"])
    assert helm[:4] == ["helm", "template", "ray-cluster", "kuberay/ray-cluster"] and "--namespace" in helm
    assert f"--namespace {helm[helm.index('--namespace') + 1]}" in found["helm"]
    replacements = {
        "my-keys.yaml": "policies/library/tests/keys.yaml",
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

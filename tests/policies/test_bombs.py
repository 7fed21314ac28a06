"""Inputs built to exhaust ``trtguard check`` and ``trtguard policy test``: YAML alias bombs in every file
they read, and a CEL expression that is cheap to write and expensive to evaluate. Each runs the real command
in a child process under a memory limit and measures its peak RSS: a bomb ends in a clean refusal (exit 2,
the file and line, the limit) or a denial, never in a traceback or the OOM killer.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.policies.cel.test_cost import costly_expression
from tests.policies.conftest import Material, pod
from tests.verifier.base.test_yamldoc import billion_laughs

TRTGUARD = Path(sys.executable).with_name("trtguard")
#: Address space for the child: several times what a normal run needs (~80 MB resident), far below
#: what the bombs took before they were bounded (3.4 GB resident for the check input, 9 GB to print it).
ADDRESS_SPACE = 1536 * 1024 * 1024
#: Peak resident memory a refusal may take; a normal small check takes about 80 MB.
PEAK_RSS = 250 * 1024 * 1024

POLICY = """\
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: images}
spec:
  images:
    - name: runtime
      match: ["nvcr.io/nvidia/tensorrt:*"]
"""

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: ok, namespace: prod}
spec:
  containers: [{name: server, image: "nvcr.io/nvidia/tensorrt:24.05-py3"}]
"""


@dataclass(frozen=True)
class Run:
    """One finished child: exit status, output, peak resident memory (bytes) and wall time (s)."""

    status: int
    out: str
    err: str
    peak_rss: int
    seconds: float


#: Starts the command from a small process of its own and reports the command's peak RSS: measured from
#: the test process, the fork would count the test process's own (large) memory before the exec.
_LAUNCHER = """
import os, resource, signal, sys
limit, seconds, out, err, *command = sys.argv[1:]
pid = os.fork()
if pid == 0:
    resource.setrlimit(resource.RLIMIT_AS, (int(limit), int(limit)))
    signal.alarm(int(seconds))  # survives the exec: a command that hangs is killed
    os.dup2(os.open(out, os.O_WRONLY), 1)
    os.dup2(os.open(err, os.O_WRONLY), 2)
    os.execv(command[0], command)
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024)
"""


def run_limited(tmp_path: Path, *args: str, timeout: float = 60.0) -> Run:
    """``trtguard ARGS`` under an address-space limit, with its exit status and its own peak RSS."""
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    out.touch()
    err.touch()
    start = time.monotonic()
    limits = (str(ADDRESS_SPACE), str(int(timeout)))
    launched = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, *limits, str(out), str(err), str(TRTGUARD), *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=timeout + 10,
        check=True,
    )
    status, peak = (int(word) for word in launched.stdout.split())
    return Run(status, out.read_text(), err.read_text(), peak, time.monotonic() - start)


def scalar_alias_pod(aliases: int = 150_000, size: int = 60_000) -> str:
    """The issue's check input: a ~510 KB Pod, 9 GB once its aliases of one 60 KB scalar are written out.

    The anchor is on line 7 (an annotation), the aliases on line 12 (the container's args).
    """
    return (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bomb\n  namespace: prod\n  annotations:\n"
        f"    big: &a {'x' * size}\n"
        "spec:\n  containers:\n    - name: server\n      image: nvcr.io/nvidia/tensorrt:24.05-py3\n"
        f"      args: [{', '.join(['*a'] * aliases)}]\n"
    )


def assert_refused(run: Run, *fragments: str) -> None:
    assert run.status == 2, run.out + run.err
    text = run.out + run.err
    for fragment in fragments:
        assert fragment in text, text[:2000]
    assert "Traceback" not in text and "MemoryError" not in text
    assert run.peak_rss < PEAK_RSS, f"peak RSS {run.peak_rss / 2**20:.0f} MiB"
    assert run.seconds < 30


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return path


def test_a_normal_check_fits_the_limits(tmp_path: Path, policy: Path) -> None:
    (tmp_path / "pod.yaml").write_text(POD)
    run = run_limited(tmp_path, "check", "pod.yaml", "--policies", str(policy))
    assert run.status == 0, run.out + run.err
    assert run.peak_rss < PEAK_RSS


def test_a_scalar_alias_bomb_in_a_check_input(tmp_path: Path, policy: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(scalar_alias_pod())
    assert 500_000 < bomb.stat().st_size < 700_000
    run = run_limited(tmp_path, "check", "bomb.yaml", "--policies", str(policy))
    assert_refused(
        run,
        "ERROR  bomb.yaml:12: the document holds more than 16777216 characters of text once its YAML aliases "
        "are expanded: aliases (*name) here repeat the value anchored at line 7",
        "1 input error",
    )


def test_a_scalar_alias_bomb_in_a_policy_file(tmp_path: Path) -> None:
    # An invalid value: the loader's message shows it, which once meant writing out all 9 GB of it.
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        POLICY.replace("- name: runtime", f"- name: runtime\n      x-anchor: &a {'x' * 60_000}")
        + f"      requireDigest: [{', '.join(['*a'] * 150_000)}]\n"
    )
    (tmp_path / "pod.yaml").write_text(POD)
    run = run_limited(tmp_path, "check", "pod.yaml", "--policies", str(policy))
    assert_refused(
        run,
        f"{policy}:9: the document holds more than 16777216 characters of text once its YAML aliases are "
        "expanded: aliases (*name) here repeat the value anchored at line 7",
    )


def test_a_scalar_alias_bomb_in_a_policy_test_suite(tmp_path: Path, policy: Path) -> None:
    (tmp_path / "resources.yaml").write_text(POD)
    suite = tmp_path / "trtguard-test.yaml"
    suite.write_text(
        "apiVersion: trtguard.dev/v1alpha1\nkind: PolicyTest\nmetadata:\n"
        f"  name: &a {'x' * 60_000}\nspec:\n  policies: [policy.yaml]\n  resources: [resources.yaml]\n"
        "  results: [{resource: Pod/prod/ok, result: allow, violations: ["
        + ", ".join(["*a"] * 150_000)
        + "]}]\n"
    )
    run = run_limited(tmp_path, "policy", "test", str(suite))
    assert_refused(run, f"{suite}:8: the document holds more than 16777216 characters of text")


def test_a_scalar_alias_bomb_in_a_resource_file_of_a_policy_test(tmp_path: Path, policy: Path) -> None:
    (tmp_path / "resources.yaml").write_text(scalar_alias_pod())
    (tmp_path / "trtguard-test.yaml").write_text(
        "apiVersion: trtguard.dev/v1alpha1\nkind: PolicyTest\nmetadata: {name: s}\nspec:\n"
        "  policies: [policy.yaml]\n  resources: [resources.yaml]\n"
        "  results: [{resource: Pod/prod/bomb, result: allow}]\n"
    )
    run = run_limited(tmp_path, "policy", "test", str(tmp_path / "trtguard-test.yaml"))
    assert_refused(run, "resources.yaml:12: the document holds more than 16777216 characters of text")


@pytest.mark.parametrize("where", ["input", "policy"])
def test_billion_laughs_on_lists_and_maps(tmp_path: Path, policy: Path, where: str) -> None:
    laughs = tmp_path / "laughs.yaml"
    laughs.write_text(billion_laughs())
    (tmp_path / "pod.yaml").write_text(POD)
    inputs = (
        ["laughs.yaml", "--policies", str(policy)]
        if where == "input"
        else ["pod.yaml", "--policies", "laughs.yaml"]
    )
    run = run_limited(tmp_path, "check", *inputs)
    assert_refused(run, "YAML aliases (*name) of lists and maps are not accepted")


def test_an_expensive_expression_on_a_large_annotation(tmp_path: Path) -> None:
    # The expression passes every static limit; on a 64 KiB annotation it once needed 1.3 GB and
    # ended in std::bad_alloc and a traceback. Now its worker runs out of its 256 MiB: onError, a denial.
    material = Material(tmp_path)
    obj = pod(engine=material.engine("e"))
    obj["metadata"]["annotations"] = {"note": "x" * 65_536}
    (tmp_path / "pod.yaml").write_text(json.dumps(obj))
    expression = costly_expression()
    policy = material.policy(
        "apiVersion: trtguard.dev/v1alpha1\nkind: InferencePolicy\nmetadata: {name: costly}\nspec:\n"
        "  action: Warn\n  onError: Deny\n  models:\n    buildManifest: {keys: [platform/build-signer]}\n"
        "    rules:\n      expressions:\n"
        f"        - {{name: costly, cel: '{expression}', message: too costly}}\n"
    )
    keys = material.keys_file("build-signer")
    run = run_limited(
        tmp_path,
        "check",
        "pod.yaml",
        "--policies",
        str(policy),
        "--policies",
        str(keys),
        "--attestations",
        str(material.attestations),
    )
    assert run.status == 1, run.out + run.err
    assert "too costly (the expression could not be evaluated: the expression ran out of memory" in run.out
    assert "Traceback" not in run.out + run.err and "bad_alloc" not in run.out + run.err
    assert run.peak_rss < PEAK_RSS + 256 * 1024 * 1024  # trtguard, and the worker it waited for
    assert run.seconds < 30

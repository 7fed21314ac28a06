"""``check --jobs``: the resources judged in several processes give the report of one process, byte for
byte, on a corpus that holds every kind of outcome (the adversarial corpus: denials, allows, unknown kinds,
malformed and unrendered documents, namespaces that clash)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tests.webhook.test_adversarial_corpus import CORPUS, load_cases
from trtguard.cli import main
from trtguard.demo.material import Material

COPIES = 4  # a few hundred resources: several tasks for each process
#: ``trtguard check`` in a fresh process (this one has threads, which keep ``check`` from forking), saying
#: on its last line of stderr which processes it forked.
DRIVER = """
import multiprocessing, sys
from trtguard.cli import main
forks = []
real = multiprocessing.get_context
multiprocessing.get_context = lambda method=None: (forks.append(method), real(method))[1]
status = main(sys.argv[1:])
sys.stdout.flush()
print(f"forked: {forks}", file=sys.stderr)
sys.exit(status)
"""


@pytest.fixture(scope="module")
def corpus(demo_material: Material, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The corpus's policies beside the bundled ones, and a folder of every case, ``COPIES`` times."""
    policies = tmp_path_factory.mktemp("processes-policies") / "policies"
    shutil.copytree(demo_material.policies, policies)
    document = yaml.safe_load(CORPUS.read_text())
    (policies / "corpus.yaml").write_text(yaml.safe_dump_all(document.get("policies", []), sort_keys=False))
    inputs = tmp_path_factory.mktemp("processes-inputs")
    for copy in range(COPIES):
        for case in load_cases(demo_material):
            (inputs / f"{copy}-{case.id}.yaml").write_text(case.text)
    return policies, inputs


def run(material: Material, policies: Path, inputs: Path, *options: str) -> tuple[int, str, list[str]]:
    """Exit status, stdout and the lines of stderr of ``check``, and what it forked (its last line)."""
    argv = ["check", "--policies", str(policies), "--attestations", str(material.attestations), *options]
    command = [sys.executable, "-c", DRIVER, *argv, str(inputs)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, check=False)
    return done.returncode, done.stdout, done.stderr.splitlines()


@pytest.mark.parametrize(
    "options",
    [("--format", "json", "--unknown-kinds", "judge"), ("--format", "table")],
)
def test_several_processes_give_the_report_of_one(
    demo_material: Material, corpus: tuple[Path, Path], options: tuple[str, ...]
) -> None:
    policies, inputs = corpus
    status, out, err = run(demo_material, policies, inputs, "--jobs", "1", *options)
    assert err[-1] == "forked: []"
    assert status == 2  # the corpus holds malformed documents: every kind of outcome is in the report
    several = run(demo_material, policies, inputs, "--jobs", "3", *options)
    assert several[2][-1] == "forked: ['fork']", "the resources were not shared among processes"
    assert several == (status, out, [*err[:-1], several[2][-1]])


def test_jobs_must_be_a_positive_number(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["check", "--policies", "p", "--jobs", "0", "x.yaml"])
    assert exited.value.code == 2
    assert "must be a whole number of processes, 1 or more: '0'" in capsys.readouterr().err


#: ``trtguard check`` in a fresh process whose forked processes die (SIGKILL, as the OOM killer sends) when
#: they take up the resource named ``victim``: the judging function is replaced before the fork, so only
#: the processes forked from it see the replacement; nothing in trtguard is there for the test.
DYING = """
import os, signal, sys
import policies.check
from trtguard.cli import main
parent, judged = os.getpid(), policies.check.check
async def dying(evaluator, resources, **options):
    if os.getpid() != parent and any(resource.name == "victim" for resource in resources):
        os.kill(os.getpid(), signal.SIGKILL)
    return await judged(evaluator, resources, **options)
policies.check.check = dying
sys.exit(main(sys.argv[1:]))
"""
#: Only guards against the hang this test is about (a pool that waits forever for the dead process).
HANG = 300


def test_a_process_that_dies_fails_the_run_instead_of_hanging(
    demo_material: Material, tmp_path: Path
) -> None:
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "victim" if i == 260 else f"pod-{i}", "namespace": "prod"},
            "spec": {"containers": [{"name": "c", "image": "nvcr.io/nvidia/tensorrt:24.01-py3"}]},
        }
        for i in range(300)
    ]
    manifests = tmp_path / "pods.yaml"
    manifests.write_text(yaml.safe_dump_all(pods))
    argv = [
        "check",
        "--policies",
        str(demo_material.policies),
        "--attestations",
        str(demo_material.attestations),
    ]
    command = [sys.executable, "-c", DYING, *argv, "--jobs", "2", str(manifests)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, check=False, timeout=HANG)
    assert done.returncode == 2
    assert done.stdout == ""
    error = done.stderr.strip().splitlines()
    assert error[0].startswith("trtguard: error: a checking process (--jobs) died (killed, out of memory")
    # 38 resources a task (a quarter of each process's share): the victim, 261st, was in the seventh.
    assert f"resources 229-266 of 300 (from Pod prod/pod-228, {manifests}:" in error[0], error[0]
    assert "run again with --jobs 1" in done.stderr, done.stderr
    # Judged in one process (none forked, so none dies), the same resources give a report.
    one = [*command[:-3], "--jobs", "1", str(manifests)]
    alone = subprocess.run(one, capture_output=True, cwd=REPO, check=False)
    assert alone.returncode in (0, 1) and alone.stdout

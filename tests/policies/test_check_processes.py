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

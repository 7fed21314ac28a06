"""``trtguard check --decision-log``: the webhook's log read-only, and what happens when it cannot be read."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
import sqlite3
from pathlib import Path

import pytest
import yaml

from decisionlog import DecisionRecord, SQLiteStore
from tests.conftest import REPO
from tests.policies.conftest import Material, pod
from trtguard.cli import main
from verifier.base._deadline import Deadline

POLICY = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: change-control}
spec:
  match: {namespaces: [prod]}
  models:
    buildManifest: {keys: [platform/build-signer]}
  changeControl:
    gated: [TensorRTMajorUpgrade]
    approvals: {keys: [committee/alice, committee/bob], threshold: 2}
"""
TRT8 = {
    "image": "nvcr.io/nvidia/tensorrt@sha256:" + "a1" * 32,
    "tensorrt_version": "8.6.1.6",
    "cuda_version": "12.0.1",
}


def check(material: Material, *extra: object) -> tuple[int, str, str]:
    source = material.root / "in.yaml"
    args = ["check", "--attestations", material.attestations, "--format", "json", *extra, source]
    for policy in (
        material.policy(POLICY),
        material.keys_file("build-signer"),
        material.keys_file("alice", "bob", set_name="committee"),
    ):
        args[1:1] = ["--policies", policy]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([str(a) for a in args])
    return status, out.getvalue(), err.getvalue()


@pytest.fixture
def material(tmp_path: Path) -> Material:
    return Material(tmp_path)


@pytest.fixture
def upgrade(material: Material) -> str:
    """A log where prod/p last ran a TensorRT 8 engine; the input moves it to TensorRT 10 (undeclared)."""
    old = material.engine("v1", toolchain=TRT8)
    new = material.engine("v2")
    (material.root / "in.yaml").write_text(yaml.safe_dump(pod(engine=new)))

    async def write() -> None:
        store = SQLiteStore(material.root / "decisions.db")
        await store.open()
        engine = {
            "reference": old,
            "digest": old.split("@")[1],
            "path": "spec.volumes[0]",
            "name": "engine",
            "containers": ["c0"],
        }
        await store.append(
            DecisionRecord(
                uid="u",
                operation="CREATE",
                kind="Pod",
                api_version="v1",
                allowed=True,
                reason="Allowed",
                namespace="prod",
                name="p",
                engines=(engine,),
            ),
            deadline=Deadline.after(5),
        )
        await store.close()

    asyncio.run(write())
    return old


def test_with_the_log_check_denies_what_the_webhook_denies(material: Material, upgrade: str) -> None:
    status, out, _ = check(material)
    [result] = json.loads(out)
    assert status == 0 and result["allowed"]
    assert any("history was not consulted" in note for note in result["notes"])
    for log in (str(material.root / "decisions.db"), f"sqlite:///{material.root / 'decisions.db'}"):
        status, out, _ = check(material, "--decision-log", log)
        [result] = json.loads(out)
        assert status == 1, out
        [violation] = result["violations"]
        assert (
            f"gated changes [TensorRTMajorUpgrade] (against last admitted engine {upgrade})"
            in violation["message"]
        )
        assert not any("history was not consulted" in note for note in result["notes"])


def test_the_log_is_read_only_and_never_waits_for_the_writer(material: Material, upgrade: str) -> None:
    path = material.root / "decisions.db"
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")  # what the webhook's writer holds while it commits
        status, _, err = check(material, "--decision-log", path)
        assert status == 1, err
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert not path.with_name("decisions.db-journal").exists()


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        ("missing.db", "the decision log file does not exist"),
        ("sqlite:///missing.db", "the decision log file does not exist"),
        ("garbage.db", "cannot read the decision log"),
        ("mysql://host/db", "unsupported decision log URL"),
        ("postgresql://postgres@127.0.0.1:1/none?connect_timeout=1", "PostgreSQL is not reachable"),
    ],
)
def test_a_log_that_cannot_be_read_is_an_input_error(
    material: Material, upgrade: str, log: str, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(material.root)
    (material.root / "garbage.db").write_bytes(b"not a database " * 300)
    status, out, err = check(material, "--decision-log", log)
    assert status == 2 and out == ""
    assert expected in err and "Traceback" not in err
    assert not (material.root / "missing.db").exists()  # check never creates a log


def test_a_report_written_into_the_scanned_folder_is_not_read_back(tmp_path: Path) -> None:
    """Issue 28 item 9: ``check -o manifests/report.json manifests/`` twice gives the same answer."""
    folder = tmp_path / "manifests"
    folder.mkdir()
    (folder / "pod.yaml").write_text(yaml.safe_dump(pod(namespace="dev")))
    policy = REPO / "policies" / "library" / "trusted-base-images.yaml"
    report = folder / "report.json"
    argv = ["check", "--policies", str(policy), "--format", "json", "-o", str(report), str(folder)]
    for _ in range(2):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            assert main(argv) == 0, err.getvalue()
        assert [outcome["name"] for outcome in json.loads(report.read_text())] == ["p"]


def test_an_input_error_is_said_on_stderr_when_the_report_goes_elsewhere(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("kind: Pod\napiVersion: v1\nmetadata:\n\tname: x\n")
    policy = REPO / "policies" / "library" / "trusted-base-images.yaml"
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = main(["check", "--policies", str(policy), "--format", "json", str(tmp_path / "bad.yaml")])
    assert status == 2
    assert f"trtguard: input error: {tmp_path / 'bad.yaml'}:" in err.getvalue()

"""trtguard/cli/audit.py: ``trtguard audit tail|query|verify|history`` on a real SQLite decision log."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import sqlite3
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from decisionlog import DecisionRecord, SQLiteStore
from decisionlog._undelivered import undelivered
from trtguard.cli import main
from trtguard.cli._audit_lines import stamp
from trtguard.demo.material import Material
from verifier.base._deadline import Deadline

RESNET = "registry.example.com/models/resnet50"
TRTGUARD = Path(sys.executable).with_name("trtguard")


def _write(path: Path, records: list[DecisionRecord]) -> None:
    async def go() -> None:
        store = SQLiteStore(path)
        await store.open()
        for record in records:
            await store.append(record, deadline=Deadline.after(5))
        await store.close()

    asyncio.run(go())


def _record(**fields: Any) -> DecisionRecord:
    base: dict[str, Any] = {
        "uid": "u",
        "operation": "CREATE",
        "kind": "Deployment",
        "api_version": "apps/v1",
        "allowed": True,
        "reason": "Allowed",
        "namespace": "prod",
        "name": "resnet50",
        "user": "alice",
    }
    base.update(fields)
    return DecisionRecord(**base)


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "decisions.db"
    now = datetime.now(UTC)
    _write(
        path,
        [
            _record(uid="u1", time=now - timedelta(days=3), namespace="dev", name="a"),
            _record(
                uid="u2",
                time=now - timedelta(hours=2),
                allowed=False,
                reason="PolicyViolation",
                message="trusted-tensorrt-images/images: nginx is not allowed; fix: use an allowed image",
                warnings=("signed-images/signatures: warn",),
            ),
            _record(uid="u3", time=now - timedelta(minutes=5), dry_run=True, kind="Pod", name="p"),
        ],
    )
    return path


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["audit", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_tail_prints_the_latest_records_in_order(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _cli(capsys, "tail", "--decision-log", f"sqlite:///{log}", "-n", "2")
    assert status == 0
    lines = [line for line in out.splitlines() if not line.startswith("    ")]
    assert len(lines) == 2
    assert "#2" in lines[0] and "DENY" in lines[0] and "prod/Deployment.apps/resnet50" in lines[0]
    assert "uid u2" in lines[0]
    assert "    trusted-tensorrt-images/images: nginx is not allowed; fix: use an allowed image" in out
    assert "    warning: signed-images/signatures: warn" in out
    assert "#3" in lines[1] and "(dry run)" in lines[1] and "ALLOW" in lines[1]


def test_tail_json_lines_carry_the_chain_links(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _cli(capsys, "tail", "--decision-log", f"sqlite:///{log}", "--format", "json")
    assert status == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["seq"] for r in rows] == [1, 2, 3]
    assert rows[1]["prev_hash"] == rows[0]["hash"]
    assert rows[2]["record"]["dry_run"] is True


def test_the_log_url_comes_from_the_environment_when_not_given(
    log: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRTGUARD_DECISION_LOG", f"sqlite:///{log}")
    status, out, _ = _cli(capsys, "tail", "-n", "1")
    assert status == 0 and "#3" in out


def test_tail_follow_from_zero_lines_prints_only_new_decisions(log: Path) -> None:
    """``-n 0 -f``: none of the past, then each decision as it is recorded."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRTGUARD_")}
    command = [str(TRTGUARD), "audit", "tail", "-n", "0", "-f", "--format", "json"]
    process = subprocess.Popen(
        [*command, "--decision-log", f"sqlite:///{log}"], stdout=subprocess.PIPE, text=True, env=env
    )
    lines: queue.SimpleQueue[str] = queue.SimpleQueue()
    stdout = process.stdout
    assert stdout is not None

    def read() -> None:
        for line in stdout:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        # New decisions keep coming until one is printed, however long the command took to start.
        for n in range(30):
            _write(log, [_record(uid=f"new-{n}")])
            try:
                first = lines.get(timeout=1.0)
                break
            except queue.Empty:
                continue
        else:
            raise AssertionError("tail -f printed nothing")
        assert json.loads(first)["record"]["uid"].startswith("new-")
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.parametrize(
    ("flags", "uids"),
    [
        (["--denied"], ["u2"]),
        (["--allowed"], ["u1", "u3"]),
        (["--dry-run"], ["u3"]),
        (["--no-dry-run"], ["u1", "u2"]),
        (["--namespace", "dev"], ["u1"]),
        (["--name", "resnet50", "--kind", "Deployment"], ["u2"]),
        (["--uid", "u3"], ["u3"]),
        (["--since", "1d"], ["u2", "u3"]),
        (["--since", "30m"], ["u3"]),
        (["--until", "1d"], ["u1"]),
        (["--limit", "1"], ["u1"]),
    ],
)
def test_query_filters(
    log: Path, capsys: pytest.CaptureFixture[str], flags: list[str], uids: list[str]
) -> None:
    status, out, _ = _cli(capsys, "query", "--decision-log", f"sqlite:///{log}", "--format", "json", *flags)
    assert status == 0
    assert [json.loads(line)["record"]["uid"] for line in out.splitlines()] == uids


def test_query_with_an_rfc3339_time(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    since = (datetime.now(UTC) - timedelta(hours=3)).isoformat()
    status, out, _ = _cli(capsys, "query", "--decision-log", f"sqlite:///{log}", "--since", since)
    assert status == 0 and out.count("uid u") == 2


def test_bad_time_is_an_input_error(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = _cli(capsys, "query", "--decision-log", f"sqlite:///{log}", "--since", "yesterday")
    assert status == 2
    assert "--since: 'yesterday' is neither an RFC 3339 time nor an age" in err


def test_verify_ok_and_broken(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _cli(capsys, "verify", "--decision-log", f"sqlite:///{log}")
    assert status == 0
    assert "chain verified: 3 records" in out
    with sqlite3.connect(log) as conn:
        conn.execute("DROP TRIGGER trtguard_decisions_no_update")
        conn.execute(
            "UPDATE trtguard_decisions SET body = replace(body, '\"allowed\":false', '\"allowed\":true'),"
            " allowed = 1 WHERE seq = 2"
        )
    status, out, _ = _cli(capsys, "verify", "--decision-log", f"sqlite:///{log}")
    assert status == 1
    assert "chain broken at record seq 2 (uid u2): stored hash does not match the record's content" in out
    status, out, _ = _cli(capsys, "verify", "--decision-log", f"sqlite:///{log}", "--format", "json")
    assert status == 1
    assert json.loads(out)["first_break"] == {
        "seq": 2,
        "uid": "u2",
        "problem": "stored hash does not match the record's content: the record was changed",
    }


def test_a_missing_log_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("verify", "tail", "history prod/resnet50"):
        status, _, err = _cli(capsys, *command.split(), "--decision-log", f"sqlite:///{tmp_path}/absent.db")
        assert status == 2, command  # a usage error, as for `check --decision-log` (issue 28 item 9)
        assert "decision log file does not exist" in err
    assert not (tmp_path / "absent.db").exists(), "reading never creates a log"


def _engine(material: Material, name: str) -> dict[str, str]:
    """The demo engine ``name`` under one repository, as successive builds of one model."""
    return {
        "reference": f"{RESNET}@{material.engines[name].split('@')[1]}",
        "digest": material.engines[name].split("@")[1],
        "path": "metadata.annotations[trtguard.dev/engines][0]",
    }


@pytest.fixture
def history_log(tmp_path: Path, demo_material: Material) -> Path:
    path = tmp_path / "history.db"
    fp16, int8 = _engine(demo_material, "fp16"), _engine(demo_material, "int8-calibrated")
    uncalibrated = _engine(demo_material, "int8-uncalibrated")
    _write(
        path,
        [
            _record(uid="c1", engines=(fp16,), policy_revision="sha256:" + "1" * 64),
            _record(uid="scale", operation="UPDATE"),  # replicas changed: no engine recorded
            _record(uid="other", name="other-model", engines=(int8,)),
            _record(
                uid="denied",
                operation="UPDATE",
                allowed=False,
                reason="PolicyViolation",
                engines=(uncalibrated,),
            ),
            _record(uid="dry", operation="UPDATE", dry_run=True, engines=(uncalibrated,)),
            _record(
                uid="u2",
                operation="UPDATE",
                engines=(int8,),
                user="release-bot",
                policy_revision="sha256:" + "2" * 64,
            ),
        ],
    )
    return path


def test_history_lists_engine_changes_with_manifest_differences(
    history_log: Path, demo_material: Material, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = _cli(
        capsys,
        "history",
        "prod/resnet50",
        "--decision-log",
        f"sqlite:///{history_log}",
        "--attestations",
        str(demo_material.attestations),
    )
    assert status == 0
    assert out.startswith("prod/Deployment.apps/resnet50: 2 admitted change(s)")
    assert "#1 " in out and "#6 " in out
    assert "CREATE Deployment by alice" in out and "UPDATE Deployment by release-bot" in out
    assert "(new)" in out
    assert "FirstInt8:" in out
    assert "CalibrationDataChange:" in out
    assert 'builder_config.precision_flags: ["fp16"] -> ["fp16", "int8"]' in out
    for excluded in ("denied", "dry", "other", "uncalibrated"):
        assert f"models/{excluded}" not in out


def test_history_json(history_log: Path, demo_material: Material, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _cli(
        capsys,
        "history",
        "prod/resnet50",
        "--decision-log",
        f"sqlite:///{history_log}",
        "--attestations",
        str(demo_material.attestations),
        "--format",
        "json",
    )
    assert status == 0
    data = json.loads(out)
    assert data["workload"] == "prod/Deployment.apps/resnet50"  # the one workload of that name
    first, second = data["entries"]
    assert first["changes"][0]["old"] is None
    assert first["changes"][0]["note"] == "first engine of this name for the workload"
    change = second["changes"][0]
    assert change["old"].endswith(demo_material.engines["fp16"].split("@")[1])
    kinds = {c["kind"] for c in change["manifest_diff"]["changes"]}
    assert {"FirstInt8", "CalibrationDataChange"} <= kinds
    assert second["engines"] == {RESNET: change["new"]}


def test_history_without_manifests_still_lists_the_engines(
    history_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = _cli(capsys, "history", "prod/resnet50", "--decision-log", f"sqlite:///{history_log}")
    assert status == 0
    assert "give --attestations DIR or --registry-config FILE" in out
    assert out.count("    engine ") == 2


def test_history_names_a_missing_manifest(
    history_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    status, out, _ = _cli(
        capsys,
        "history",
        "prod/resnet50",
        "--decision-log",
        f"sqlite:///{history_log}",
        "--attestations",
        str(empty),
    )
    assert status == 0
    assert "build manifests not compared: no build manifest found for" in out


def test_history_leaves_out_an_allow_that_was_not_delivered_and_says_so(
    tmp_path: Path, demo_material: Material, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "late.db"
    late = _record(uid="late", operation="UPDATE", engines=(_engine(demo_material, "int8-calibrated"),))
    _write(path, [_record(uid="c1", engines=(_engine(demo_material, "fp16"),)), late, undelivered(late)])
    status, out, _ = _cli(capsys, "history", "prod/resnet50", "--decision-log", f"sqlite:///{path}")
    assert status == 0
    assert out.startswith("prod/Deployment.apps/resnet50: 1 admitted change(s)")
    assert "models/int8-calibrated" not in out
    assert "1 allow(s) not delivered" in out and "#2 " in out and "uid late" in out
    status, out, _ = _cli(
        capsys, "history", "prod/resnet50", "--decision-log", f"sqlite:///{path}", "--format", "json"
    )
    data = json.loads(out)
    assert [entry["seq"] for entry in data["entries"]] == [1]
    assert [(item["seq"], item["record_id"]) for item in data["not_delivered"]] == [(2, late.record_id)]


@pytest.mark.parametrize(
    ("workload", "error"),
    [
        ("resnet50", "expected NAMESPACE/KIND/NAME or NAMESPACE/NAME"),
        ("/resnet50", "expected NAMESPACE/KIND/NAME or NAMESPACE/NAME"),
        ("prod/", "expected NAMESPACE/KIND/NAME or NAMESPACE/NAME"),
        ("a/b/c/d", "expected NAMESPACE/KIND/NAME or NAMESPACE/NAME"),
        ("prod//resnet50", "expected NAMESPACE/KIND/NAME"),
        ("prod/deployment/resnet50", "is not a kind name"),
        (
            "prod/RayCluster/resnet50",
            "'RayCluster' is not a built-in Kubernetes kind: name it with its API group",
        ),
    ],
)
def test_history_needs_namespace_kind_and_name(
    history_log: Path, capsys: pytest.CaptureFixture[str], workload: str, error: str
) -> None:
    status, _, err = _cli(capsys, "history", workload, "--decision-log", f"sqlite:///{history_log}")
    assert status == 2
    assert error in err


@pytest.mark.parametrize("workload", ["prod/Deployment/resnet50", "prod/Deployment.apps/resnet50"])
def test_history_of_a_workload_named_with_its_kind(
    history_log: Path, capsys: pytest.CaptureFixture[str], workload: str
) -> None:
    status, out, _ = _cli(capsys, "history", workload, "--decision-log", f"sqlite:///{history_log}")
    assert status == 0 and out.startswith("prod/Deployment.apps/resnet50: 2 admitted change(s)")
    # Another group's kind of that name is another workload: nothing of resnet50's history.
    status, out, err = _cli(
        capsys,
        "history",
        "prod/Deployment.example.com/resnet50",
        "--decision-log",
        f"sqlite:///{history_log}",
    )
    assert status == 1 and not out
    assert "the decision log never saw prod/Deployment.example.com/resnet50; closest: " in err
    assert "prod/Deployment.apps/resnet50" in err


@pytest.mark.parametrize(
    ("workload", "closest"),
    [
        ("prod/resnet5", "prod/Deployment.apps/resnet50"),
        ("prod/Deployment/resnt50", "prod/Deployment.apps/resnet50"),
        ("prod/other-modl", "prod/Deployment.apps/other-model"),
    ],
)
def test_history_of_a_workload_the_log_never_saw_names_the_closest(
    history_log: Path, capsys: pytest.CaptureFixture[str], workload: str, closest: str
) -> None:
    """Issue 28 item 6: a mistyped workload is exit 1 with the names closest to it, not 0 changes."""
    status, out, err = _cli(capsys, "history", workload, "--decision-log", f"sqlite:///{history_log}")
    assert status == 1 and not out
    assert "the decision log never saw" in err and closest in err
    status, _, err = _cli(capsys, "history", "dev/zzz", "--decision-log", f"sqlite:///{history_log}")
    assert status == 1 and "it knows no workload of a similar name" in err


def test_history_of_a_workload_only_ever_denied_says_so_and_exits_1(
    tmp_path: Path, demo_material: Material, capsys: pytest.CaptureFixture[str]
) -> None:
    """Attack 28 finding 6i: a workload that was only ever denied printed "0 admitted change(s)", exit 0."""
    path = tmp_path / "denied.db"
    engine = _engine(demo_material, "int8-uncalibrated")
    now = datetime.now(UTC)
    denials = [
        _record(uid=f"d{n}", allowed=False, reason="PolicyViolation", message=f"int8 needs calibration ({n})",
                engines=(engine,), name="canary", time=now - timedelta(minutes=10 - n))
        for n in (1, 2)
    ]  # fmt: skip
    # A dry-run admission is no admission either; another workload's admission is not this one's.
    dry = _record(uid="dry", dry_run=True, engines=(engine,), name="canary")
    _write(path, [*denials, dry, _record(uid="other", engines=(engine,))])
    for args in ((), ("--last", "1"), ("--format", "json")):
        status, out, err = _cli(
            capsys, "history", "prod/canary", "--decision-log", f"sqlite:///{path}", *args
        )
        assert status == 1 and out == "", args
        assert err == (
            "trtguard: prod/Deployment.apps/canary was never admitted: the decision log holds 2 denial(s) "
            f"of it and no admitted change; the newest, #2 at {stamp(denials[1].time)} (CREATE by alice): "
            "PolicyViolation: int8 needs calibration (2)\n"
        ), err


def _built(
    material: Material, name: str, audit_id: str, tensorrt: str, precisions: list[str]
) -> dict[str, Any]:
    """The demo engine ``name`` as a record holds it: with the build manifest counted."""
    manifest = {"digest": "sha256:" + "4" * 64, "signers": [{"key": "platform/build-signer"}]}
    built = {**manifest, "audit_id": audit_id, "tensorrt_version": tensorrt, "precisions": precisions}
    return {**_engine(material, name), "name": "resnet", "build_manifests": [built]}


def test_history_last_and_since_give_the_newest_change_whole(
    tmp_path: Path, demo_material: Material, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--last 1``: when, who, old → new (references and recorded values), approvers and audit ID, from
    the log alone (issue 28 item 6)."""
    path = tmp_path / "rollout.db"
    fp16 = _built(demo_material, "fp16", "CHG-1", "10.3.0.26", ["fp16", "fp32"])
    int8 = _built(demo_material, "int8-calibrated", "CHG-42", "10.3.0.26", ["fp16", "fp32", "int8"])
    int8["change_control"] = [
        {
            "policy": "change-control",
            "baselines": [{"kind": "last-admitted-engine", "manifest_digest": "sha256:" + "4" * 64,
                           "engine": fp16["reference"], "admitted_by": {"record_id": "r", "seq": 1}}],
            "changes": [{"kind": "FirstInt8", "against": []}],
            "gated": ["FirstInt8"],
            "approvals": [{"approver": "carol@corp", "signers": [{"key": "committee/carol"}],
                           "digest": "sha256:" + "5" * 64, "changes": ["FirstInt8"]}],
        }
    ]  # fmt: skip
    start = datetime(2026, 11, 1, 9, tzinfo=UTC)
    _write(
        path,
        [
            _record(uid="c1", time=start, engines=(fp16,)),
            _record(
                uid="u2", time=start + timedelta(hours=1), operation="UPDATE", engines=(int8,), user="bot"
            ),
        ],
    )
    log = f"sqlite:///{path}"
    status, out, _ = _cli(capsys, "history", "prod/resnet50", "--decision-log", log, "--last", "1")
    assert status == 0, out
    assert out.startswith("prod/Deployment.apps/resnet50: the last 1 of 2 admitted change(s)")
    assert "#2  2026-11-01T10:00:00Z  UPDATE Deployment by bot" in out and "#1 " not in out
    assert f"engine 'resnet': {int8['reference']}\n      was {fp16['reference']}\n" in out
    assert "      changed: audit ID CHG-1 → CHG-42; precisions fp16, fp32 → fp16, fp32, int8\n" in out
    assert "approved by: carol@corp (committee/carol) for FirstInt8" in out
    assert "audit ID CHG-42; TensorRT 10.3.0.26" in out
    status, out, _ = _cli(
        capsys, "history", "prod/resnet50", "--decision-log", log, "--last", "1", "--format", "json"
    )
    data = json.loads(out)
    assert [entry["seq"] for entry in data["entries"]] == [2] and data["changes_in_log"] == 2
    [change] = data["entries"][0]["changes"]
    assert change["changed"] == [
        {"field": "audit ID", "old": "CHG-1", "new": "CHG-42"},
        {"field": "precisions", "old": "fp16, fp32", "new": "fp16, fp32, int8"},
    ]
    status, out, _ = _cli(
        capsys, "history", "prod/resnet50", "--decision-log", log, "--since", "2026-11-01T09:30:00Z"
    )
    assert status == 0 and out.startswith("prod/Deployment.apps/resnet50: the last 1 of 2 admitted change(s)")
    status, _, err = _cli(capsys, "history", "prod/resnet50", "--decision-log", log, "--last", "0")
    assert status == 2 and "--last must be 1 or more" in err


def test_query_by_kind_tells_api_groups_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--kind`` names kinds as policies do: ``Job`` is batch/v1's, Volcano's is ``Job.batch.volcano.sh``."""
    path = tmp_path / "jobs.db"
    _write(
        path,
        [
            _record(uid="batch", kind="Job", api_version="batch/v1", name="train"),
            _record(uid="volcano", kind="Job", api_version="batch.volcano.sh/v1alpha1", name="train"),
        ],
    )
    url = f"sqlite:///{path}"
    for kind, uid in (("Job", "batch"), ("Job.batch", "batch"), ("Job.batch.volcano.sh", "volcano")):
        status, out, _ = _cli(capsys, "query", "--decision-log", url, "--kind", kind, "--format", "json")
        assert status == 0 and [json.loads(line)["record"]["uid"] for line in out.splitlines()] == [uid], kind
    status, out, _ = _cli(capsys, "query", "--decision-log", url, "--name", "train")
    assert "prod/Job.batch/train" in out and "prod/Job.batch.volcano.sh/train" in out
    status, _, err = _cli(capsys, "query", "--decision-log", url, "--kind", "RayCluster")
    assert status == 2 and "--kind: 'RayCluster' is not a built-in Kubernetes kind" in err


def test_query_newest_first_and_the_last_n(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{log}"

    def uids(*flags: str) -> list[str]:
        status, out, _ = _cli(capsys, "query", "--decision-log", url, "--format", "json", *flags)
        assert status == 0
        return [json.loads(line)["record"]["uid"] for line in out.splitlines()]

    assert uids("--newest-first") == ["u3", "u2", "u1"]
    # "The last deploy of prod/resnet50": one command.
    assert uids("--namespace", "prod", "--name", "resnet50", "--last", "1") == ["u2"]
    assert uids("--last", "2") == ["u3", "u2"]
    status, _, err = _cli(capsys, "query", "--decision-log", url, "--last", "1", "--limit", "2")
    assert status == 2 and "give one of --last and --limit" in err


def _edit_row(log: Path, seq: int, old: str, new: str) -> None:
    """What someone with write access to the database does: change a row's body, no trace in the columns."""
    with sqlite3.connect(log) as conn:
        conn.execute("DROP TRIGGER IF EXISTS trtguard_decisions_no_update")
        conn.execute(
            "UPDATE trtguard_decisions SET body = replace(body, ?, ?) WHERE seq = ?", (old, new, seq)
        )


@pytest.mark.parametrize("command", [["tail"], ["query"], ["query", "--namespace", "prod"]])
def test_printed_records_are_checked_against_the_chain(
    log: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    url = f"sqlite:///{log}"
    status, out, err = _cli(capsys, *command, "--decision-log", url, "--format", "json")
    assert status == 0 and not err
    assert all(json.loads(line)["verified"] is True for line in out.splitlines())

    _edit_row(log, 2, '"user":"alice"', '"user":"mallory"')
    status, out, err = _cli(capsys, *command, "--decision-log", url, "--format", "json")
    assert status == 1
    rows = {json.loads(line)["record"]["uid"]: json.loads(line) for line in out.splitlines()}
    assert rows["u2"]["record"]["user"] == "mallory" and rows["u2"]["verified"] is False
    assert rows["u3"]["verified"] is False  # after the break: could have been rewritten to match
    if "u1" in rows:
        assert rows["u1"]["verified"] is True
    assert "THE DECISION LOG'S HASH CHAIN IS BROKEN at seq 2" in err

    status, out, err = _cli(capsys, *command, "--decision-log", url)
    assert status == 1
    assert "UNVERIFIED (not vouched for by the hash chain): #2" in out
    status, out, err = _cli(capsys, *command, "--decision-log", url, "--no-verify")
    assert status == 0 and "mallory" in out
    assert "the hash chain was not checked (--no-verify)" in err


def test_history_marks_an_edited_record(history_log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{history_log}"
    _edit_row(history_log, 6, '"user":"release-bot"', '"user":"someone-else"')
    status, out, err = _cli(capsys, "history", "prod/resnet50", "--decision-log", url)
    assert status == 1
    assert "by someone-else" in out and "UNVERIFIED" in out
    assert "HASH CHAIN IS BROKEN at seq 6" in err
    status, out, _ = _cli(capsys, "history", "prod/resnet50", "--decision-log", url, "--format", "json")
    document = json.loads(out)
    assert status == 1 and document["chain"]["ok"] is False
    assert [entry["verified"] for entry in document["entries"]] == [True, False]


#: A requester and a message as an admission request may carry them: a newline that forges a record line,
#: a right-to-left override, a line separator, tag characters, an escape sequence.
HOSTILE_USER = "mallory\n2026-12-01T00:00:00Z  #9      ALLOW CREATE  prod/Pod/fake by admin\u202e"
HOSTILE_MESSAGE = "denied\u2028ALLOW\U000e0041\x1b[2K"


def _one_line_each(out: str) -> None:
    assert out.count("\n") == len(out.splitlines()), "a character other than \\n broke a line"
    assert not any(c in out for c in "\u202e\u2028\x1b\U000e0041")


def test_tail_and_query_show_hostile_text_written_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "hostile.db"
    hostile = _record(
        uid="h", user=HOSTILE_USER, allowed=False, reason="PolicyViolation", message=HOSTILE_MESSAGE
    )
    _write(path, [hostile])
    for command in ("tail", "query"):
        status, out, _ = _cli(capsys, command, "--decision-log", f"sqlite:///{path}")
        assert status == 0
        _one_line_each(out)
        record, message = out.splitlines()
        assert (
            "by mallory<U+000A>2026-12-01T00:00:00Z  #9      ALLOW CREATE  prod/Pod/fake by admin<U+202E>"
            in record
        )
        assert message == "    denied<U+2028>ALLOW<U+E0041><U+001B>[2K"


def test_history_shows_hostile_text_written_out(
    tmp_path: Path, demo_material: Material, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "hostile-history.db"
    _write(
        path,
        [
            _record(
                uid="h",
                user=HOSTILE_USER,
                groups=(HOSTILE_MESSAGE,),
                engines=(_engine(demo_material, "fp16"),),
            )
        ],
    )
    status, out, _ = _cli(capsys, "history", "prod/resnet50", "--decision-log", f"sqlite:///{path}")
    assert status == 0
    _one_line_each(out)
    assert "by mallory<U+000A>2026-12-01T00:00:00Z  #9" in out
    assert "(groups: denied<U+2028>ALLOW<U+E0041><U+001B>[2K)" in out

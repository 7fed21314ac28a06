"""``trtguard audit seal|archive|prune|rotate|backup`` and ``verify --key/--anchor/--archive`` (SQLite)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from decisionlog import DecisionRecord, PostgresStore, SQLiteStore
from decisionlog._sqlite import write_batch
from trtguard.cli import main
from verifier.base._deadline import Deadline
from verifier.crypto._keys import encrypt_private_key, generate_private_key

START = datetime(2026, 1, 1, tzinfo=UTC)


def _record(n: int, **fields: Any) -> DecisionRecord:
    base: dict[str, Any] = {
        "uid": f"u{n}",
        "operation": "CREATE",
        "kind": "Deployment",
        "api_version": "apps/v1",
        "allowed": True,
        "reason": "Allowed",
        "namespace": "prod",
        "name": "resnet50",
        "time": START + timedelta(minutes=n),
    }
    base.update(fields)
    return DecisionRecord(**base)


def _write(path: Path, numbers: range) -> None:
    async def go() -> None:
        store = SQLiteStore(path)
        await store.open()
        for n in numbers:
            await store.append(_record(n), deadline=Deadline.after(5))
        await store.close()

    asyncio.run(go())


@pytest.fixture
def keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    key = generate_private_key()
    private, public = tmp_path / "checkpoint.key", tmp_path / "checkpoint.pub"
    private.write_bytes(encrypt_private_key(key, b"pw"))
    public.write_bytes(key.public_key().to_pem())
    monkeypatch.setenv("TRTGUARD_PASSWORD", "pw")
    return private, public


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["audit", *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_rotate_then_verify_the_live_log_and_an_archive(
    tmp_path: Path, keys: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    private, public = keys
    log, folder = tmp_path / "decisions.db", tmp_path / "archive"
    url = f"sqlite:///{log}"
    _write(log, range(1, 13))
    # An anchor for today, kept outside the log: the checkpoint of seq 1…10.
    status, out, _ = _cli(
        capsys,
        "seal",
        "--decision-log",
        url,
        "--key",
        str(private),
        "--segment-records",
        "10",
        "--only-full",
        "--anchor-out",
        str(tmp_path / "anchor.json"),
    )
    assert status == 0 and "sealed seq 1…10" in out and "11…" not in out
    _write(log, range(13, 26))
    rotate = ("rotate", "--decision-log", url, "--key", str(private), "--segment-records", "10",
              "--archive", str(folder), "--keep-records", "5")  # fmt: skip
    status, out, _ = _cli(capsys, *rotate)
    assert status == 0, out
    assert "sealed seq 11…20" in out and "archived seq 1…10" in out and "pruned seq 11…20 (10 records" in out
    # The anchor (seq 10) was pruned: the stored checkpoints link from it to the one the log starts from.
    status, out, _ = _cli(capsys, "verify", "--decision-log", url, "--key", str(public), "--anchor",
                          str(tmp_path / "anchor.json"), "--format", "json")  # fmt: skip
    result = json.loads(out)
    assert status == 0, result
    assert (result["ok"], result["records"], result["base_seq"], result["problems"]) == (True, 5, 20, [])
    assert result["base_signature_checked"] is True
    segment = folder / "decisions-000000000001-000000000010.jsonl.gz"
    status, out, _ = _cli(capsys, "verify", "--archive", str(segment), "--key", str(public))
    assert status == 0 and "chain verified: 10 records" in out
    status, _, err = _cli(capsys, "verify", "--archive", str(segment))
    assert status == 2 and "--archive needs --key" in err
    # Another key's checkpoint does not vouch for the log.
    other = generate_private_key()
    (tmp_path / "other.pub").write_bytes(other.public_key().to_pem())
    status, out, _ = _cli(capsys, "verify", "--decision-log", url, "--key", str(tmp_path / "other.pub"))
    assert status == 1 and "seq 20 the log was pruned up to is not signed by --key" in out


def test_an_anchor_catches_a_log_reset_or_cut_short(
    tmp_path: Path, keys: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    private, public = keys
    log = tmp_path / "decisions.db"
    url = f"sqlite:///{log}"
    _write(log, range(1, 6))
    anchor = tmp_path / "anchor.json"
    assert (
        _cli(capsys, "seal", "--decision-log", url, "--key", str(private), "--anchor-out", str(anchor))[0]
        == 0
    )
    # The whole log replaced by a fresh, self-consistent one of three records: its chain verifies alone. (The
    # head file goes too: with it, the webhook itself would refuse to start on the replaced log.)
    log.unlink()
    Path(f"{log}.head").unlink()
    _write(log, range(1, 4))
    assert _cli(capsys, "verify", "--decision-log", url)[0] == 0
    status, out, _ = _cli(
        capsys, "verify", "--decision-log", url, "--key", str(public), "--anchor", str(anchor)
    )
    assert status == 1 and "the log ends at seq 3, before the anchor's seq 5" in out
    _write(log, range(4, 8))  # as long as before, but not the same records
    status, out, _ = _cli(
        capsys, "verify", "--decision-log", url, "--key", str(public), "--anchor", str(anchor)
    )
    assert status == 1 and "the record at seq 5 is not the anchor's head" in out
    status, _, err = _cli(capsys, "verify", "--decision-log", url, "--anchor", str(anchor))
    assert status == 2 and "--anchor needs --key" in err


def test_an_anchor_is_not_bridged_by_unsigned_checkpoints(
    tmp_path: Path, keys: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A replaced log, rotated and pruned as usual, then two checkpoint rows INSERTed to link it to the
    anchor.

    Only the checkpoint the log starts from was signed-checked before; every checkpoint from the anchor to it
    must be signed by the key and link.
    """
    private, public = keys
    log, folder, anchor = tmp_path / "decisions.db", tmp_path / "archive", tmp_path / "anchor.json"
    url = f"sqlite:///{log}"
    _write(log, range(1, 6))
    seal = ("seal", "--decision-log", url, "--key", str(private), "--anchor-out", str(anchor))
    assert _cli(capsys, *seal)[0] == 0
    log.unlink()
    Path(f"{log}.head").unlink()
    _write(log, range(100, 130))
    rotate = ("rotate", "--decision-log", url, "--key", str(private), "--segment-records", "10",
              "--archive", str(folder), "--keep-records", "10")  # fmt: skip
    assert _cli(capsys, *rotate)[0] == 0
    kept = json.loads(anchor.read_text())["checkpoint"]
    connection = sqlite3.connect(log)
    first_head = json.loads(
        connection.execute("SELECT statement FROM trtguard_checkpoints ORDER BY last_seq").fetchone()[0]
    )["head_hash"]
    for row, (first, last, prev, head) in enumerate(
        [(1, 5, kept["prev_hash"], kept["head_hash"]), (6, 10, kept["head_hash"], first_head)]
    ):
        statement = {**kept, "first_seq": first, "last_seq": last, "count": last - first + 1,
                     "prev_hash": prev, "head_hash": head}  # fmt: skip
        connection.execute(
            "INSERT INTO trtguard_checkpoints (last_seq, statement, signature) VALUES (?, ?, ?)",
            (10**9 + row, json.dumps(statement, sort_keys=True, separators=(",", ":")), "AAAA"),
        )
    connection.commit()
    connection.close()
    status, out, _ = _cli(
        capsys, "verify", "--decision-log", url, "--key", str(public), "--anchor", str(anchor)
    )
    assert status == 1, out
    assert "two stored checkpoints end at seq 10" in out and "seq 10 is not signed by --key" in out


def test_pruning_is_refused_outside_the_controlled_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "decisions.db"
    _write(log, range(1, 4))
    with sqlite3.connect(log) as conn, pytest.raises(sqlite3.DatabaseError, match="archived sealed segments"):
        conn.execute("DELETE FROM trtguard_decisions WHERE seq = 1")
    status, out, _ = _cli(capsys, "prune", "--decision-log", f"sqlite:///{log}", "--archive", str(tmp_path))
    assert status == 0 and "nothing to prune" in out


def test_backup_and_restore_as_documented(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/decision-log-storage.md, "Backup and restore": the steps, and why a file copy is not one."""
    log = tmp_path / "decisions.db"
    _write(log, range(1, 4))
    # A writer whose last commits are still in the WAL (no checkpoint yet), as under a running webhook.
    writer = sqlite3.connect(log, isolation_level=None)
    writer.execute("PRAGMA wal_autocheckpoint=0")
    write_batch(writer, [_record(n) for n in range(4, 9)], dedupe=False)
    try:
        assert Path(f"{log}-wal").stat().st_size > 0
        # Copying the file alone loses the records in the WAL, and the copy still verifies.
        naive = tmp_path / "copied.db"
        shutil.copyfile(log, naive)
        status, out, _ = _cli(capsys, "verify", "--decision-log", f"sqlite:///{naive}")
        assert status == 0 and "chain verified: 3 records" in out
        # The backup command has them all, checked.
        backup = tmp_path / "backup.db"
        status, out, _ = _cli(capsys, "backup", "--decision-log", f"sqlite:///{log}", "--to", str(backup))
        assert status == 0 and "chain verified: 8 records" in out
        assert not Path(f"{backup}-wal").exists()
        status, _, err = _cli(capsys, "backup", "--decision-log", f"sqlite:///{log}", "--to", str(backup))
        assert status == 1 and "already exists" in err
    finally:
        writer.close()
    # Restore: webhook stopped; the log and its -wal and -shm moved away; the backup copied in its place.
    for suffix in ("", "-wal", "-shm", ".head"):
        Path(f"{log}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(backup, log)
    _write(log, range(9, 10))  # the webhook starts again and goes on from the restored head
    status, out, _ = _cli(capsys, "verify", "--decision-log", f"sqlite:///{log}")
    assert status == 0 and "chain verified: 9 records" in out


def test_backup_of_postgresql_points_to_pg_dump(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = "postgresql://trtguard:secret@db.example/trtguard"
    status, _, err = _cli(capsys, "backup", "--decision-log", url, "--to", str(tmp_path / "b.db"))
    assert status == 1 and "pg_dump" in err and "secret" not in err


@pytest.mark.postgres
def test_rotate_and_verify_on_postgresql(
    pg_url: str, tmp_path: Path, keys: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    private, public = keys

    async def write(numbers: range) -> None:
        store = PostgresStore(pg_url)
        await store.open()
        for n in numbers:
            await store.append(_record(n), deadline=Deadline.after(5))
        await store.close()

    asyncio.run(write(range(1, 10)))
    anchor = tmp_path / "anchor.json"
    seal = ("seal", "--decision-log", pg_url, "--key", str(private), "--segment-records", "4", "--only-full",
            "--anchor-out", str(anchor))  # fmt: skip
    assert _cli(capsys, *seal)[0] == 0
    rotate = ("rotate", "--decision-log", pg_url, "--key", str(private), "--segment-records", "4",
              "--archive", str(tmp_path / "archive"), "--keep-records", "1")  # fmt: skip
    status, out, _ = _cli(capsys, *rotate)
    assert status == 0 and "pruned seq 5…8" in out, out
    asyncio.run(write(range(10, 12)))
    verify = ("verify", "--decision-log", pg_url, "--key", str(public), "--anchor", str(anchor))
    status, out, _ = _cli(capsys, *verify)
    assert status == 0, out
    assert "chain verified: 3 records after the checkpoint at seq 8" in out
    assert "agrees with the signed checkpoint seq 5…8" in out


def _rotated(tmp_path: Path, private: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, Path, Path]:
    """A log of 35 records rotated in segments of 10 (three archived and pruned), with an anchor of seq 10."""
    log, folder, anchor = tmp_path / "decisions.db", tmp_path / "archive", tmp_path / "anchor.json"
    url = f"sqlite:///{log}"
    _write(log, range(1, 11))
    seal = ("seal", "--decision-log", url, "--key", str(private), "--anchor-out", str(anchor))
    assert _cli(capsys, *seal)[0] == 0
    _write(log, range(11, 36))
    rotate = ("rotate", "--decision-log", url, "--key", str(private), "--segment-records", "10",
              "--archive", str(folder), "--keep-records", "5")  # fmt: skip
    status, out, _ = _cli(capsys, *rotate)
    assert status == 0 and "pruned seq 21…30" in out, out
    return url, folder, anchor


def test_the_archive_folder_is_checked_as_a_whole(
    tmp_path: Path, keys: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 31: `--archive` checked one segment at a time, so a segment deleted with its checkpoint file
    went unnoticed. The folder is checked as a whole: every checkpoint from seq 1 on, signed and linked,
    every segment there and matching, through the seq the live log starts after."""
    private, public = keys
    url, folder, _ = _rotated(tmp_path, private, capsys)
    status, out, _ = _cli(capsys, "verify", "--archive", str(folder), "--key", str(public))
    assert status == 0 and "archive verified: 30 records" in out, out
    whole = ("verify", "--archive", str(folder), "--key", str(public), "--decision-log", url)
    status, out, _ = _cli(capsys, *whole)
    assert status == 0 and "through seq 30, where the live log starts" in out, out

    # The middle segment and its checkpoint file deleted together: a gap in the chain of checkpoints.
    middle = "decisions-000000000011-000000000020"
    kept = tmp_path / "kept"
    kept.mkdir()
    for suffix in (".jsonl.gz", ".checkpoint.json"):
        shutil.move(folder / f"{middle}{suffix}", kept / f"{middle}{suffix}")
    status, out, _ = _cli(capsys, "verify", "--archive", str(folder), "--key", str(public))
    assert status == 1 and "the checkpoints of seq 11…20 are missing" in out, out
    # With the live log, its own checkpoint names the missing file too.
    status, out, _ = _cli(capsys, *whole)
    assert status == 1 and f"the segment of seq 11…20 is missing ({middle}.jsonl.gz)" in out, out
    for suffix in (".jsonl.gz", ".checkpoint.json"):
        shutil.move(kept / f"{middle}{suffix}", folder / f"{middle}{suffix}")

    # The newest segment and its checkpoint deleted: nothing in the folder shows a gap, the live log does.
    newest = "decisions-000000000021-000000000030"
    for suffix in (".jsonl.gz", ".checkpoint.json"):
        (folder / f"{newest}{suffix}").unlink()
    status, out, _ = _cli(capsys, *whole)
    assert status == 1 and f"the segment of seq 21…30 is missing ({newest}.jsonl.gz)" in out, out
    # Its stored checkpoint deleted as well (by someone who can drop the triggers): the archive does not
    # reach the seq the live log starts after (the live log, verified alone, breaks at its first record).
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        connection.execute("DROP TRIGGER trtguard_checkpoints_no_delete")
        connection.execute("DELETE FROM trtguard_checkpoints WHERE last_seq = 30")
    status, out, _ = _cli(capsys, *whole)
    assert status == 1, out
    assert "the live log starts after seq 20" not in out


def test_a_deleted_middle_pruned_checkpoint_is_named_where_it_is_missing(
    tmp_path: Path, keys: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 31: deleting the stored checkpoint of seq 11…20 was reported at the checkpoint after it."""
    private, public = keys
    url, _, anchor = _rotated(tmp_path, private, capsys)
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        connection.execute("DROP TRIGGER trtguard_checkpoints_no_delete")
        connection.execute("DELETE FROM trtguard_checkpoints WHERE last_seq = 20")
    verify = ("verify", "--decision-log", url, "--key", str(public), "--anchor", str(anchor))
    status, out, _ = _cli(capsys, *verify)
    assert status == 1, out
    assert "the checkpoints of seq 11…20 are missing between seq 10 and the checkpoint of seq 21…30" in out

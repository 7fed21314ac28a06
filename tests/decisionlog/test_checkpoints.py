"""decisionlog/_checkpoints.py: a checkpoint is read as one text says it, or refused with why: a checkpoint
file (an ``--anchor``, an archive's ``.checkpoint.json``) holding a key twice, or members beside
``checkpoint`` and ``signature``; a stored statement that is not exactly the canonical JSON stored (attack
39a F1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from decisionlog import DecisionLogError
from decisionlog import _checkpoints as checkpoints
from decisionlog._record import GENESIS_HASH, canonical_json
from verifier.crypto._keys import PrivateKey

SCHEMA_3_ARCHIVE = Path(__file__).resolve().parents[1] / "data" / "770-schema-3-rotated-log" / "archive"


def _checkpoint(key: PrivateKey) -> checkpoints.Checkpoint:
    return checkpoints.sign(
        key,
        first_seq=4,
        last_seq=6,
        prev_hash="a" * 64,
        head_hash="b" * 64,
        first_time="2026-12-04T18:00:00.000000Z",
        last_time="2026-12-04T18:01:00.000000Z",
        prev_carried_hash="c" * 64,
        carried_hash="d" * 64,
    )


def _written(key: PrivateKey, tmp_path: Path) -> tuple[checkpoints.Checkpoint, Path]:
    checkpoint = _checkpoint(key)
    path = tmp_path / "anchor.json"
    checkpoints.write_checkpoint_file(checkpoint, path)
    assert checkpoints.read_checkpoint_file(path) == checkpoint
    return checkpoint, path


@pytest.mark.parametrize(
    ("signed", "first"),
    [
        ('"last_seq": 6,', '"last_seq": 999, '),
        ('"head_hash": "', f'"head_hash": "{GENESIS_HASH}", '),
        ('"count": 3,', '"count": 2, '),
    ],
    ids=["last_seq", "head_hash", "count"],
)
def test_a_checkpoint_file_with_a_key_twice_is_refused_naming_it(
    key: PrivateKey, tmp_path: Path, signed: str, first: str
) -> None:
    _, path = _written(key, tmp_path)
    text = path.read_text()
    assert signed in text
    path.write_text(text.replace(signed, first + signed, 1))
    with pytest.raises(DecisionLogError) as caught:
        checkpoints.read_checkpoint_file(path)
    name = signed.split('"')[1]
    assert f"the key {name!r} appears twice in one object" in caught.value.message
    assert caught.value.location == str(path)


def test_a_checkpoint_file_laid_out_otherwise_is_still_read(key: PrivateKey, tmp_path: Path) -> None:
    """People copy anchors: only a key twice, not whitespace or order, makes readers disagree."""
    checkpoint, path = _written(key, tmp_path)
    path.write_text(json.dumps(checkpoint.to_json(), sort_keys=True, separators=(",", ":")))
    assert checkpoints.read_checkpoint_file(path) == checkpoint


def test_a_checkpoint_file_with_members_beside_checkpoint_and_signature_is_refused(
    key: PrivateKey, tmp_path: Path
) -> None:
    checkpoint, path = _written(key, tmp_path)
    path.write_text(json.dumps({**checkpoint.to_json(), "last_seq": 999}))
    with pytest.raises(DecisionLogError, match=r"members other than checkpoint and signature \(last_seq\)"):
        checkpoints.read_checkpoint_file(path)


def test_checkpoint_files_an_earlier_trtguard_wrote_are_read() -> None:
    paths = sorted(SCHEMA_3_ARCHIVE.glob("*.checkpoint.json"))
    assert paths
    for path in paths:
        assert checkpoints.read_checkpoint_file(path).version == 2


def test_a_stored_statement_is_taken_only_as_its_canonical_json(key: PrivateKey) -> None:
    checkpoint = _checkpoint(key)
    stored = canonical_json(checkpoint.statement()).decode()
    signature = checkpoint.signature_text()
    assert checkpoints.from_row(stored, signature, where="log") == checkpoint
    duplicated = stored.replace('"first_seq":4', '"first_seq":1,"first_seq":4')
    with pytest.raises(DecisionLogError) as caught:
        checkpoints.from_row(duplicated, signature, where="log")
    assert (
        "not the canonical JSON (RFC 8785) written: the key 'first_seq' appears twice" in caught.value.message
    )
    spaced = json.dumps(checkpoint.statement(), sort_keys=True)
    with pytest.raises(DecisionLogError, match="other text for the same values"):
        checkpoints.from_row(spaced, signature, where="log")

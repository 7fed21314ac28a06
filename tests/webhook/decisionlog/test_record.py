"""webhook/decisionlog/record.py: the stored JSON form and the chain hash."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from tests.webhook.harness import RecordFactory
from webhook.decisionlog import GENESIS_HASH, DecisionLogError, DecisionRecord, chain_hash
from webhook.decisionlog.record import canonical_json, link_hash, new_record_id


def test_round_trip_keeps_every_field(make_record: RecordFactory) -> None:
    record = make_record(
        dry_run=True,
        allowed=False,
        reason="PolicyViolation",
        message="prod/images: nginx:latest is not pinned; fix: use a digest",
        violations=(
            {
                "policy": "prod",
                "rule": "images",
                "action": "Deny",
                "message": "m",
                "fix": "f",
                "error": False,
            },
        ),
        warnings=("w1", "w2"),
        sub_resource="ephemeralcontainers",
        replica="trtguard-0",
    )
    again = DecisionRecord.from_json(json.loads(record.canonical()))
    assert again == record


def test_time_is_utc_with_microseconds_and_z() -> None:
    moment = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2)))
    record = DecisionRecord(
        uid="u", operation="CREATE", kind="Pod", api_version="v1", allowed=True, reason="Allowed", time=moment
    )
    assert record.to_json()["time"] == "2026-03-01T10:00:00.123456Z"
    assert DecisionRecord.from_json(record.to_json()).time == moment.astimezone(UTC)


def test_hash_is_sha256_of_jcs_of_prev_and_record(make_record: RecordFactory) -> None:
    record = make_record()
    data = record.to_json()
    expected = hashlib.sha256(rfc8785.dumps({"prev_hash": GENESIS_HASH, "record": data})).hexdigest()
    assert chain_hash(GENESIS_HASH, data) == expected
    # Key order and float formatting of the stored JSON do not matter: the hash is over the canonical form.
    reordered = json.loads(json.dumps(data, sort_keys=False, indent=2))
    assert chain_hash(GENESIS_HASH, dict(reversed(list(reordered.items())))) == expected


def test_hash_depends_on_previous_hash_and_content(make_record: RecordFactory) -> None:
    data = make_record().to_json()
    assert chain_hash(GENESIS_HASH, data) != chain_hash("1" * 64, data)
    changed = dict(data, allowed=False)
    assert chain_hash(GENESIS_HASH, data) != chain_hash(GENESIS_HASH, changed)


@pytest.mark.parametrize(
    ("key", "value"),
    [("allowed", "yes"), ("uid", 5), ("time", "2026-01-01T00:00:00"), ("violations", ["x"])],
)
def test_from_json_rejects_a_record_of_the_wrong_shape(
    make_record: RecordFactory, key: str, value: object
) -> None:
    data = make_record().to_json()
    data[key] = value
    with pytest.raises(DecisionLogError, match="not a decision record"):
        DecisionRecord.from_json(data)


def test_link_hash_is_the_jcs_of_the_wrapper(make_record: RecordFactory) -> None:
    data = make_record(message='ünïcode ✓ \u2028 \x7f \x01 "q" \\', latency_us=2**40).to_json()
    expected = hashlib.sha256(rfc8785.dumps({"prev_hash": "a" * 64, "record": data})).hexdigest()
    assert link_hash("a" * 64, rfc8785.dumps(data)) == expected == chain_hash("a" * 64, data)


@pytest.mark.parametrize(
    "value",
    [
        {"b": 1, "a": [True, None, "x"], "é": "non-ASCII key"},
        {"f": 1.5},
        {"s": "\u0000\u001f\ud7ff\U0001f600 \b\f\n\r\t"},
        {"nested": {"z": [{"y": 0.1}, 2]}},
    ],
)
def test_canonical_json_is_jcs_for_any_value(value: dict[str, Any]) -> None:
    assert canonical_json(value) == rfc8785.dumps(value)


def test_canonical_json_refuses_what_jcs_cannot_express() -> None:
    with pytest.raises(rfc8785.IntegerDomainError):
        canonical_json({"big": 2**60})


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(),
        lambda children: st.lists(children) | st.dictionaries(st.text(), children),
        max_leaves=20,
    )
)
def test_canonical_json_matches_rfc8785_on_generated_records(extra: Any) -> None:
    data: dict[str, Any] = {"record_id": "r", "extra": extra}
    assert canonical_json(data) == rfc8785.dumps(data)


def test_record_ids_are_unique_and_hex() -> None:
    ids = {new_record_id() for _ in range(10000)}
    assert len(ids) == 10000
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)

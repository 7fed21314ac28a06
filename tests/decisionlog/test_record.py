"""decisionlog/_record.py: the stored JSON form and the chain hash."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from decisionlog import GENESIS_HASH, DecisionLogError, DecisionRecord, chain_hash
from decisionlog._record import (
    MAX_ITEMS,
    MAX_LIST_CHARS,
    MAX_TEXT_CHARS,
    UNSTORABLE_MARK,
    canonical_json,
    canonical_parts,
    format_time,
    link_hash,
    new_record_id,
    storable,
)
from decisionlog._stored import _Apart, _untouched, stored_form
from decisionlog._tree_json import tree_json
from tests.support.harness import RecordFactory


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


@given(
    st.dictionaries(
        st.sampled_from(["allowed", "engines", "format", "images", "kind", "uid", "warnings"]),
        st.recursive(
            st.none()
            | st.booleans()
            | st.integers(-(2**53) + 1, 2**53 - 1)
            | st.floats(allow_nan=False, allow_infinity=False)
            | st.text(),
            lambda children: st.lists(children) | st.dictionaries(st.text(), children),
            max_leaves=10,
        ),
    )
)
def test_canonical_parts_are_the_jcs_of_the_whole_the_rest_and_the_parts_apart(data: dict[str, Any]) -> None:
    # The stores hash the whole and keep the rest and the shared part apart, from one encoding of each member.
    apart = ("engines", "images")
    whole, rest, alone = canonical_parts(data, apart)
    assert whole == rfc8785.dumps(data)
    assert rest == rfc8785.dumps({key: value for key, value in data.items() if key not in apart})
    assert alone == rfc8785.dumps({key: value for key, value in data.items() if key in apart})


def test_record_ids_are_unique_and_hex() -> None:
    ids = {new_record_id() for _ in range(10000)}
    assert len(ids) == 10000
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)


# --- storable(): whatever a request held can be recorded --------------------------------------------------


def test_unstorable_characters_are_escaped_behind_a_marker(make_record: RecordFactory) -> None:
    """A lone surrogate (from a "\\ud800" escape) has no UTF-8 form; PostgreSQL text refuses NUL."""
    record = make_record(
        uid="uid-\ud800",
        name="a\x00b",
        namespace="\udc80ns",
        message="bad \udfff",
        warnings=("w\x00",),
        violations=({"rule": "r", "message": "image \ud800:latest", "nested": {"k\x00": ["\ud801"]}},),
        images=({"reference": "x\udcff", "digest": None, "path": "spec.containers[0].image"},),
    )
    with pytest.raises(UnicodeEncodeError):
        record.canonical()
    stored = storable(record)
    assert stored.uid == f"uid-{UNSTORABLE_MARK}\\ud800"
    assert stored.name == f"a{UNSTORABLE_MARK}\\u0000b"
    assert stored.namespace == f"{UNSTORABLE_MARK}\\udc80ns"
    assert stored.message == f"bad {UNSTORABLE_MARK}\\udfff"
    assert stored.warnings == (f"w{UNSTORABLE_MARK}\\u0000",)
    assert stored.violations[0]["message"] == f"image {UNSTORABLE_MARK}\\ud800:latest"
    assert stored.violations[0]["nested"] == {f"k{UNSTORABLE_MARK}\\u0000": [f"{UNSTORABLE_MARK}\\ud801"]}
    assert stored.images[0]["reference"] == f"x{UNSTORABLE_MARK}\\udcff"
    body = stored.canonical()
    assert b"\x00" not in body
    assert DecisionRecord.from_json(json.loads(body)) == stored
    assert (stored.record_id, stored.time, stored.allowed) == (record.record_id, record.time, record.allowed)


def test_long_text_and_long_lists_are_cut_with_a_marker(make_record: RecordFactory) -> None:
    record = make_record(
        name="n" * 100_000,
        message="m" * (MAX_TEXT_CHARS + 1),
        warnings=tuple(f"w{i}" for i in range(MAX_ITEMS + 500)),
        violations=tuple({"rule": "r", "message": "x" * 4000} for _ in range(500)),
        images=tuple({"reference": f"r{i}", "digest": None, "path": "p"} for i in range(MAX_ITEMS + 1)),
    )
    stored = storable(record)
    assert len(stored.name or "") <= MAX_TEXT_CHARS
    assert stored.name is not None and stored.name.startswith("n" * 4000)
    assert stored.name.endswith(f"…[{100_000 - (MAX_TEXT_CHARS - 64)} more characters not recorded]")
    assert stored.message is not None and stored.message.endswith("more characters not recorded]")
    assert len(stored.warnings) == MAX_ITEMS
    assert stored.warnings[:3] == ("w0", "w1", "w2")
    assert stored.warnings[-1] == f"[{MAX_ITEMS + 500 - (MAX_ITEMS - 1)} more entries not recorded]"
    kept = len(stored.violations) - 1
    assert 0 < kept < 500 and stored.violations[-1] == {"omitted": 500 - kept}
    assert len(json.dumps(list(stored.violations))) <= MAX_LIST_CHARS
    assert stored.images[-1] == {"omitted": 2}
    assert len(stored.canonical()) < 1024 * 1024  # every list bounded: a record stays under a MiB or so
    assert DecisionRecord.from_json(json.loads(stored.canonical())) == stored


def test_numbers_that_jcs_cannot_write_are_kept_as_text(make_record: RecordFactory) -> None:
    record = make_record(violations=({"rule": "r", "size": 2**60, "ratio": float("nan"), "ok": 2**40},))
    stored = storable(record)
    assert stored.violations[0] == {"rule": "r", "size": str(2**60), "ratio": "nan", "ok": 2**40}
    assert chain_hash(GENESIS_HASH, stored.to_json())


def test_storable_changes_nothing_twice(make_record: RecordFactory) -> None:
    """Records read back (or shipped again from a spool) keep their content, hence their hash."""
    plain = make_record()
    assert storable(plain) is plain
    odd = storable(
        make_record(
            uid="\ud800" * 5000,
            warnings=tuple("w\x00" for _ in range(MAX_ITEMS * 2)),
            violations=tuple({"message": "\udc80" * 3000} for _ in range(300)),
        )
    )
    assert storable(odd) is odd
    again = DecisionRecord.from_json(json.loads(odd.canonical()))
    assert storable(again) == again == odd


# st.text() never yields lone surrogates; build strings from characters, the troublesome ones included.
_ANY_TEXT = st.lists(
    st.one_of(
        st.characters(), st.sampled_from(["\x00", "\ud800", "\udc80", "\udfff", UNSTORABLE_MARK, "\\"])
    ),
    max_size=50,
).map("".join)


@given(_ANY_TEXT)
def test_any_text_becomes_storable_text(text: str) -> None:
    record = DecisionRecord(
        uid=text, operation=text, kind=text, api_version=text, allowed=False, reason=text, name=text
    )
    stored = storable(record)
    stored.canonical()  # encodes as UTF-8
    assert all("\x00" not in getattr(stored, f) for f in ("uid", "operation", "kind", "name"))
    assert storable(stored) is stored
    if not any(c == "\x00" or "\ud800" <= c <= "\udfff" for c in text):
        assert stored is record


def test_format_1_records_read_back_to_the_object_they_were_hashed_as(make_record: RecordFactory) -> None:
    """Records written before format 2 have no "format" and no "groups": they read back unchanged."""
    old = {k: v for k, v in make_record().to_json().items() if k not in ("format", "groups")}
    record = DecisionRecord.from_json(old)
    assert record.format == 1 and record.to_json() == old
    assert chain_hash(GENESIS_HASH, record.to_json()) == chain_hash(GENESIS_HASH, old)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda d: d.update(extra=1), "unexpected: extra"),
        (lambda d: d.pop("groups"), "missing: groups"),
        (lambda d: d.update(format=3), "unknown record format 3"),
        (lambda d: d.update(groups="admins"), "groups is not a list of strings"),
        (lambda d: (d.pop("format"), d.pop("groups"), d.update(extra=1)), "keys of format 1 expected"),
    ],
)
def test_a_record_has_exactly_the_keys_of_its_format(
    make_record: RecordFactory, change: Any, problem: str
) -> None:
    data = make_record(groups=("system:authenticated",)).to_json()
    change(data)
    with pytest.raises(DecisionLogError, match=problem):
        DecisionRecord.from_json(data)


@pytest.mark.parametrize(
    ("text", "bound"),
    [
        ("x", 1_400_000),  # printable ASCII: about 1.4 MB (docs/decision-log.md, "Bounds")
        ("\x01", 8_000_000),  # every character escaped in six bytes: the worst case
    ],
)
def test_a_record_is_bounded_as_documented(text: str, bound: int) -> None:
    long, item = text * (2 * MAX_TEXT_CHARS), text * 300
    many = 3 * MAX_ITEMS
    record = DecisionRecord(
        uid=long,
        operation=long,
        kind=long,
        api_version=long,
        reason=long,
        namespace=long,
        name=long,
        sub_resource=long,
        user=long,
        message=long,
        policy_revision=long,
        replica=long,
        allowed=False,
        violations=tuple({"policy": item, "rule": item, "message": item} for _ in range(many)),
        warnings=(item,) * many,
        images=tuple({"reference": item, "signatures": [{"digest": item}]} for _ in range(many)),
        engines=tuple({"reference": item} for _ in range(many)),
        groups=(item,) * many,
    )
    size = len(storable(record).canonical())
    assert bound * 0.9 < size <= bound


# What a record's lists may hold, the odd cases included: text a store cannot hold, text past the bounds,
# numbers JCS cannot write, floats, tuples, non-ASCII and non-string keys.
_ODD_VALUE = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | _ANY_TEXT
    | st.sampled_from(["x" * (MAX_TEXT_CHARS + 1), "\\u0000", 2**53, -(2**53)]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.lists(children, max_size=3).map(tuple)
        | st.dictionaries(_ANY_TEXT | st.sampled_from(["é", "digest"]), children, max_size=4)
        | st.dictionaries(st.integers(0, 3), children, max_size=2)
    ),
    max_leaves=12,
)


@given(
    st.lists(st.dictionaries(st.sampled_from(["reference", "digest", "é"]), _ODD_VALUE), max_size=3),
    st.lists(_ANY_TEXT, max_size=3),
    _ANY_TEXT,
)
def test_stored_form_is_storable_encoded_as_the_stores_did(
    entries: list[dict[str, Any]], texts: list[str], text: str
) -> None:
    """The one-walk path gives the bytes (and the record) of storable() and canonical_parts(), whatever the
    record holds."""
    record = DecisionRecord(
        uid=text,
        operation="CREATE",
        kind="Pod",
        api_version="v1",
        allowed=True,
        reason="Allowed",
        message=text,
        images=tuple(entries),
        engines=tuple(entries[:1]),
        violations=tuple(entries[1:]),
        warnings=tuple(texts),
        groups=tuple(texts[:1]),
    )
    apart = ("engines", "images")
    general = storable(record)
    expected = (general, general.to_json(), canonical_parts(general.to_json(), apart))
    assert stored_form(record, apart) == expected


_PLAIN_TREE = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["", "a", "1", "true"]),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.sampled_from("abc"), children, max_size=3)
    ),
    max_leaves=8,
)


@given(st.lists(_PLAIN_TREE, min_size=2, max_size=6))
def test_the_memo_of_parts_apart_gives_their_json_whatever_came_before(values: list[Any]) -> None:
    """Parts equal in Python but not in JSON (``True == 1``, ``0 == False``), or in another order, each get
    their own JSON, however often and in whatever order they come."""
    for value in [*values, *reversed(values)]:
        assert _untouched(value)
        assert _apart_json(value) == tree_json(value)


def _apart_json(value: Any) -> bytes:
    """The JSON stored_form gives ``value`` as a part apart, remembered (or found) on the way."""
    data = {"part": value}
    parts = _Apart(data, ("part",))
    assert parts.untouched(data)
    return parts.json(value)


def test_the_memo_tells_true_from_one_and_walks_what_it_never_saw() -> None:
    assert _apart_json([{"tlog_index": 1}]) == b'[{"tlog_index":1}]'
    assert _apart_json([{"tlog_index": True}]) == b'[{"tlog_index":true}]'
    _apart_json([{"tlog_index": 1}])
    for odd in ([{"tlog_index": 1.0}], [("a", "tuple")], ["x" * (MAX_TEXT_CHARS + 1)]):
        data = {"part": odd}
        assert not _Apart(data, ("part",)).untouched(data)


def test_stored_form_takes_a_plain_record_as_it_is(make_record: RecordFactory) -> None:
    """Nearly every record needs no change: it is not copied, and JSON of it is its JCS form."""
    record = make_record(images=({"reference": "r", "signatures": [{"digest": "d", "tlog_index": 7}]},))
    stored, data, (whole, _, _) = stored_form(record, ("images",))
    assert stored is record and data == record.to_json() and whole == rfc8785.dumps(data)


@pytest.mark.parametrize(
    "odd",
    [
        "plain",  # the record's only odd part is its MAX_ITEMS + 1 warnings
        2**53,
        -(2**53),
        1.5,
        float("nan"),
        "\x00",
        "\ud800",
        "\\u0000",
        "x" * (MAX_TEXT_CHARS + 1),
        ("a", "tuple"),
        {"é": "a non-ASCII key"},
        {1: "an integer key"},
        {"k" * (MAX_TEXT_CHARS + 1): "a long key"},
        ["y" * 1000] * 300,  # past the list bound in characters
    ],
)
def test_stored_form_of_a_record_with_one_odd_value(make_record: RecordFactory, odd: Any) -> None:
    """Each thing storable() changes, or JSON does not write as JCS, alone in an otherwise plain record."""
    record = make_record(images=({"reference": "r", "odd": odd},), warnings=("w",) * (MAX_ITEMS + 1))
    for candidate in (record, dataclasses.replace(record, warnings=())):
        general = storable(candidate)
        expected = (general, general.to_json(), canonical_parts(general.to_json(), ("images",)))
        assert stored_form(candidate, ("images",)) == expected


_ZONES = (UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=8)))


# Naive bounds (what hypothesis takes); the times drawn carry one of the zones.
@given(st.datetimes(datetime(1, 1, 2), datetime(9999, 12, 30), timezones=st.sampled_from(_ZONES)))
def test_format_time_writes_what_strftime_wrote(moment: datetime) -> None:
    """The times in stored bodies are hashed: the faster form is the very text of the one before it, in every
    year (strftime writes a year of fewer than four digits without leading zeros) and zone."""
    assert format_time(moment) == moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

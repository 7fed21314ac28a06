"""decisionlog/_body_json.py: the checks of stored text the chain check uses. A key twice is found in time
linear in the keys (attack 39a F7); a shared part's exactness is found once a pass, also where it is not
plain ASCII (F6); a shared part holds only a record's engines and images (F8)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from decisionlog import DecisionStore, duplicate_key
from decisionlog._body_json import SharedParts
from decisionlog._record import canonical_json
from tests.decisionlog.test_chain import _execute, _fetch, _four, _verify
from tests.support.harness import RecordFactory


def test_a_key_twice_is_found_in_time_linear_in_the_keys() -> None:
    """30,000 keys in one object (a record's list may hold 256 KiB) took 4.8 s, quadratic in them."""
    many = "{" + ",".join(f'"k{i}":0' for i in range(30_000)) + ',"k0":0}'
    started = time.perf_counter()
    assert duplicate_key('{"violations":[' + many + "]}") == "k0"
    assert time.perf_counter() - started < 1.0
    assert duplicate_key('{"a":{"b":1,"b":2},"a":3}') == "b"  # the first object closed that holds one
    assert duplicate_key('{"a":1,"b":[{"a":1}]}') is None
    assert duplicate_key("not json") is None


def _part(engines: list[dict[str, Any]]) -> str:
    return canonical_json({"engines": engines, "images": []}).decode()


def test_a_shared_part_that_is_not_plain_ascii_is_checked_once_a_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    part = _part([{"path": "metadata.annotations[trtguard.dev/engines][0]é", "reference": "r"}])
    calls: list[Any] = []
    original = canonical_json

    def counting(data: Any) -> bytes:
        calls.append(data)
        return original(data)

    monkeypatch.setattr("decisionlog._body_json.canonical_json", counting)
    shared = SharedParts()
    own = [canonical_json({"allowed": True, "uid": f"u{i}"}).decode() for i in range(50)]
    assert all(shared.exact(body, part) for body in own)
    assert len([data for data in calls if "engines" in data]) == 1
    assert not shared.exact(own[0], part.replace('"images":[]', '"images": []'))


@pytest.mark.parametrize(
    ("part", "exact"),
    [
        ('{"engines":[],"images":[]}', True),
        ('{"allowed":true,"engines":[],"images":[]}', False),  # a key moved out of the body
        ('{"engines":[]}', False),
        ('{"engines":[],"images":[],"images":[]}', False),
        ('{"engines":[1.5],"images":[]}', True),  # not plain: checked the general way
        ('{"allowed":true,"engines":[1.5],"images":[]}', False),
    ],
)
def test_a_shared_part_is_exact_only_holding_the_records_engines_and_images(part: str, exact: bool) -> None:
    assert SharedParts().exact('{"uid":"u"}', part) is exact


async def test_a_key_moved_from_a_body_into_a_new_shared_part_is_a_break(
    log: tuple[DecisionStore, str], make_record: RecordFactory
) -> None:
    """Attack 39a F8: ``allowed`` taken out of a body and put in a new shared part verified."""
    store, url = log
    uids = await _four(store, make_record, small=False)
    body, ref = _fetch(url, "SELECT body, shared_ref FROM trtguard_decisions WHERE seq = %s", (3,))
    (content,) = _fetch(url, "SELECT content FROM trtguard_shared WHERE ref = %s", (ref,))
    assert isinstance(body, str) and isinstance(content, str) and '"allowed":true,' in body
    moved = '{"allowed":true,' + content[1:]
    assert json.loads(body.replace('"allowed":true,', "")) | json.loads(moved) == json.loads(
        body
    ) | json.loads(content)
    _execute(url, "INSERT INTO trtguard_shared (ref, content) VALUES (%s, %s)", ("moved", moved))
    _execute(
        url,
        "UPDATE trtguard_decisions SET body = %s, shared_ref = %s WHERE seq = %s",
        (body.replace('"allowed":true,', ""), "moved", 3),
    )
    report, given = await _verify(store)
    brk = report.first_break
    assert brk is not None and (brk.seq, brk.uid) == (3, uids[2]), report.summary()
    assert "not the canonical JSON (RFC 8785) its hash covers" in brk.problem
    assert given == [1, 2]

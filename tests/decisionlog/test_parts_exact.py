"""decisionlog/_body_json.py ``SharedParts.exact`` given the joined values (as the chain check has them):
the same answer as parsing the own part again, which the chain check no longer does (attack 39b F2)."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

from decisionlog import DecisionRecord, SQLiteStore
from decisionlog._body_json import SharedParts, load_json
from decisionlog._sql import _whole_body
from verifier.base._deadline import Deadline

PARTS = [
    '{"engines":[],"images":[]}',
    '{"engines":[],"images":[{"reference":"nvcr.io/…"}]}',  # not plain ASCII
    '{"engines":[1.5],"images":[]}',
    '{"engines":[],"images": []}',
    '{"allowed":true,"engines":[],"images":[]}',
]
OWN = [
    '{"uid":"u"}',
    '{"allowed":true,"uid":"u"}',
    '{"uid":"u","allowed":true}',  # another order
    '{"uid": "u"}',  # whitespace
    '{"uid":"u","uid":"u"}',  # a key twice
    '{"uid":"v","uid":"u"}',
    '{"images":[],"uid":"u"}',  # a key of the shared part
    '{"engines":[],"uid":"u"}',
    '{"message":"…","uid":"u"}',
    '{"message":"\\u2026","uid":"u"}',  # an escape canonical JSON does not write
    '{"latency_us":1,"uid":"u"}',
    '{"latency_us":1.0,"uid":"u"}',
    '{"latency_us":1e0,"uid":"u"}',
    '{"score":1e-7,"uid":"u"}',
    '{"score":1e-07,"uid":"u"}',
]


@pytest.mark.parametrize("part", PARTS)
@pytest.mark.parametrize("own", OWN)
def test_exact_of_the_joined_values_answers_as_parsing_the_own_part(own: str, part: str) -> None:
    data = json.loads(_whole_body(own, part))
    assert SharedParts().exact(own, part, data) is SharedParts().exact(own, part)


def test_the_chain_check_does_not_parse_a_rows_own_part_again(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[Any] = []

    def counting(text: str | bytes) -> tuple[Any, bool]:
        parsed.append(text)
        return load_json(text)

    monkeypatch.setattr("decisionlog._body_json.load_json", counting)
    images = ({"reference": "nvcr.io/x:1…", "evidence": [{}] * 200},)  # not plain ASCII: read whole

    async def verify(path: Path) -> None:
        store = SQLiteStore(path)
        await store.open()
        try:
            for i in range(5):
                record = DecisionRecord(
                    uid=f"u{i}",
                    operation="CREATE",
                    kind="Pod",
                    api_version="v1",
                    allowed=True,
                    reason="ok",
                    namespace="prod",
                    name="a",
                    images=images,
                )
                await store.append(record, deadline=Deadline.after(5))
            parsed.clear()
            report = await store.verify()
        finally:
            await store.close()
        assert report.ok, report.summary()

    with tempfile.TemporaryDirectory() as scratch:
        asyncio.run(verify(Path(scratch) / "d.db"))
    assert not [text for text in parsed if '"uid":"u' in str(text) and "images" not in str(text)]

"""trtguard/audit/package/verify/seal.py: a changed file, a flipped byte in the index or its signature, and
an extra file are caught, and then nothing counts as proven."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from tests.trtguard.audit.package.world import (
    World,
    edit_record,
    messages,
    rewrite,
    verify_package,
)
from trtguard.audit.package.contents import INDEX, SIGNATURE


def test_a_changed_decision_fails_its_file_hash(world: World, resnet_package: Path, tmp_path: Path) -> None:
    tampered = rewrite(resnet_package, tmp_path / "t.tar.gz", edit_record(4, "allowed", True))
    report = verify_package(world, tampered)
    assert not report.ok
    assert (
        "package: files changed (SHA-256 or size differ from the index): decisions/records.jsonl"
        in messages(report, "fail")
    )
    assert report.proves == ()


@pytest.mark.parametrize("member", [INDEX, SIGNATURE])
def test_a_flipped_byte_in_the_index_or_its_signature_fails(
    world: World, resnet_package: Path, tmp_path: Path, member: str
) -> None:
    def flip(members: dict[str, bytes]) -> None:
        if member == INDEX:
            data = bytearray(members[INDEX])
            data[data.index(b'"sha256": "') + 11] ^= 0x01
            members[INDEX] = bytes(data)
        else:
            document = json.loads(members[SIGNATURE])
            signature = bytearray(base64.b64decode(document["signatures"][0]["sig"]))
            signature[10] ^= 0x01
            document["signatures"][0]["sig"] = base64.b64encode(bytes(signature)).decode()
            members[SIGNATURE] = json.dumps(document).encode()

    report = verify_package(world, rewrite(resnet_package, tmp_path / "t.tar.gz", flip))
    failures = messages(report, "fail")
    expected = (
        "package: index.json is not the index that was signed (it was changed or replaced)"
        if member == INDEX
        else "package: the index signature does not verify with the given key"
    )
    assert any(f.startswith(expected) for f in failures), failures
    assert report.proves == ()
    assert report.does_not_prove[0].startswith("Anything")


def test_an_extra_file_fails(world: World, resnet_package: Path, tmp_path: Path) -> None:
    def add(members: dict[str, bytes]) -> None:
        members["engines/note.txt"] = b"trust me\n"

    report = verify_package(world, rewrite(resnet_package, tmp_path / "t.tar.gz", add))
    assert messages(report, "fail") == [
        "package: files in the archive but not in the index: engines/note.txt"
    ]

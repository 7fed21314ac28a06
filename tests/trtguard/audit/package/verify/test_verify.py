"""trtguard/audit/package/verify: a good package verifies and says what it proves and what it does not; with
another key nothing is proven."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.trtguard.audit.package.world import (
    World,
    messages,
    read_members,
    record_lines,
    signed_predicate,
    verify_package,
)
from trtguard.audit.package import UnsafeArchive, verify_evidence_package
from trtguard.audit.package.contents import INDEX, RECORDS, SIGNATURE
from trtguard.demo.material import TENSORRT_IMAGE
from verifier.base._digests import sha256_bytes
from verifier.crypto._keys import generate_private_key


def test_workload_package_verifies_and_says_what_it_proves(world: World, resnet_package: Path) -> None:
    report = verify_package(world, resnet_package)
    assert report.ok, messages(report, "fail")
    members = read_members(resnet_package)
    fp16 = world.engine_digests["fp16"].replace(":", "-")
    runtime = TENSORRT_IMAGE.split("@")[1].replace(":", "-")
    assert {
        INDEX,
        SIGNATURE,
        RECORDS,
        "policies/policies/committee.yaml",
        "policies/policies/keys/alice.pub",
        "policies/shared-keys/gpu.pub",
        f"engines/{fp16}/build-manifest-1.dsse.json",
        f"engines/{fp16}/change-approval-1.dsse.json",
        f"engines/{fp16}/engine-verification-1.dsse.json",
        f"engines/{fp16}/signatures/1-cosign-sign-dsse.dsse.json",
        # The runtime image's signature, beside the records that say it counted.
        f"images/{runtime}/signatures/1-cosign-sign-dsse.dsse.json",
    } <= set(members)
    # The segment runs from the first resnet decision to the head, other workloads' records included.
    assert [line["seq"] for line in record_lines(resnet_package)] == list(range(2, 10))
    assert signed_predicate(members)["selection"]["records"] == [2, 4, 6, 7]
    passed = "\n".join(messages(report, "pass"))
    assert "the 8 records from seq 2 to the exported head (seq 9) recompute and link without a gap" in passed
    assert "exactly the 4 selected match the rule" in passed
    assert "the included policy set is the one all 4 selected decisions were made under" in passed
    assert (
        "change-approval (by alice@example.com for audit ID DEMO-fp16: TensorRTMajorUpgrade) signed by "
        "committee/alice" in passed
    )
    assert "engine-verification (GPU check pass on NVIDIA H200) signed by committee/gpu" in passed
    assert "signed by platform/build-signer" in passed
    assert "signature engines/" in passed and "keys [committee/release]" in passed
    assert f"images: image {TENSORRT_IMAGE.split('@')[1][:19]}…: signature images/" in passed
    assert "keys [platform/image-signer]" in passed
    assert report.proves[0].startswith(
        "Every file in the package (names and contents, none missing, none added) is exactly as the holder "
        f"of key {world.exporter.public_key().key_id[:16]}"
    )
    assert not any("archive is exactly" in item or "package is exactly" in item for item in report.proves)
    assert any("removed from the end of the log" in item for item in report.does_not_prove)
    assert any("records before seq 2" in item for item in report.does_not_prove)


def test_another_key_verifies_nothing(world: World, resnet_package: Path) -> None:
    report = verify_evidence_package(resnet_package, generate_private_key().public_key())
    assert not report.ok
    assert report.proves == ()


def _gzip_field(data: bytes, offset: int, value: bytes) -> bytes:
    return data[:offset] + value + data[offset + len(value) :]


def test_the_claim_is_about_the_files_not_the_gzip_container(
    world: World, resnet_package: Path, tmp_path: Path
) -> None:
    """Changed gzip header bytes (time, flags' free bytes, OS) alter no file: the package still verifies,
    and what it says it proved is the files, while the archive's own digest (which changed) is printed."""
    original = resnet_package.read_bytes()
    assert original[:2] == b"\x1f\x8b"
    changed = tmp_path / "header.tar.gz"
    # MTIME (bytes 4-7) and OS (byte 9) of the gzip header (RFC 1952, 2.3).
    changed.write_bytes(_gzip_field(_gzip_field(original, 4, b"\x01\x02\x03\x04"), 9, b"\x0b"))
    report = verify_package(world, changed)
    assert report.ok, messages(report, "fail")
    assert report.archive_sha256 == sha256_bytes(changed.read_bytes()) != sha256_bytes(original)
    assert report.proves[0].startswith("Every file in the package")
    limit = next(item for item in report.does_not_prove if item.startswith("That the archive file is byte"))
    assert report.archive_sha256 in limit


@pytest.mark.parametrize(("offset", "what"), [(-8, "CRC-32"), (-4, "length")])
def test_a_changed_gzip_trailer_is_refused(
    world: World, resnet_package: Path, tmp_path: Path, offset: int, what: str
) -> None:
    """The trailer's CRC-32 and length of the decompressed data are checked: the archive is unreadable."""
    data = bytearray(resnet_package.read_bytes())
    data[offset] ^= 0xFF
    changed = tmp_path / f"trailer-{what}.tar.gz"
    changed.write_bytes(bytes(data))
    with pytest.raises(UnsafeArchive, match=r"not a readable tar\.gz archive"):
        verify_package(world, changed)

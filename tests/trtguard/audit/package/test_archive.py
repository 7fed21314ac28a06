"""trtguard/audit/package/archive.py: a reproducible tar.gz, and what a hostile one cannot do."""

from __future__ import annotations

import gzip
import hashlib
import io
import sys
import tarfile
import tempfile
import threading
import zlib
from pathlib import Path

import pytest

from trtguard.audit.package import _deflate, verify_evidence_package
from trtguard.audit.package._deflate import CHUNK, DeflatingSpool, crc32_combine
from trtguard.audit.package.archive import (
    ArchiveLimits,
    UnsafeArchive,
    read_archive,
    write_archive,
)
from trtguard.cli import main
from verifier.base._errors import InputError
from verifier.crypto._keys import generate_private_key

MEMBERS = [("index.json", b'{"version": 1}\n'), ("decisions/records.jsonl", b"{}\n" * 100)]


def _tar(
    path: Path, *entries: tuple[tarfile.TarInfo, bytes | None], pax: dict[str, str] | None = None
) -> Path:
    """Write a tar.gz holding exactly ``entries``, whatever they are (this is how an attacker would)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT, pax_headers=pax or {}) as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    path.write_bytes(gzip.compress(buffer.getvalue()))
    return path


def _file(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _special(name: str, kind: bytes, target: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info, None


def test_round_trip_is_reproducible_to_the_byte(tmp_path: Path) -> None:
    first, second = tmp_path / "a.tar.gz", tmp_path / "b.tar.gz"
    size = write_archive(first, MEMBERS, mtime=1_700_000_000, overwrite=False)
    write_archive(second, MEMBERS, mtime=1_700_000_000, overwrite=False)
    assert size == first.stat().st_size
    assert first.read_bytes() == second.read_bytes()
    assert read_archive(first, ArchiveLimits()) == dict(MEMBERS)
    with tarfile.open(first) as tar:  # what an auditor's `tar -tzvf` sees
        assert [(m.name, m.mode, m.uid, m.mtime) for m in tar] == [
            (name, 0o644, 0, 1_700_000_000) for name, _ in MEMBERS
        ]


@pytest.mark.parametrize("size", [0, 1, CHUNK - 1, CHUNK, 3 * CHUNK + 17])
def test_a_spooled_member_is_written_as_its_bytes_would_be(tmp_path: Path, size: int) -> None:
    """Deflated on the spool's thread, written a line at a time: the same archive bytes as given whole."""
    data = b"".join(b'{"seq": %d, "record": "%s"}\n' % (n, b"ab" * (n % 50)) for n in range(size))[:size]
    members = [*MEMBERS, ("decisions/more.jsonl", data)]
    as_bytes, spooled = tmp_path / "bytes.tar.gz", tmp_path / "spooled.tar.gz"
    write_archive(as_bytes, members, mtime=0, overwrite=False)
    with tempfile.TemporaryFile() as file, DeflatingSpool(file) as spool:
        for start in range(0, size, 1000):
            spool.write(data[start : start + 1000])
        member = spool.member()
        assert (member.sha256, member.size) == (hashlib.sha256(data).hexdigest(), size)
        write_archive(spooled, [*members[:-1], ("decisions/more.jsonl", member)], mtime=0, overwrite=False)
    assert spooled.read_bytes() == as_bytes.read_bytes()
    assert read_archive(spooled, ArchiveLimits())["decisions/more.jsonl"] == data


def test_the_tar_stream_is_the_one_tarfile_writes(tmp_path: Path) -> None:
    """Compressed in segments, the archive still inflates to the very tar bytes tarfile writes, and its gzip
    trailer (CRC-32 and size of the whole stream) checks."""
    members = [*MEMBERS, ("a" * 150, b"long name: a pax header"), ("empty", b"")]
    path = tmp_path / "a.tar.gz"
    write_archive(path, members, mtime=1_700_000_000, overwrite=False)
    expected = io.BytesIO()
    with tarfile.open(fileobj=expected, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.mtime, info.mode, info.size = 1_700_000_000, 0o644, len(data)
            tar.addfile(info, io.BytesIO(data))
    assert gzip.decompress(path.read_bytes()) == expected.getvalue()


@pytest.mark.parametrize(("first", "second"), [(b"", b"x"), (b"abc", b""), (b"tar" * 999, b"\0" * 70_001)])
def test_crc32_combine_is_the_crc_of_the_joined_bytes(first: bytes, second: bytes) -> None:
    combined = crc32_combine(zlib.crc32(first), zlib.crc32(second), len(second))
    assert combined == zlib.crc32(first + second)


@pytest.mark.parametrize("round_", range(8))
def test_crc32_combine_from_threads_growing_its_table_at_once(
    monkeypatch: pytest.MonkeyPatch, round_: int
) -> None:
    # Threads growing the shared operator table at once appended a level twice (attack 38e F3); the race
    # is not certain to happen in one round, so several run, each from an empty table.
    monkeypatch.setattr(_deflate, "_ZERO_BYTES", [])
    first, second = b"abc" * 33, bytes(1 << 20)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        start = threading.Barrier(4)

        def combine() -> None:
            start.wait()
            crc32_combine(zlib.crc32(first), zlib.crc32(second), len(second))

        threads = [threading.Thread(target=combine) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    for size in (1, 1000, 1 << 20):
        joined = zlib.crc32(first + bytes(size))
        assert crc32_combine(zlib.crc32(first), zlib.crc32(bytes(size)), size) == joined


def test_a_spool_whose_file_fails_raises_in_the_writer_and_stops(tmp_path: Path) -> None:
    """A full disk under the spool's thread is the export's error, not a hung thread or a half member."""

    class Full(io.BytesIO):
        def write(self, data: object) -> int:
            raise OSError(28, "No space left on device")

    with DeflatingSpool(Full()) as spool, pytest.raises(OSError, match="No space"):
        for _ in range(20):
            spool.write(b"x" * CHUNK)
        spool.member()


def test_writing_refuses_to_overwrite_and_leaves_nothing_half_written(tmp_path: Path) -> None:
    target = tmp_path / "out.tar.gz"
    target.write_bytes(b"precious")
    with pytest.raises(InputError, match="refusing to overwrite"):
        write_archive(target, MEMBERS, mtime=0, overwrite=False)
    assert target.read_bytes() == b"precious"
    with pytest.raises(UnsafeArchive, match=r"member name '\.\./x'"):
        write_archive(target, [("../x", b"")], mtime=0, overwrite=True)
    assert target.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.tar.gz"]


@pytest.mark.parametrize(
    "name",
    ["../evil", "/etc/passwd", "a/../../b", "a//b", "./a", "a/", "a\\..\\b", "caf\u00e9.json", "a\nb"],
)
def test_unsafe_member_names_are_refused(tmp_path: Path, name: str) -> None:
    archive = _tar(tmp_path / "p.tar.gz", _file("index.json"), _file(name))
    with pytest.raises(UnsafeArchive, match="member name"):
        read_archive(archive, ArchiveLimits())


def test_a_pax_header_cannot_smuggle_a_traversal_name(tmp_path: Path) -> None:
    info, data = _file("innocent.json")
    info.pax_headers = {"path": "../../outside.json"}
    with pytest.raises(UnsafeArchive, match=r"member name '../../outside.json' is not a path without"):
        read_archive(_tar(tmp_path / "p.tar.gz", (info, data)), ArchiveLimits())


@pytest.mark.parametrize(
    ("entry", "what"),
    [
        (_special("link", tarfile.SYMTYPE, "/etc/passwd"), "a symbolic link to '/etc/passwd'"),
        (_special("hard", tarfile.LNKTYPE, "index.json"), "a hard link to 'index.json'"),
        (_special("folder", tarfile.DIRTYPE), "a directory"),
        (_special("pipe", tarfile.FIFOTYPE), "a device or FIFO"),
        (_special("tty", tarfile.CHRTYPE), "a device or FIFO"),
    ],
)
def test_members_other_than_regular_files_are_refused(
    tmp_path: Path, entry: tuple[tarfile.TarInfo, None], what: str
) -> None:
    archive = _tar(tmp_path / "p.tar.gz", _file("index.json"), entry)
    with pytest.raises(UnsafeArchive, match=f"is not a regular file \\({what}\\)"):
        read_archive(archive, ArchiveLimits())


def test_a_repeated_name_is_refused(tmp_path: Path) -> None:
    archive = _tar(tmp_path / "p.tar.gz", _file("index.json", b"1"), _file("index.json", b"2"))
    with pytest.raises(UnsafeArchive, match=r"member 'index\.json' appears twice"):
        read_archive(archive, ArchiveLimits())


def test_member_count_and_sizes_are_bounded(tmp_path: Path) -> None:
    many = _tar(tmp_path / "many.tar.gz", *(_file(f"f{n}") for n in range(5)))
    with pytest.raises(UnsafeArchive, match="more than 4 members"):
        read_archive(many, ArchiveLimits(max_members=4))
    big = _tar(tmp_path / "big.tar.gz", _file("big", b"x" * 5000))
    with pytest.raises(UnsafeArchive, match=r"member 'big' is 4\.883 KiB, more than 4 KiB"):
        read_archive(big, ArchiveLimits(max_member_bytes=4096))
    with pytest.raises(UnsafeArchive, match="the package is larger than 64 bytes"):
        read_archive(big, ArchiveLimits(max_archive_bytes=64))


def test_a_decompression_bomb_stops_at_the_limit(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.tar.gz"
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("zeros")
        info.size = 64 << 20
        tar.addfile(info, io.BytesIO(bytes(info.size)))
    bomb.write_bytes(gzip.compress(raw.getvalue(), compresslevel=9))
    assert bomb.stat().st_size < 200_000  # over 300 times smaller than what it unpacks to
    with pytest.raises(UnsafeArchive, match="decompresses to more than 1 MiB"):
        read_archive(bomb, ArchiveLimits(max_total_bytes=1 << 20))


@pytest.mark.parametrize("damage", ["not gzip", "gzip of text", "truncated"])
def test_damaged_archives_are_refused(tmp_path: Path, damage: str) -> None:
    archive = tmp_path / "p.tar.gz"
    if damage == "not gzip":
        archive.write_bytes(b"PK\x03\x04 a zip, perhaps")
    elif damage == "gzip of text":
        archive.write_bytes(gzip.compress(b"hello " * 200))
    else:
        write_archive(archive, MEMBERS, mtime=0, overwrite=False)
        archive.write_bytes(archive.read_bytes()[:-40])
    with pytest.raises(UnsafeArchive, match=r"not a readable tar\.gz archive"):
        read_archive(archive, ArchiveLimits())


def test_an_archive_without_index_is_no_evidence_package(tmp_path: Path) -> None:
    archive = tmp_path / "p.tar.gz"
    write_archive(archive, [("decisions/records.jsonl", b"")], mtime=0, overwrite=False)
    with pytest.raises(InputError, match="not a trtguard evidence package"):
        verify_evidence_package(archive, generate_private_key().public_key())


def test_cli_verify_refuses_a_traversal_archive_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = _tar(tmp_path / "p.tar.gz", _file("index.json"), _file("../escaped.txt", b"pwned"))
    public = tmp_path / "key.pub"
    public.write_bytes(generate_private_key().public_key().to_pem())
    before = set(tmp_path.parent.iterdir())
    status = main(["evidence", "verify", str(archive), "--key", str(public)])
    err = capsys.readouterr().err
    assert status == 2
    assert "member name '../escaped.txt' is not a path without empty, '.' or '..' components" in err
    assert "hint: the archive was not written by `trtguard evidence export`; do not extract it" in err
    assert set(tmp_path.parent.iterdir()) == before

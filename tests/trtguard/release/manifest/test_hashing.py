"""trtguard.release.manifest._hashing: file and tree digests, parallel hashing, progress lines."""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import pytest

from trtguard.release.manifest._hashing import TREE_METHOD, Progress, hash_paths, tree_digest
from verifier.base._errors import InputError


def _spec_digest(files: dict[bytes, bytes]) -> str:
    """The trtguard-tree-v1 digest computed straight from its definition."""
    hasher = hashlib.sha256(b"trtguard-tree-v1\n")
    for relative in sorted(files):
        content = files[relative]
        hasher.update(
            hashlib.sha256(content).hexdigest().encode() + b" %d " % len(content) + relative + b"\0"
        )
    return hasher.hexdigest()


def _path(root: Path, relative: bytes) -> Path:
    # Path takes str; os.fsdecode keeps non-UTF-8 bytes as surrogate escapes and os.fsencode gives them back.
    return root / os.fsdecode(relative)


def _make_tree(root: Path, files: dict[bytes, bytes]) -> None:
    for relative, content in files.items():
        path = _path(root, relative)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)


TREE = {
    b"b.bin": b"second",
    b"a/z.npy": b"\x00" * 1000,
    b"a/b/c.txt": b"deep",
    b".hidden": b"kept too",
    b"A.bin": b"upper case sorts first",
    b"empty.bin": b"",
    b"caf\xc3\xa9.bin": b"utf-8 name",
    b"raw-\xff.bin": b"a name that is not UTF-8",
}


def test_tree_digest_follows_its_definition(tmp_path: Path) -> None:
    _make_tree(tmp_path / "data", TREE)
    (tmp_path / "data" / "empty-dir").mkdir()
    result = hash_paths({"dataset": tmp_path / "data"}, workers=2, progress_stream=None)["dataset"]
    assert result.method == TREE_METHOD
    assert result.size == sum(len(content) for content in TREE.values())
    assert result.sha256 == _spec_digest(TREE)


def test_tree_digest_does_not_depend_on_creation_order_or_threads(tmp_path: Path) -> None:
    _make_tree(tmp_path / "one", TREE)
    _make_tree(tmp_path / "two", dict(reversed(list(TREE.items()))))
    serial = hash_paths({"x": tmp_path / "one"}, workers=1, progress_stream=None)["x"]
    parallel = hash_paths({"x": tmp_path / "two"}, workers=4, progress_stream=None)["x"]
    assert serial == parallel


@pytest.mark.parametrize(
    ("change", "relative"),
    [("content", b"a/b/c.txt"), ("rename", b"b.bin"), ("add", b"new.bin")],
)
def test_tree_digest_changes_with_any_file(tmp_path: Path, change: str, relative: bytes) -> None:
    _make_tree(tmp_path / "data", TREE)
    before = hash_paths({"x": tmp_path / "data"}, workers=2, progress_stream=None)["x"].sha256
    path = _path(tmp_path / "data", relative)
    if change == "content":
        path.write_bytes(path.read_bytes() + b"!")
    elif change == "rename":
        path.rename(path.with_name(path.name + "2"))
    else:
        path.write_bytes(b"")
    after = hash_paths({"x": tmp_path / "data"}, workers=2, progress_stream=None)["x"].sha256
    assert after != before


def test_tree_of_one_file_differs_from_the_file(tmp_path: Path) -> None:
    _make_tree(tmp_path / "data", {b"only.bin": b"payload"})
    results = hash_paths(
        {"tree": tmp_path / "data", "file": tmp_path / "data" / "only.bin"}, workers=2, progress_stream=None
    )
    assert results["file"].method == "file"
    assert results["file"].sha256 == hashlib.sha256(b"payload").hexdigest()
    assert results["tree"].sha256 != results["file"].sha256


def test_symlink_to_file_counts_as_its_content(tmp_path: Path) -> None:
    _make_tree(tmp_path / "data", {b"real.bin": b"x"})
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"linked content")
    (tmp_path / "data" / "link.bin").symlink_to(outside)
    result = hash_paths({"x": tmp_path / "data"}, workers=1, progress_stream=None)["x"]
    assert result.sha256 == _spec_digest({b"real.bin": b"x", b"link.bin": b"linked content"})


@pytest.mark.parametrize("kind", ["dir-link", "dangling", "fifo"])
def test_special_entries_are_errors(tmp_path: Path, kind: str) -> None:
    _make_tree(tmp_path / "data", {b"real.bin": b"x"})
    special = tmp_path / "data" / "special"
    if kind == "dir-link":
        (tmp_path / "elsewhere").mkdir()
        special.symlink_to(tmp_path / "elsewhere")
        message = "a symbolic link to something other than a file is not part of a dataset tree"
    elif kind == "dangling":
        special.symlink_to(tmp_path / "missing")
        message = "dangling symbolic link (or the file vanished while the tree was read)"
    else:
        os.mkfifo(special)
        message = "not a regular file or directory (a device, socket or FIFO)"
    with pytest.raises(InputError) as caught:
        hash_paths({"x": tmp_path / "data"}, workers=1, progress_stream=None)
    assert caught.value.message == message
    assert caught.value.location == str(special)


def test_empty_tree_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "data" / "sub").mkdir(parents=True)
    with pytest.raises(InputError) as caught:
        hash_paths({"calibration dataset": tmp_path / "data"}, workers=1, progress_stream=None)
    assert caught.value.message == "the directory holds no files"


def test_missing_path_names_its_role(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        hash_paths({"ONNX model": tmp_path / "nope.onnx"}, workers=1, progress_stream=None)
    assert caught.value.message == "no such file or directory"
    assert caught.value.hint == "check the path given for the ONNX model"


def test_tree_digest_helper_sorts_its_entries() -> None:
    entries = [(b"b", "1" * 64, 1), (b"a", "2" * 64, 2)]
    assert tree_digest(entries) == tree_digest(list(reversed(entries)))


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_lines_in_a_log(tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(9 * 1024 * 1024))  # three 4 MiB blocks
    stream = io.StringIO()
    hash_paths(
        {"engine": big}, workers=1, progress_stream=stream, progress_threshold=0, progress_interval=0.0
    )
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("hashing: 4.0 MiB of 9.0 MiB (44%), ")
    assert lines[-2].startswith("hashing: 9.0 MiB of 9.0 MiB (100%), ")
    assert lines[-1].startswith("hashed 9.0 MiB in ")


def test_no_progress_below_the_threshold(tmp_path: Path) -> None:
    small = tmp_path / "small.bin"
    small.write_bytes(b"x" * 1000)
    stream = io.StringIO()
    hash_paths({"engine": small}, workers=1, progress_stream=stream)
    assert stream.getvalue() == ""


def test_progress_redraws_one_line_on_a_terminal() -> None:
    ticks = iter([0.0, 1.0, 2.0, 3.0])
    stream = _Tty()
    progress = Progress(2048, stream, interval=0.5, clock=lambda: next(ticks))
    progress.add(1024)
    progress.add(1024)
    progress.finish()
    text = stream.getvalue()
    assert text.startswith("\r\x1b[Khashing: 1.0 KiB of 2.0 KiB (50%), 1.0 KiB/s, 1.0 s")
    assert text.endswith("\r\x1b[Khashed 2.0 KiB in 3.0 s (682 B/s)\n")


def test_many_small_files_over_several_batches(tmp_path: Path) -> None:
    files = {b"shard-%d/%04d.bin" % (index % 7, index): b"%d" % index * (index % 50) for index in range(600)}
    files[b"big.bin"] = os.urandom(2 * 1024 * 1024)  # above the small-file size: hashed on its own
    _make_tree(tmp_path / "data", files)
    stream = io.StringIO()
    result = hash_paths(
        {"x": tmp_path / "data"},
        workers=3,
        progress_stream=stream,
        progress_threshold=0,
        progress_interval=3600,
    )["x"]
    assert result.sha256 == _spec_digest(files)
    total = sum(len(content) for content in files.values())
    assert stream.getvalue() == stream.getvalue().splitlines()[-1] + "\n"  # only the closing line (interval)
    assert stream.getvalue().startswith(f"hashed {total / 1024 / 1024:.1f} MiB in ")

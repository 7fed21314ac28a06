"""Files a command writes: checked before the command does any work, then written whole or not at all.

:func:`check_output` runs first, before the inputs are read, a password is asked for or anything slow runs:
a path whose folder is missing, that names a folder, or where no file can be created (``/proc``, a
read-only mount) fails there. :func:`write_outputs` writes each file to a temporary file beside it and
renames them into place only when all are written, so that a failure leaves neither a half-written file nor
one file of a pair. Both raise :class:`InputError` naming the path, which the command line prints as one
line and exit status 2.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from verifier.base import InputError


@dataclass(frozen=True, slots=True)
class Output:
    """One file to write: where, its bytes, what it is (for messages), its mode (None: 0o666 less umask)."""

    path: Path
    data: bytes
    what: str
    mode: int | None = None


def check_output(path: Path, what: str) -> None:
    """Raise :class:`InputError` unless a file can be written at ``path`` (it may exist: the caller decides
    whether to replace it). Creates and removes a probe file in the folder: only that proves it writable."""
    if path.is_dir():
        raise InputError(f"{what} cannot be written: it is a folder", location=str(path))
    folder = path.parent
    if not folder.is_dir():
        problem = "is not a folder" if folder.exists() else "does not exist"
        raise InputError(f"{what} cannot be written: the folder {folder} {problem}", location=str(path))
    try:
        descriptor, probe = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".probe")
    except OSError as error:
        raise InputError(
            f"{what} cannot be written: no file can be created in {folder} ({error.strerror})",
            location=str(path),
        ) from None
    os.close(descriptor)
    Path(probe).unlink(missing_ok=True)


def write_outputs(outputs: Sequence[Output], *, exclusive: bool = False) -> None:
    """Write every file of ``outputs`` or none: each goes to a temporary file first, and they are renamed
    into place once all are written. ``exclusive``: refuse to replace a file that exists (checked at the
    rename itself, so a file created meanwhile is not overwritten either; the files placed before a failure
    are removed again, as they were new)."""
    staged: list[tuple[Output, Path]] = []
    placed: list[Path] = []
    try:
        for output in outputs:
            staged.append((output, _stage(output)))
        for output, temporary in staged:
            _place(output, temporary, exclusive=exclusive)
            placed.append(output.path)
    except InputError:
        if exclusive:
            for path in placed:
                path.unlink(missing_ok=True)
        raise
    finally:
        for _, temporary in staged:
            temporary.unlink(missing_ok=True)


def write_output(path: Path, data: bytes, what: str, *, mode: int | None = None) -> None:
    """Write one file as :func:`write_outputs` does."""
    write_outputs([Output(path, data, what, mode)])


def _stage(output: Output) -> Path:
    """The bytes of ``output`` in a new temporary file beside it, with its mode."""
    try:
        descriptor, name = tempfile.mkstemp(
            dir=output.path.parent, prefix=f".{output.path.name}.", suffix=".tmp"
        )
    except OSError as error:
        raise _write_error(output, error) from None
    temporary = Path(name)
    try:
        with os.fdopen(descriptor, "wb") as stream:
            # mkstemp creates the file 0o600; an output that is no secret gets the mode a plain open gives.
            os.fchmod(stream.fileno(), output.mode if output.mode is not None else 0o666 & ~_umask())
            stream.write(output.data)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        raise _write_error(output, error) from None
    return temporary


def _place(output: Output, temporary: Path, *, exclusive: bool) -> None:
    try:
        if exclusive:
            os.link(temporary, output.path)  # fails when the target exists, unlike a rename
        else:
            temporary.replace(output.path)
    except FileExistsError:
        raise InputError(f"{output.what} already exists", location=str(output.path)) from None
    except OSError as error:
        raise _write_error(output, error) from None


def _write_error(output: Output, error: OSError) -> InputError:
    return InputError(f"cannot write {output.what}: {error.strerror}", location=str(output.path))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask

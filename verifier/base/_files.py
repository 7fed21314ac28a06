"""Reading a small input file whole, with a size limit: keys, envelopes, trusted roots, manifests."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from verifier.base._errors import InputError

#: The largest signature, attestation, envelope, key, manifest or configuration document read, from a file
#: or a registry (real ones are a few KiB): one bound for every such input.
MAX_DOCUMENT_BYTES: Final = 16 * 1024 * 1024


def read_limited(path: Path, what: str, *, limit: int = MAX_DOCUMENT_BYTES, hint: str | None = None) -> bytes:
    """The bytes of ``path``; :class:`InputError` naming ``what`` when it cannot be read or exceeds ``limit``.

    Reads at most ``limit + 1`` bytes, so a file that grows after a size check cannot slip past it.
    """
    try:
        with path.open("rb") as stream:
            data = stream.read(limit + 1)
    except OSError as error:
        raise InputError(f"cannot read {what}: {error.strerror}", location=str(path), hint=hint) from error
    if len(data) > limit:
        raise InputError(
            f"{what} is larger than {limit // (1024 * 1024)} MiB",
            location=str(path),
            hint=hint or "check that the right file was given",
        )
    return data

"""What ``trtguard manifest import`` reports apart from the manifest: the record's OpenPGP signature, kept
apart from the record's completeness, its exit statuses, and the ``--report`` JSON document."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from trtguard.cli._args import add_clock_argument
from trtguard.release.manifest import Draft
from verifier.base import VerificationError, read_limited
from verifier.signatures import MAX_SIGNATURE_BYTES, OpenPGPKey, verify_detached

#: ``manifest import``'s exit statuses, as its --help lists them.
IMPORT_EXIT: Final = {
    0: "the manifest (or, with --allow-incomplete, a draft) was written; the signature, if given, verified",
    1: "the record's OpenPGP signature does not verify, or the engine contradicts the record; "
    "nothing written",
    2: "unusable input (a file that cannot be read, options that do not go together)",
    3: "the signature, if given, verified, but the record is incomplete; nothing written",
}


#: ``manifest import --help``.
IMPORT_HELP: Final = (
    "Convert the flat JSON build record (build_timestamp, tensorrt_image, input_onnx_hash, "
    "calibration_dataset_hash, builder_config{...}, output_engine_hash, accuracy_metrics{...}) into an "
    "engine build manifest. Standard error lists, one line per field, what was missing or could not be "
    "mapped and what to add. Flags and --config supply what the record lacks (they win over the "
    "record, and each replaced value is reported). A record signed with GPG is imported only once its "
    "detached signature (--signature FLAT.json.asc) verifies with one of the --openpgp-key files; "
    "sign the manifest written here again (gpg --armor --detach-sign) to attach it. The signature's "
    "status and the record's completeness are reported apart (the last line of standard error, and "
    "--report). Exit status: " + "; ".join(f"{code} {meaning}" for code, meaning in IMPORT_EXIT.items()) + "."
)


def add_import_arguments(parser: argparse.ArgumentParser) -> None:
    """The record, its signature and keys, the engine, and ``--report``."""
    parser.add_argument("record", type=Path, metavar="FLAT.json", help="the flat record")
    parser.add_argument(
        "--signature",
        type=Path,
        metavar="ASC",
        help="the record's detached OpenPGP signature over its exact bytes (exit 1 when it does not verify)",
    )
    parser.add_argument(
        "--openpgp-key",
        type=Path,
        action="append",
        default=[],
        metavar="KEY",
        help="an armored OpenPGP public key that may have signed the record (repeatable; with --signature)",
    )
    parser.add_argument(
        "--engine",
        type=Path,
        metavar="FILE",
        help="the engine file: its size and name are filled in and its sha256 must equal output_engine_hash",
    )
    parser.add_argument(
        "--report",
        type=Path,
        metavar="FILE",
        help="also write the outcome as JSON: the signature's status and signers, completeness and the "
        "missing fields, what was written, the exit status",
    )
    add_clock_argument(parser, judged="the record's OpenPGP signature (its creation and expiry times)")


@dataclass(frozen=True, slots=True)
class RecordSignature:
    """What was found of the record's detached OpenPGP signature."""

    signers: tuple[tuple[str, str], ...]  # (key file, fingerprint)
    reason: str | None  # None when it verified

    def line(self) -> str:
        """One line for standard error."""
        if self.reason is not None:
            return f"the record's OpenPGP signature does NOT verify: {self.reason}"
        signers = ", ".join(f"{name} ({fingerprint})" for name, fingerprint in self.signers)
        return f"the record's OpenPGP signature verifies: signed by {signers}"


def verify_record_signature(
    data: bytes, signature: Path, key_files: list[Path], *, now: datetime | None = None
) -> RecordSignature:
    """Check the detached OpenPGP signature over ``data``, the flat record's bytes as read once (the caller
    parses the same bytes: a record swapped between two reads could not pass): who signed it, or why it does
    not verify (as ``gpgv``, every signature in the file must verify). Unreadable files and keys raise
    ``InputError``. ``now`` is the time judged at (``--now``), else the real clock."""
    keys = {
        str(path): OpenPGPKey.from_armored(read_limited(path, "the OpenPGP key"), location=str(path))
        for path in key_files
    }
    detached = read_limited(signature, "the OpenPGP signature", limit=MAX_SIGNATURE_BYTES)
    try:
        names = verify_detached(data, detached, keys, every=True, now=now)
    except VerificationError as error:
        return RecordSignature((), f"{signature}: {error.message}")
    return RecordSignature(tuple((name, keys[name].fingerprint) for name in names), None)


def signature_state(signature: RecordSignature | None) -> str:
    """``not given``, ``verified`` or ``NOT verified``."""
    if signature is None:
        return "not given"
    return "verified" if signature.reason is None else "NOT verified"


def import_report(
    args: argparse.Namespace, signature: RecordSignature | None, draft: Draft, status: int
) -> dict[str, Any]:
    """The ``--report`` document: the signature and the completeness apart, what was written, the exit."""
    return {
        "command": "manifest import",
        "record": str(args.record),
        "signature": {
            "status": signature_state(signature).lower(),
            "file": None if args.signature is None else str(args.signature),
            "signers": [
                {"key": name, "fingerprint": fingerprint}
                for name, fingerprint in (signature.signers if signature else ())
            ],
            "reason": signature.reason if signature else None,
        },
        "complete": draft.manifest is not None,
        "missing": [{"field": note.field, "message": note.message} for note in draft.missing],
        "written": status == 0,
        "draft": status == 0 and draft.manifest is None,
        "output": None if args.output is None else str(args.output),
        "exitStatus": status,
        "meaning": IMPORT_EXIT[status],
    }

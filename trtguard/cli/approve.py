"""``trtguard approve``: a release-committee member's signed approval of gated engine changes."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import ValidationError

from trtguard.cli._commands import Subparsers, add_command
from trtguard.cli._key_commands import check_envelope_output, write_envelope
from trtguard.cli._key_files import load_signing_key
from trtguard.cli._keys import add_output_arguments, add_password_arguments
from verifier.attestations import CHANGE_APPROVAL_PREDICATE_TYPE, ChangeApproval, ChangeKind
from verifier.base import (
    InputError,
    hash_file,
    input_error_from_validation,
    parse_sha256,
    read_limited,
)
from verifier.crypto import Envelope, ResourceDescriptor, Statement, sign_statement, statement_from_envelope
from verifier.manifest import load_manifest, manifest_digest

_DURATION = re.compile(r"^(\d+)([hdw])$")
_UNITS = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}


def register(subparsers: Subparsers) -> None:
    """Add ``approve``."""
    parser = add_command(
        subparsers,
        "approve",
        description="Sign a change-approval attestation\n"
        "(https://trtguard.dev/attestations/change-approval/v1) that policies with\n"
        "changeControl count towards their approval threshold.\n\n"
        "An approval names the engine file's digest (what `sha256sum model.plan` prints,\n"
        "the output_engine.sha256 of its build manifest), never the digest of the OCI\n"
        "artifact that carries it: `approve` refuses the artifact digest of --push REF,\n"
        "and an engine other than the one that artifact carries. A denial lists the\n"
        "approvals found that do not count, and why.",
        epilog="change kinds:\n" + "\n".join(f"  {kind:<28} {kind.meaning}" for kind in ChangeKind),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "engine",
        metavar="ENGINE_DIGEST",
        help="sha256:… of the engine FILE (the build manifest's output_engine.sha256, the engine layer of "
        "its artifact), not the artifact digest `push-engine` prints; or the engine file itself",
    )
    parser.add_argument("--audit-id", required=True, help="the audit ID the change is recorded under")
    parser.add_argument(
        "--changes",
        required=True,
        type=_changes,
        metavar="KIND[,KIND…]",
        help=f"change kinds approved, from `trtguard manifest diff`: {', '.join(ChangeKind)}",
    )

    parser.add_argument("--approver", required=True, help="who approves, e.g. an e-mail address")
    parser.add_argument(
        "--manifest",
        type=Path,
        metavar="ENVELOPE",
        help="the signed build manifest reviewed: its digest is recorded and its engine and audit ID checked",
    )
    parser.add_argument("--expires", metavar="DURATION|TIME", help="e.g. 30d, 12h, or an RFC 3339 time")
    parser.add_argument("--reference", metavar="TEXT", help="change ticket or meeting minutes")
    parser.add_argument("--comment", metavar="TEXT")
    parser.add_argument("--key", required=True, type=Path, metavar="KEY", help="the approver's private key")
    add_output_arguments(parser)
    add_password_arguments(parser)
    parser.set_defaults(handler=_approve)


def _changes(text: str) -> list[ChangeKind]:
    kinds = []
    for item in (part.strip() for part in text.split(",")):
        try:
            kinds.append(ChangeKind(item))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"unknown change kind {item!r}; known: {', '.join(ChangeKind)}"
            ) from None
    return kinds


def _engine_digest(text: str) -> str:
    path = Path(text)
    if not text.startswith("sha256:") and path.is_file():
        return hash_file(path).digest
    if "@sha256:" in text:
        raise InputError(
            f"{text!r} is an artifact reference; an approval names the engine file's digest",
            hint="give the engine file (or its sha256:…) as ENGINE_DIGEST and the reference to --push",
        )
    return f"sha256:{parse_sha256(text, what='engine digest')}"


def _check_artifact(engine_digest: str, args: argparse.Namespace) -> None:
    """Refuse an approval of the artifact digest of ``--push REF``, or of an engine other than the one the
    artifact carries: change control would never count it (it names the engine file)."""
    if args.push is None:
        return
    # Imported here: only an approval pushed to a registry loads the registry client (start-up time).
    from trtguard.cli._registry import carried_engine_of  # noqa: PLC0415

    carried = carried_engine_of(args.push, args)
    # By tag or by digest alike: the digest the tag points at is no engine file either.
    if carried.artifact == engine_digest:
        if carried.engine_file is None:
            raise InputError(
                f"{engine_digest} is the digest of the artifact {args.push} (its OCI manifest), which is no "
                "engine artifact; approvals name an engine file",
                hint="approve the engine file's digest: `sha256sum model.plan`, or give the file itself",
            )
        raise InputError(
            f"{engine_digest} is the digest of the artifact {args.push} (its OCI manifest), not of the "
            f"engine file it carries; approvals name the engine file {carried.engine_file}",
            hint=f"approve {carried.engine_file}",
        )
    if carried.engine_file is not None and carried.engine_file != engine_digest:
        raise InputError(
            f"the artifact {args.push} carries the engine file {carried.engine_file}, not {engine_digest}",
            hint=f"approve {carried.engine_file}, or attach the approval to the artifact of {engine_digest}",
        )


def _expiry(text: str | None, now: datetime) -> datetime | None:
    if text is None:
        return None
    found = _DURATION.fullmatch(text)
    if found:
        return now + int(found.group(1)) * _UNITS[found.group(2)]
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            f"--expires {text!r} is neither a duration nor a time",
            hint="write e.g. 30d or 2027-01-31T00:00:00Z",
        ) from None
    if when.tzinfo is None:
        raise InputError(f"--expires {text!r} has no time zone", hint="add Z or an offset such as +01:00")
    return when


def _reviewed_manifest(path: Path, engine_digest: str, audit_id: str) -> str:
    """The digest of the reviewed manifest, after checking it is about this engine and audit ID."""
    envelope = Envelope.from_json(read_limited(path, "the manifest envelope"), location=str(path))
    manifest = load_manifest(statement_from_envelope(envelope, location=str(path)), str(path))
    if f"sha256:{manifest.output_engine.sha256}" != engine_digest:
        raise InputError(
            f"the manifest describes engine sha256:{manifest.output_engine.sha256}, not {engine_digest}",
            location=str(path),
            hint="approve the engine the reviewed manifest describes",
        )
    if manifest.audit_id != audit_id:
        raise InputError(
            f"the manifest's audit ID is {manifest.audit_id!r}, not {audit_id!r}",
            location=str(path),
            hint="use the audit ID recorded in the build manifest",
        )
    return manifest_digest(envelope)


def _approve(args: argparse.Namespace) -> int:
    check_envelope_output(args)
    engine_digest = _engine_digest(args.engine)
    _check_artifact(engine_digest, args)
    now = datetime.now(UTC).replace(microsecond=0)
    reviewed = _reviewed_manifest(args.manifest, engine_digest, args.audit_id) if args.manifest else None
    try:
        approval = ChangeApproval(
            engine_digest=engine_digest,
            audit_id=args.audit_id,
            changes=args.changes,
            approver=args.approver,
            approved_at=now,
            expires_at=_expiry(args.expires, now),
            manifest_digest=reviewed,
            reference=args.reference,
            comment=args.comment,
        )
    except ValidationError as error:
        raise input_error_from_validation(error, "the approval", what="change approval") from None
    statement = Statement(
        subject=[ResourceDescriptor(name="engine", digest={"sha256": parse_sha256(engine_digest)})],
        predicate_type=CHANGE_APPROVAL_PREDICATE_TYPE,
        predicate=approval.model_dump(mode="json", exclude_none=True),
    )
    write_envelope(sign_statement(statement, load_signing_key(args.key, args)), args)
    return 0

"""``trtguard keygen``, ``trtguard attest`` and ``trtguard verify-attestation``; the shared password helper.

Other commands that open a private key reuse :func:`add_password_arguments` and :func:`read_password`, so
that every command takes the password the same way: ``--password-file FILE``, else ``TRTGUARD_PASSWORD``,
else ``COSIGN_PASSWORD``, else an interactive prompt when standard input is a terminal. Never from argv.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from trtguard.cli._commands import Subparsers, add_command
from verifier.attestations import (
    CHANGE_APPROVAL_PREDICATE_TYPE,
    ENGINE_BUILD_PREDICATE_TYPE,
    ENGINE_VERIFICATION_PREDICATE_TYPE,
    load_approval,
    load_verification,
)
from verifier.digests import hash_file
from verifier.dsse import Envelope
from verifier.errors import InputError, TrtguardError
from verifier.files import read_limited
from verifier.intoto import Statement, sign_statement, statement_for_file
from verifier.keys import PrivateKey, PublicKey, encrypt_private_key, generate_private_key, load_private_key
from verifier.manifest import load_manifest
from verifier.signatures import TrustPolicy, verify_attestation

_PASSWORD_VARIABLES = ("TRTGUARD_PASSWORD", "COSIGN_PASSWORD")


def add_password_arguments(parser: argparse._ActionsContainer) -> None:
    """Add ``--password-file`` to a command that needs a private key password."""
    parser.add_argument(
        "--password-file",
        type=Path,
        metavar="FILE",
        help="file holding the key password (one trailing newline is ignored); "
        "default: $TRTGUARD_PASSWORD, then $COSIGN_PASSWORD, then a prompt",
    )


def read_password(
    args: argparse.Namespace, *, confirm: bool = False, environ: Mapping[str, str] | None = None
) -> bytes:
    """The password from ``args.password_file``, the environment or a terminal prompt.

    An empty environment variable is an empty password (cosign's convention), not an absent one. With
    ``confirm`` the prompt asks twice. Raises :class:`InputError` when no source is available.
    """
    path: Path | None = getattr(args, "password_file", None)
    if path is not None:
        try:
            text = path.read_bytes()
        except OSError as error:
            raise InputError(
                f"cannot read the password file: {error.strerror}", location=str(path)
            ) from error
        return text.removesuffix(b"\n").removesuffix(b"\r")
    env = os.environ if environ is None else environ
    for variable in _PASSWORD_VARIABLES:
        if variable in env:
            return env[variable].encode()
    if sys.stdin.isatty():
        first = getpass.getpass("Password for the private key: ")
        if confirm and getpass.getpass("Repeat the password: ") != first:
            raise InputError("the two passwords differ")
        return first.encode()
    raise InputError(
        "no password given for the private key",
        hint="use --password-file FILE or set TRTGUARD_PASSWORD (or COSIGN_PASSWORD); "
        "an empty variable means an empty password",
    )


def _read(path: Path, what: str) -> bytes:
    return read_limited(path, what)


def load_signing_key(path: Path, args: argparse.Namespace) -> PrivateKey:
    """Open the private key at ``path`` with the password from :func:`read_password`."""
    data = _read(path, "the private key")
    try:
        return load_private_key(data, read_password(args))
    except TrtguardError as error:
        error.location = error.location or str(path)
        raise


def load_public_key(path: Path) -> PublicKey:
    """Read a PEM public key file, naming the file in errors."""
    try:
        return PublicKey.from_pem(_read(path, "the public key"))
    except TrtguardError as error:
        error.location = error.location or str(path)
        raise


def _write_new(path: Path, data: bytes, mode: int, *, force: bool) -> None:
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if force else os.O_EXCL)
    descriptor = os.open(path, flags, mode)
    with os.fdopen(descriptor, "wb") as stream:
        # os.open applies the mode only when it creates the file; an overwritten key file gets it too.
        os.fchmod(stream.fileno(), mode)
        stream.write(data)


def _keygen(args: argparse.Namespace) -> int:
    prefix: str = args.output
    key_path, pub_path = Path(f"{prefix}.key"), Path(f"{prefix}.pub")
    if not args.force:
        existing = [str(p) for p in (key_path, pub_path) if p.exists()]
        if existing:
            raise InputError(
                f"refusing to overwrite {', '.join(existing)}", hint="pass --force to replace the key pair"
            )
    password = read_password(args, confirm=True)
    key = generate_private_key()
    try:
        _write_new(key_path, encrypt_private_key(key, password), 0o600, force=args.force)
        _write_new(pub_path, key.public_key().to_pem(), 0o644, force=args.force)
    except FileExistsError as error:
        raise InputError("refusing to overwrite an existing file", location=error.filename) from error
    except OSError as error:
        raise InputError(f"cannot write the key pair: {error.strerror}", location=error.filename) from error
    print(f"Private key written to {key_path}")
    print(f"Public key written to {pub_path}")
    print(f"Key id {key.public_key().key_id}")
    return 0


def _check_uri(value: str) -> str:
    if not urlparse(value).scheme:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a URI (expected e.g. https://example.com/type/v1)"
        )
    return value


def _attest(args: argparse.Namespace) -> int:
    try:
        predicate: Any = json.loads(_read(args.predicate, "the predicate"))
    except (ValueError, UnicodeDecodeError) as error:
        raise InputError("the predicate is not JSON", location=str(args.predicate)) from error
    if not isinstance(predicate, dict):
        raise InputError("the predicate must be a JSON object", location=str(args.predicate))
    if not args.subject.is_file():
        raise InputError("the subject file does not exist", location=str(args.subject))
    statement = statement_for_file(args.subject, args.type, predicate, name=args.subject_name)
    _validate_known_predicate(statement, str(args.predicate))
    envelope = sign_statement(statement, load_signing_key(args.key, args))
    write_envelope(envelope, args)
    return 0


def _validate_known_predicate(statement: Statement, source: str) -> None:
    """trtguard's own predicate types are checked before signing, so a draft can never be signed."""
    loaders: dict[str, Callable[[Statement, str], object]] = {
        ENGINE_BUILD_PREDICATE_TYPE: load_manifest,
        ENGINE_VERIFICATION_PREDICATE_TYPE: load_verification,
        CHANGE_APPROVAL_PREDICATE_TYPE: load_approval,
    }
    loader = loaders.get(statement.predicate_type)
    if loader is not None:
        loader(statement, source)


def write_envelope(envelope: Envelope, args: argparse.Namespace) -> None:
    """Write a signed envelope to ``--output`` (or standard output) and attach it to ``--push REF``."""
    output = envelope.to_json() + b"\n"
    if args.output is not None:
        try:
            args.output.write_bytes(output)
        except OSError as error:
            raise InputError(
                f"cannot write the envelope: {error.strerror}", location=str(args.output)
            ) from error
        print(f"Attestation written to {args.output}", file=sys.stderr)
    elif args.push is None:
        sys.stdout.buffer.write(output)
    if args.push is not None:
        # Imported here: registry.py imports this module, so a module-level import would be circular.
        from trtguard.cli.registry import push_attestation  # noqa: PLC0415

        print(push_attestation(output, args.push, args), file=sys.stderr)


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--output``, ``--push`` and the registry options for commands that write an envelope."""
    from trtguard.cli.registry import add_registry_arguments  # noqa: PLC0415 - see write_envelope

    parser.add_argument("--output", type=Path, metavar="FILE", help="write here instead of standard output")
    parser.add_argument(
        "--push", metavar="REF", help="also attach it to this image or engine artifact in its registry"
    )
    add_registry_arguments(parser)


def _verify_attestation(args: argparse.Namespace) -> int:
    location = str(args.envelope)
    envelope = Envelope.from_json(_read(args.envelope, "the envelope"), location=location)
    keys = {str(path): load_public_key(path) for path in args.key}
    policy = TrustPolicy(keys=keys, threshold=args.threshold)
    subject_digest = None
    if args.subject is not None:
        try:
            subject_digest = hash_file(args.subject).digest
        except OSError as error:
            raise InputError(
                f"cannot read the subject: {error.strerror}", location=str(args.subject)
            ) from error
    result = verify_attestation(
        envelope, policy, subject_digest=subject_digest, predicate_type=args.type, location=location
    )
    statement = result.statement
    print(f"Verified OK: {location}")
    print(f"  signed by: {', '.join(result.keys)} ({result.verified} of {result.threshold} required)")
    if statement is not None:
        print(f"  predicate type: {statement.predicate_type}")
        for subject in statement.subject:
            print(f"  subject: {subject.name or '(unnamed)'} sha256:{subject.digest.get('sha256', '?')}")
    return 0


def register(subparsers: Subparsers) -> None:
    """Add ``keygen``, ``attest`` and ``verify-attestation``."""
    keygen = add_command(
        subparsers,
        "keygen",
        description="Write PREFIX.key (cosign 'ENCRYPTED SIGSTORE PRIVATE KEY', mode 0600) and PREFIX.pub.",
    )
    keygen.add_argument("--output", required=True, metavar="PREFIX", help="path prefix of the two files")
    keygen.add_argument("--force", action="store_true", help="overwrite existing files")
    add_password_arguments(keygen)
    keygen.set_defaults(handler=_keygen)

    attest = add_command(
        subparsers,
        "attest",
        description="Build an in-toto Statement v1 (subject: the file's name and sha256), sign it with DSSE.",
    )
    attest.add_argument("--predicate", required=True, type=Path, metavar="FILE", help="predicate JSON object")
    attest.add_argument("--type", required=True, type=_check_uri, metavar="URI", help="predicate type URI")
    attest.add_argument("--subject", required=True, type=Path, metavar="FILE", help="the file attested")
    attest.add_argument("--subject-name", metavar="NAME", help="subject name (default: the file name)")
    attest.add_argument("--key", required=True, type=Path, metavar="KEY", help="private key file")
    add_output_arguments(attest)
    add_password_arguments(attest)
    attest.set_defaults(handler=_attest)

    verify = add_command(
        subparsers,
        "verify-attestation",
        description="Check signatures, payload type and, when asked, predicate type and subject digest. "
        "Exit 0 verified, 1 verification failed, 2 unusable input.",
    )
    verify.add_argument("envelope", type=Path, metavar="ENVELOPE", help="DSSE envelope JSON file")
    verify.add_argument(
        "--key",
        required=True,
        type=Path,
        action="append",
        metavar="PUB",
        help="trusted public key (repeatable)",
    )
    verify.add_argument("--threshold", type=int, default=1, help="distinct keys that must have signed")
    verify.add_argument("--subject", type=Path, metavar="FILE", help="file whose sha256 must be a subject")
    verify.add_argument("--type", type=_check_uri, metavar="URI", help="required predicate type")
    verify.set_defaults(handler=_verify_attestation)

"""What ``trtguard keygen``, ``attest`` and ``verify-attestation`` do, and the envelope file helpers that
other commands share (their options are in :mod:`trtguard.cli.keygen`, :mod:`trtguard.cli.attest` and
:mod:`trtguard.cli.verify_attestation`, the shared ones in :mod:`trtguard.cli._keys`; key files are opened by
:mod:`trtguard.cli._key_files`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trtguard.cli._key_files import load_public_key, load_signing_key
from trtguard.cli._keys import read_password
from trtguard.cli._output import Output, check_output, write_output, write_outputs
from verifier.attestations import (
    CHANGE_APPROVAL_PREDICATE_TYPE,
    ENGINE_BUILD_PREDICATE_TYPE,
    ENGINE_VERIFICATION_PREDICATE_TYPE,
    load_approval,
    load_verification,
)
from verifier.base import InputError, hash_file, read_limited
from verifier.crypto import (
    Envelope,
    Statement,
    encrypt_private_key,
    generate_private_key,
    sign_statement,
    statement_for_file,
)
from verifier.manifest import load_manifest
from verifier.signatures import TrustPolicy, verify_attestation


def keygen(args: argparse.Namespace) -> int:
    """``trtguard keygen``: write a new encrypted key pair."""
    prefix: str = args.output
    key_path, pub_path = Path(f"{prefix}.key"), Path(f"{prefix}.pub")
    # Both paths are checked before the password is asked for, and both files are written or neither.
    for path, what in ((key_path, "the private key"), (pub_path, "the public key")):
        check_output(path, what)
    if not args.force:
        existing = [str(p) for p in (key_path, pub_path) if p.exists()]
        if existing:
            raise InputError(
                f"refusing to overwrite {', '.join(existing)}", hint="pass --force to replace the key pair"
            )
    password = read_password(args, confirm=True)
    key = generate_private_key()
    write_outputs(
        [
            Output(key_path, encrypt_private_key(key, password), "the private key", 0o600),
            Output(pub_path, key.public_key().to_pem(), "the public key", 0o644),
        ],
        exclusive=not args.force,
    )
    print(f"Private key written to {key_path}")
    print(f"Public key written to {pub_path}")
    print(f"Key id {key.public_key().key_id}")
    return 0


def attest(args: argparse.Namespace) -> int:
    """``trtguard attest``: sign an in-toto statement about a file."""
    check_envelope_output(args)
    try:
        predicate: Any = json.loads(read_limited(args.predicate, "the predicate"))
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


def check_envelope_output(args: argparse.Namespace) -> None:
    """Refuse an ``--output`` that cannot be written, before a password is asked for or anything signed."""
    if args.output is not None:
        check_output(args.output, "the envelope")


def write_envelope(envelope: Envelope, args: argparse.Namespace) -> None:
    """Write a signed envelope to ``--output`` (or standard output) and attach it to ``--push REF``."""
    output = envelope.to_json() + b"\n"
    if args.output is not None:
        write_output(args.output, output, "the envelope")
        print(f"Attestation written to {args.output}", file=sys.stderr)
    elif args.push is None:
        sys.stdout.buffer.write(output)
    if args.push is not None:
        # Imported here: only --push needs the registry code.
        from trtguard.cli._registry import push_attestation  # noqa: PLC0415

        print(push_attestation(output, args.push, args), file=sys.stderr)


def verify_attestation_command(args: argparse.Namespace) -> int:
    """``trtguard verify-attestation``: check an envelope's signatures, type and subject."""
    location = str(args.envelope)
    envelope = Envelope.from_json(read_limited(args.envelope, "the envelope"), location=location)
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

"""``trtguard verify-blob``: a classic cosign blob signature (``cosign sign-blob``) over one file or digest,
offline.

It takes the arguments of ``verify-bundle`` (:mod:`trtguard.cli._sigstore`) for the signature file, or
cosign's legacy bundle with the signature, certificate and Rekor entry in one file. Exit 0 verified; 1 not
verified; 2 unusable input. The reason goes to standard error.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
from pathlib import Path
from typing import Any, Final

from trtguard.cli._commands import Subparsers, add_command
from trtguard.cli._sigstore import add_common_arguments, artifact, report, trust_policy
from verifier.base import InputError, read_limited
from verifier.signatures import verify_blob_signature

# Ed25519 signs a blob itself, not its digest: files up to this size are handed over whole.
_MAX_BLOB_BYTES: Final = 64 * 1024 * 1024


def _legacy_bundle(path: Path) -> dict[str, Any]:
    """cosign's blob bundle before v3: ``{base64Signature, cert, rekorBundle}``."""
    try:
        document = json.loads(read_limited(path, "the cosign bundle"))
    except (ValueError, UnicodeDecodeError) as error:
        raise InputError("the cosign bundle is not JSON", location=str(path)) from error
    except RecursionError as error:
        raise InputError("the cosign bundle is nested too deeply", location=str(path)) from error
    if not isinstance(document, dict) or not isinstance(document.get("base64Signature"), str):
        raise InputError(
            "not a cosign blob bundle (base64Signature, cert, rekorBundle)",
            location=str(path),
            hint="a Sigstore bundle (mediaType application/vnd.dev.sigstore.bundle…) goes to verify-bundle",
        )
    return document


def _decode(text: str, what: str, location: str) -> bytes:
    try:
        return base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError) as error:
        raise InputError(f"{what} is not valid base64", location=location) from error


def _read_text(path: Path | None, what: str) -> str | None:
    if path is None:
        return None
    try:
        return read_limited(path, what).decode()
    except UnicodeDecodeError as error:
        raise InputError(f"{what} is not text", location=str(path)) from error


def _verify_blob(args: argparse.Namespace) -> int:
    if args.signature is None and args.bundle is None:
        raise InputError("give the signature: --signature FILE or --bundle FILE")
    digest, path = artifact(args.artifact)
    policy = trust_policy(args)
    certificate = _read_text(args.certificate, "the certificate")
    rekor_bundle = None
    location = str(args.bundle or args.signature)
    if args.bundle is not None:
        legacy = _legacy_bundle(args.bundle)
        signature_text = legacy["base64Signature"]
        cert = legacy.get("cert")
        if certificate is None and isinstance(cert, str) and cert:
            certificate = _decode(cert, "the bundle's cert", location).decode(errors="replace")
        if legacy.get("rekorBundle") is not None:
            rekor_bundle = json.dumps(legacy["rekorBundle"])
    if args.signature is not None:
        signature_text = _read_text(args.signature, "the signature") or ""
    signature = _decode(signature_text, "the signature", location)
    data = None
    if path is not None and path.stat().st_size <= _MAX_BLOB_BYTES:
        data = read_limited(path, "the artifact", limit=_MAX_BLOB_BYTES)
    result = verify_blob_signature(
        signature,
        policy,
        digest=digest,
        data=data,
        certificate=certificate,
        chain=_read_text(args.certificate_chain, "the certificate chain"),
        rekor_bundle=rekor_bundle,
        location=location,
    )
    return report(location, digest, result)


def register(subparsers: Subparsers) -> None:
    """Add ``verify-blob``."""
    blob = add_command(
        subparsers,
        "verify-blob",
        description="Verify a cosign sign-blob signature against a key or a keyless identity. For keyless "
        "signatures (and for --key without --insecure-ignore-tlog) the Rekor entry is needed: give cosign's "
        "blob bundle (--bundle, the format before cosign v3). Exit 0 verified, 1 not verified, 2 unusable "
        "input.",
    )
    blob.add_argument("--signature", type=Path, metavar="FILE", help="the base64 signature")
    blob.add_argument(
        "--bundle",
        type=Path,
        metavar="FILE",
        help="cosign's blob bundle {base64Signature, cert, rekorBundle}",
    )
    blob.add_argument("--certificate", type=Path, metavar="FILE", help="keyless: the PEM signing certificate")
    blob.add_argument("--certificate-chain", type=Path, metavar="FILE", help="keyless: PEM intermediates")
    add_common_arguments(blob)
    blob.set_defaults(handler=_verify_blob)

"""``trtguard verify-bundle`` and ``trtguard verify-blob``: one signature over a file or a digest, offline.

``verify-bundle`` follows the sigstore-conformance client protocol (``docs/cli_protocol.md`` there)::

    verify-bundle [--staging] --bundle FILE --certificate-identity ID --certificate-oidc-issuer URL
                  [--trusted-root FILE] FILE_OR_DIGEST
    verify-bundle [--staging] --bundle FILE --key PATH [--trusted-root FILE] FILE_OR_DIGEST

``verify-blob`` takes the same arguments for a classic cosign blob signature (``cosign sign-blob``): the
signature file, or cosign's legacy bundle with the signature, certificate and Rekor entry in one file.

``FILE_OR_DIGEST`` is a digest when it is ``sha256:`` and 64 hex digits and no such file exists, else a file
(the protocol's rule). Exit 0 verified; 1 not verified; 2 unusable input. The reason goes to standard error.
Without ``--trusted-root`` the Sigstore public-good root that ships with sigstore-python is used
(``--staging``: its staging root); nothing is fetched. With ``--key`` the signature must be in a
transparency log of that root, unless ``--insecure-ignore-tlog`` (cosign's flag) says not to look.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
from pathlib import Path
from typing import Any, Final

from trtguard.cli._args import add_clock_argument
from trtguard.cli._commands import Subparsers, add_command
from trtguard.cli.keys_commands import load_public_key
from verifier.base import InputError, hash_file, is_sha256_hex, read_limited
from verifier.signatures import (
    KeylessIdentity,
    TrustPolicy,
    TrustRoot,
    VerificationResult,
    verify_blob_signature,
    verify_bundle,
)

# Ed25519 signs a blob itself, not its digest: files up to this size are handed over whole.
_MAX_BLOB_BYTES: Final = 64 * 1024 * 1024


def _artifact(value: str) -> tuple[str, Path | None]:
    """The ``sha256:<hex>`` digest of FILE_OR_DIGEST, and the file when it names one."""
    hex_part = value.removeprefix("sha256:").lower()
    if value.startswith("sha256:") and is_sha256_hex(hex_part) and not Path(value).exists():
        return f"sha256:{hex_part}", None
    path = Path(value)
    try:
        return hash_file(path).digest, path
    except OSError as error:
        raise InputError(
            f"cannot read the artifact: {error.strerror}",
            location=value,
            hint="give the signed file, or its digest as sha256:<64 hex digits>",
        ) from error


def _trust_root(args: argparse.Namespace) -> TrustRoot:
    if args.trusted_root is not None:
        return TrustRoot.from_file(args.trusted_root)
    return TrustRoot.public_good("staging" if args.staging else "production")


def _policy(args: argparse.Namespace) -> TrustPolicy:
    if args.key is not None and args.certificate_oidc_issuer is not None:
        raise InputError("--certificate-oidc-issuer is for keyless signatures, not with --key")
    root = _trust_root(args)
    if args.key is not None:
        return TrustPolicy(
            keys={args.key.name: load_public_key(args.key)},
            trust_root=root,
            require_tlog=not args.insecure_ignore_tlog,
        )
    if args.insecure_ignore_tlog:
        raise InputError("--insecure-ignore-tlog applies to --key only: keyless signatures need their log")
    if args.certificate_oidc_issuer is None:
        raise InputError("--certificate-identity needs --certificate-oidc-issuer")
    identity = KeylessIdentity(issuer=args.certificate_oidc_issuer, subject=args.certificate_identity)
    return TrustPolicy(identities=(identity,), trust_root=root)


def _report(location: str, digest: str, result: VerificationResult) -> int:
    print(f"Verified OK: {location}")
    print(f"  artifact: {digest}")
    print(f"  signed by: {result.summary()}")
    print(f"  transparency log: {'verified' if result.tlog_verified else 'not checked'}")
    if result.statement is not None:
        print(f"  predicate type: {result.statement.predicate_type}")
    return 0


def _verify_bundle(args: argparse.Namespace) -> int:
    digest, _ = _artifact(args.artifact)
    policy = _policy(args)
    location = str(args.bundle)
    raw = read_limited(args.bundle, "the bundle")
    return _report(location, digest, verify_bundle(raw, policy, digest=digest, location=location))


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
    digest, path = _artifact(args.artifact)
    policy = _policy(args)
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
    return _report(location, digest, result)


def _add_common(parser: argparse.ArgumentParser) -> None:
    # Sigstore verdicts depend on the log's and the timestamps' times, never on the verifier's clock.
    add_clock_argument(parser)
    signer = parser.add_mutually_exclusive_group(required=True)
    signer.add_argument("--key", type=Path, metavar="PATH", help="PEM public key of the signer")
    signer.add_argument(
        "--certificate-identity",
        metavar="IDENTITY",
        help="keyless: the signing certificate's subject (e-mail, URI), compared exactly",
    )
    parser.add_argument(
        "--certificate-oidc-issuer",
        metavar="URL",
        help="keyless: the OIDC issuer in the signing certificate, compared exactly",
    )
    root = parser.add_mutually_exclusive_group()
    root.add_argument("--trusted-root", type=Path, metavar="FILE", help="trusted_root.json to verify against")
    root.add_argument(
        "--staging",
        action="store_true",
        help="use the Sigstore staging root shipped with sigstore-python instead of the production one",
    )
    parser.add_argument(
        "--insecure-ignore-tlog",
        action="store_true",
        help="with --key: do not require or check a transparency log entry (the result says so)",
    )
    parser.add_argument(
        "artifact",
        metavar="FILE_OR_DIGEST",
        help="the signed file (for an in-toto attestation, a subject), or its digest as sha256:<hex>",
    )


def register(subparsers: Subparsers) -> None:
    """Add ``verify-bundle`` and ``verify-blob``."""
    bundle = add_command(
        subparsers,
        "verify-bundle",
        description="Verify a Sigstore bundle v0.1-v0.3 (message signature or DSSE/in-toto) against a key or "
        "a keyless identity and a trusted root: signature, certificate chain at the signed time, SCT, log "
        "entry (promise, inclusion proof, checkpoint), RFC 3161 timestamps. Follows the sigstore-conformance "
        "client protocol. Exit 0 verified, 1 not verified, 2 unusable input.",
    )
    bundle.add_argument("--bundle", type=Path, required=True, metavar="FILE", help="the Sigstore bundle")
    _add_common(bundle)
    bundle.set_defaults(handler=_verify_bundle)

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
    _add_common(blob)
    blob.set_defaults(handler=_verify_blob)

"""What ``trtguard verify-bundle`` and ``trtguard verify-blob`` share: their common options, the artifact
(a file or a digest), the trust policy from the options, and the report of a verified signature.

FILE_OR_DIGEST is a digest when it is ``sha256:`` and 64 hex digits and no such file exists, else a file
(the sigstore-conformance protocol's rule). Without ``--trusted-root`` the Sigstore public-good root that
ships with sigstore-python is used (``--staging``: its staging root); nothing is fetched. With ``--key`` the
signature must be in a transparency log of that root, unless ``--insecure-ignore-tlog`` (cosign's flag)
says not to look.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from trtguard.cli._args import add_clock_argument
from trtguard.cli._key_files import load_public_key
from verifier.base import InputError, hash_file, is_sha256_hex
from verifier.signatures import KeylessIdentity, TrustPolicy, TrustRoot, VerificationResult


def artifact(value: str) -> tuple[str, Path | None]:
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


def trust_root(args: argparse.Namespace) -> TrustRoot:
    """The trusted root the options name (public-good production by default)."""
    if args.trusted_root is not None:
        return TrustRoot.from_file(args.trusted_root)
    return TrustRoot.public_good("staging" if args.staging else "production")


def trust_policy(args: argparse.Namespace) -> TrustPolicy:
    """The trust policy of the options: ``--key``, or a keyless identity, and the root."""
    if args.key is not None and args.certificate_oidc_issuer is not None:
        raise InputError("--certificate-oidc-issuer is for keyless signatures, not with --key")
    root = trust_root(args)
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


def report(location: str, digest: str, result: VerificationResult) -> int:
    """Print what was verified; the exit status of a verified signature."""
    print(f"Verified OK: {location}")
    print(f"  artifact: {digest}")
    print(f"  signed by: {result.summary()}")
    print(f"  transparency log: {'verified' if result.tlog_verified else 'not checked'}")
    if result.statement is not None:
        print(f"  predicate type: {result.statement.predicate_type}")
    return 0


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """The signer, root, log and artifact options both commands take."""
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

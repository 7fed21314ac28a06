"""``trtguard verify-bundle``: a Sigstore bundle over one file or digest, offline.

It follows the sigstore-conformance client protocol (``docs/cli_protocol.md`` there)::

    verify-bundle [--staging] --bundle FILE --certificate-identity ID --certificate-oidc-issuer URL
                  [--trusted-root FILE] FILE_OR_DIGEST
    verify-bundle [--staging] --bundle FILE --key PATH [--trusted-root FILE] FILE_OR_DIGEST

Exit 0 verified; 1 not verified; 2 unusable input. The reason goes to standard error. The options and the
rules it shares with ``verify-blob`` (the artifact, the trusted root, the log) are in
:mod:`trtguard.cli._sigstore`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from trtguard.cli._commands import Subparsers, add_command
from trtguard.cli._sigstore import add_common_arguments, artifact, report, trust_policy
from verifier.base import read_limited
from verifier.signatures import verify_bundle


def _verify_bundle(args: argparse.Namespace) -> int:
    digest, _ = artifact(args.artifact)
    policy = trust_policy(args)
    location = str(args.bundle)
    raw = read_limited(args.bundle, "the bundle")
    return report(location, digest, verify_bundle(raw, policy, digest=digest, location=location))


def register(subparsers: Subparsers) -> None:
    """Add ``verify-bundle``."""
    bundle = add_command(
        subparsers,
        "verify-bundle",
        description="Verify a Sigstore bundle v0.1-v0.3 (message signature or DSSE/in-toto) against a key or "
        "a keyless identity and a trusted root: signature, certificate chain at the signed time, SCT, log "
        "entry (promise, inclusion proof, checkpoint), RFC 3161 timestamps. Follows the sigstore-conformance "
        "client protocol. Exit 0 verified, 1 not verified, 2 unusable input.",
    )
    bundle.add_argument("--bundle", type=Path, required=True, metavar="FILE", help="the Sigstore bundle")
    add_common_arguments(bundle)
    bundle.set_defaults(handler=_verify_bundle)

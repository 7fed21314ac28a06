"""``trtguard sign``: sign an image in its registry (cosign classic signature or Notary Project)."""

from __future__ import annotations

from pathlib import Path

from trtguard.cli._args import add_registry_arguments
from trtguard.cli._commands import Subparsers, add_command, deferred
from trtguard.cli._keys import add_password_arguments


def register(subparsers: Subparsers) -> None:
    """Add ``sign``; what it does is in :mod:`trtguard.cli._registry`, loaded when it runs."""
    sign = add_command(
        subparsers,
        "sign",
        description="Resolve IMAGE to its digest and sign that digest with KEY. --format cosign (default): "
        "a cosign simple-signing payload, added to the image's sha256-<digest>.sig manifest (existing "
        "signatures stay). --format notation: a Notary Project signature (notary.x509 scheme) with "
        "--certificate (and its --certificate-chain up to the root), pushed as an OCI referrer of artifact "
        "type application/vnd.cncf.notary.signature, as `notation sign` does.",
    )
    sign.add_argument("image", metavar="IMAGE", help="image reference; a tag is resolved to its digest")
    sign.add_argument("--key", type=Path, required=True, metavar="KEY", help="cosign or PKCS#8 private key")
    sign.add_argument("--format", choices=("cosign", "notation"), default="cosign", help="signature format")
    notation = sign.add_argument_group("Notary Project signatures (--format notation)")
    notation.add_argument("--certificate", type=Path, metavar="PEM", help="the signing certificate of KEY")
    notation.add_argument(
        "--certificate-chain",
        type=Path,
        metavar="PEM",
        help="the CA certificates above it, up to and including the root (none for a self-signed one)",
    )
    notation.add_argument(
        "--envelope", choices=("jws", "cose"), default="jws", help="envelope format (default: jws)"
    )
    notation.add_argument(
        "--expiry", type=float, metavar="DAYS", help="the signature expires this many days after signing"
    )
    sign.add_argument(
        "-a",
        "--annotation",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="add to the payload's 'optional' section (repeatable)",
    )
    add_password_arguments(sign)
    add_registry_arguments(sign)
    sign.set_defaults(handler=deferred("trtguard.cli._registry", "sign"))

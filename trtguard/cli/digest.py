"""``trtguard digest``: print an image reference pinned by the digest it points at now."""

from __future__ import annotations

from trtguard.cli._commands import Subparsers, add_command
from trtguard.cli._fetch import print_digest, registry_arguments


def register(subparsers: Subparsers) -> None:
    """Add ``digest``; what it does is in :mod:`trtguard.cli._fetch`."""
    digest = add_command(
        subparsers,
        "digest",
        description="Print IMAGE pinned by the digest it points at now (registry/repository@sha256:…), read "
        "from its registry: the form policies with requireDigest want.",
    )
    digest.add_argument("image", metavar="IMAGE", help="an image or artifact reference, e.g. nginx:1.27")
    registry_arguments(digest, timeout=30.0)
    digest.set_defaults(handler=print_digest)

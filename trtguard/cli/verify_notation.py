"""``trtguard verify-notation``: the Notary Project signatures of one artifact, as ``notation verify`` does.

::

    verify-notation IMAGE --config DIR [--registry-config FILE] [--timeout S] [--now RFC3339]
    verify-notation IMAGE --config DIR --signature FILE... (--manifest FILE | --descriptor JSON) [--now ...]

``--config`` is a Notation configuration directory (``trustpolicy.oci.json`` or ``trustpolicy.json`` and
``truststore/x509/``): the statement whose registry scopes name IMAGE's repository applies, as Notation
chooses it. Without ``--signature`` the signatures are read from IMAGE's referrers in its registry, with the
manifest descriptor the registry serves; with it, offline, each envelope (``.jws``/JSON or ``.cose``/CBOR) is
checked against the manifest file (``--manifest``, whose digest must be IMAGE's) or the descriptor given
(``--descriptor '{"mediaType": …, "digest": …, "size": …}'``). Exit 0 when a signature verifies (as
``notation verify``), 1 when none does, 2 for unusable input; one line per signature says why.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trtguard.cli._args import add_clock_argument, add_registry_arguments, clock
from trtguard.cli._commands import Subparsers, add_command
from verifier.base import InputError

if TYPE_CHECKING:  # loaded when the command runs: `trtguard --help` stays light
    from verifier.base import ImageReference
    from verifier.signatures.notation import ArtifactDescriptor, NotationPolicy, NotationSignature


def register(subparsers: Subparsers) -> None:
    """Add ``verify-notation``."""
    parser = add_command(
        subparsers,
        "verify-notation",
        description="Verify the Notary Project signatures of IMAGE against a Notation configuration "
        "directory (trust policy and trust stores), as `notation verify` does: from the registry, or offline "
        "with --signature and --manifest/--descriptor. Exit 0 a signature verifies, 1 none does, 2 unusable "
        "input.",
    )
    parser.add_argument(
        "image", metavar="IMAGE", help="registry/repository@sha256:… (a tag with the registry)"
    )
    parser.add_argument(
        "--config",
        type=Path,
        required=True,
        metavar="DIR",
        help="Notation configuration directory: trustpolicy.oci.json or trustpolicy.json, truststore/x509/",
    )
    offline = parser.add_argument_group("offline (instead of reading the registry)")
    offline.add_argument(
        "--signature",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="a signature envelope: JWS (JSON) or COSE (CBOR) (repeatable)",
    )
    offline.add_argument("--manifest", type=Path, metavar="FILE", help="the signed manifest, as its bytes")
    offline.add_argument(
        "--descriptor", metavar="JSON", help='the signed manifest\'s {"mediaType", "digest", "size"}'
    )
    add_registry_arguments(parser)
    add_clock_argument(parser, judged="certificate validity, timestamps and signature expiry")
    parser.set_defaults(handler=_run)


def _read(path: Path, what: str) -> bytes:
    """The file's bytes, bounded; a folder or FIFO (which would wait for a writer) is an input error."""
    from verifier.base import read_limited  # noqa: PLC0415

    if path.exists() and not path.is_file():
        raise InputError(f"cannot read {what}: not a regular file", location=str(path))
    return read_limited(path, what)


def _envelope(path: Path) -> NotationSignature:
    from verifier.signatures.notation import COSE_MEDIA_TYPE, JWS_MEDIA_TYPE, NotationSignature  # noqa: PLC0415

    data = _read(path, "the signature envelope")
    media_type = JWS_MEDIA_TYPE if data.lstrip()[:1] == b"{" else COSE_MEDIA_TYPE
    return NotationSignature(data, media_type, str(path))


def _offline_descriptor(args: argparse.Namespace, digest: str) -> ArtifactDescriptor:
    from verifier.registry import InvalidDocument, Manifest  # noqa: PLC0415
    from verifier.signatures.notation import TargetArtifact  # noqa: PLC0415

    if (args.manifest is None) == (args.descriptor is None):
        raise InputError(
            "--signature needs exactly one of --manifest and --descriptor (what was signed)",
            hint="give the manifest file (`skopeo inspect --raw`), or its descriptor as JSON",
        )
    if args.manifest is not None:
        try:
            manifest = Manifest.parse(
                _read(args.manifest, "the manifest"), content_type=None, where=str(args.manifest)
            )
        except InvalidDocument as error:
            raise InputError(f"not an OCI manifest: {error}", location=str(args.manifest)) from error
        found: ArtifactDescriptor = manifest.descriptor
    else:
        try:
            document: Any = json.loads(args.descriptor)
            found = TargetArtifact(document["mediaType"], document["digest"], document["size"])
        except (ValueError, TypeError, KeyError) as error:
            raise InputError(
                f"--descriptor is not a descriptor ({error})",
                hint='write {"mediaType": …, "digest": …, "size": …}',
            ) from None
        if not (
            isinstance(found.media_type, str)
            and isinstance(found.digest, str)
            and isinstance(found.size, int)
            and not isinstance(found.size, bool)
        ):
            raise InputError("--descriptor: mediaType and digest are strings, size an integer")
    if found.digest != digest:
        raise InputError(f"the manifest given is {found.digest}, not IMAGE's {digest}", location="--manifest")
    return found


async def _from_registry(
    args: argparse.Namespace, reference: ImageReference
) -> tuple[str, tuple[NotationSignature, ...], ArtifactDescriptor | None]:
    from trtguard.cli._registry import registry_config, registry_deadline  # noqa: PLC0415
    from verifier.registry.client import RegistryClient  # noqa: PLC0415
    from verifier.registry.evidence import RegistryEvidence  # noqa: PLC0415

    deadline, config = registry_deadline(args), registry_config(args)
    async with RegistryClient(config) as client:
        found = await RegistryEvidence(client).image_signatures(reference, deadline)
    return found.digest, found.notation, found.descriptor


def _policy(directory: Path) -> NotationPolicy:
    from verifier.signatures.notation import load_notation_config  # noqa: PLC0415

    # Every file of the configuration is read bounded, and a read error is an input error (exit 2).
    return load_notation_config(directory, read=lambda path: _read(path, "the file"))


def _run(args: argparse.Namespace) -> int:
    from verifier.base import (  # noqa: PLC0415
        ImageReference,
        VerificationError,
    )
    from verifier.signatures.notation import verify_notation  # noqa: PLC0415

    policy = _policy(args.config)
    reference = ImageReference.parse(args.image)
    if args.signature:
        if reference.digest is None:
            raise InputError("offline, IMAGE must name its digest", hint="write registry/repository@sha256:…")
        signatures = tuple(_envelope(path) for path in args.signature)
        descriptor: ArtifactDescriptor | None = _offline_descriptor(args, reference.digest)
        digest = reference.digest
    else:
        if args.manifest is not None or args.descriptor is not None:
            raise InputError("--manifest and --descriptor go with --signature (offline)")
        digest, signatures, descriptor = asyncio.run(_from_registry(args, reference))
    subject = f"{reference.name}@{digest}"
    if not signatures:
        print(f"{subject}: no Notary Project signature found")
        return 1
    statement = policy.statement_for(reference.name)
    print(f"{subject}: trust policy statement {statement.name!r} of {policy.source}")
    verified = 0
    now = clock(args)()
    for number, signature in enumerate(signatures, start=1):
        label = f"signature {number} ({signature.origin or signature.media_type})"
        try:
            if descriptor is None:
                raise VerificationError("the manifest's descriptor is unknown")
            result = verify_notation(
                signature, policy, descriptor=descriptor, repository=reference.name, now=now
            )
        except VerificationError as error:
            print(f"  {label}: not verified: {error.message}")
            continue
        verified += 1
        print(f"  {label}: verified, signed by {result.subject} ({result.scheme})")
        for note in result.logged:
            print(f"    logged: {note}")
    print(f"{verified} of {len(signatures)} signature(s) verified")
    return 0 if verified else 1

"""``trtguard sign``, ``trtguard push-engine`` and ``trtguard attach-attestation``: writing to registries.

All three take ``--registry-config FILE`` (else ``$TRTGUARD_REGISTRY_CONFIG``) for CA bundles, credentials
and loopback plain-HTTP registries (format: ``verifier/registry/README.md``), and ``--timeout SECONDS``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
from pathlib import Path

from trtguard.cli._commands import Subparsers, add_command
from trtguard.cli.keys import add_password_arguments, load_signing_key
from trtguard.release.attach import Attached, attach_attestation
from trtguard.release.cosign_layout import append_layer, simple_signing_payload
from trtguard.release.publish import RegistryWriter
from trtguard.release.push_engine import push_engine
from verifier.deadline import Deadline
from verifier.dsse import Envelope
from verifier.errors import InputError, TrtguardError
from verifier.files import read_limited
from verifier.intoto import statement_from_envelope
from verifier.references import ImageReference
from verifier.registry.client import RegistryClient
from verifier.registry.config import RegistryConfig, load_registry_config
from verifier.registry.cosign_layout import SIGNATURE_ANNOTATION, SIMPLE_SIGNING, signature_tag


def register(subparsers: Subparsers) -> None:
    """Add ``sign``, ``push-engine`` and ``attach-attestation``."""
    sign = add_command(
        subparsers,
        "sign",
        description="Resolve IMAGE to its digest, sign a cosign simple-signing payload for that digest with "
        "KEY and add the signature to the image's sha256-<digest>.sig manifest (existing signatures stay).",
    )
    sign.add_argument("image", metavar="IMAGE", help="image reference; a tag is resolved to its digest")
    sign.add_argument("--key", type=Path, required=True, metavar="KEY", help="cosign or PKCS#8 private key")
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
    sign.set_defaults(handler=_sign)

    push = add_command(
        subparsers,
        "push-engine",
        description="Upload ENGINE (and optionally its calibration cache and ONNX model) as an OCI artifact "
        "(artifactType application/vnd.trtguard.engine.v1, one uncompressed layer per file, so the engine "
        "layer's digest is the engine file's sha256). Prints the artifact's digest reference.",
    )
    push.add_argument("engine", type=Path, metavar="ENGINE", help="serialized TensorRT engine (plan) file")
    push.add_argument("--to", required=True, metavar="REF", help="registry/repository[:tag] to push to")
    push.add_argument("--calibration-cache", type=Path, metavar="FILE", help="INT8 calibration cache")
    push.add_argument("--onnx", type=Path, metavar="FILE", help="the ONNX model the engine was built from")
    add_registry_arguments(push)
    push.set_defaults(handler=_push_engine)

    attach = add_command(
        subparsers,
        "attach-attestation",
        description="Push the DSSE envelope in ENVELOPE to REF's digest twice: as a layer of the cosign "
        "sha256-<digest>.att manifest and as an OCI 1.1 referrer (with the sha256-<digest> fallback index "
        "where the registry has no referrers API). The statement's subject must name the artifact.",
    )
    attach.add_argument("envelope", type=Path, metavar="ENVELOPE", help="DSSE envelope (JSON) file")
    attach.add_argument("--to", required=True, metavar="REF", help="image or engine artifact reference")
    add_registry_arguments(attach)
    attach.set_defaults(handler=_attach_attestation)


def add_registry_arguments(parser: argparse._ActionsContainer) -> None:
    """Add ``--registry-config`` and ``--timeout`` (used by every command that writes to a registry)."""
    parser.add_argument(
        "--registry-config",
        type=Path,
        metavar="FILE",
        help="registry settings (CA bundles, credentials, loopback plain HTTP); "
        "default: $TRTGUARD_REGISTRY_CONFIG",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="give up after this many seconds (default: 600)",
    )


def _registry_config(args: argparse.Namespace) -> RegistryConfig:
    path: Path | None = args.registry_config
    if path is None and os.environ.get("TRTGUARD_REGISTRY_CONFIG"):
        path = Path(os.environ["TRTGUARD_REGISTRY_CONFIG"])
    return load_registry_config(path) if path is not None else RegistryConfig()


def _deadline(args: argparse.Namespace) -> Deadline:
    seconds: float = args.timeout
    if not seconds > 0:
        raise InputError(f"--timeout must be a positive number of seconds, not {seconds}")
    return Deadline.after(seconds)


def _sign(args: argparse.Namespace) -> int:
    reference = ImageReference.parse(args.image)
    annotations: dict[str, str] = {}
    for item in args.annotation:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise InputError(f"annotation {item!r} is not KEY=VALUE", hint="write -a team=inference")
        annotations[name] = value
    key = load_signing_key(args.key, args)
    config, deadline = _registry_config(args), _deadline(args)

    async def run() -> tuple[str, str]:
        async with RegistryClient(config) as client:
            digest = await client.resolve(reference, deadline)
            payload = simple_signing_payload(reference, digest, annotations)
            signature = base64.b64encode(key.sign(payload)).decode()
            tag = signature_tag(digest)
            await append_layer(
                RegistryWriter(client),
                reference,
                tag,
                payload,
                media_type=SIMPLE_SIGNING,
                annotations={SIGNATURE_ANNOTATION: signature},
                deadline=deadline,
            )
            return digest, tag

    digest, tag = asyncio.run(run())
    print(f"signed {reference.name}@{digest}; signature in {reference.name}:{tag}")
    return 0


def _push_engine(args: argparse.Namespace) -> int:
    target = ImageReference.parse(args.to)
    config, deadline = _registry_config(args), _deadline(args)

    async def run() -> str:
        async with RegistryClient(config) as client:
            artifact = await push_engine(
                RegistryWriter(client),
                target,
                args.engine,
                deadline,
                calibration_cache=args.calibration_cache,
                onnx=args.onnx,
            )
            return f"{artifact.reference.name}@{artifact.reference.digest}"

    print(asyncio.run(run()))
    return 0


def _attach_attestation(args: argparse.Namespace) -> int:
    path: Path = args.envelope
    data = read_limited(path, "the envelope")
    print(push_attestation(data, args.to, args, location=str(path)))
    return 0


def push_attestation(data: bytes, to: str, args: argparse.Namespace, *, location: str | None = None) -> str:
    """Attach the signed envelope ``data`` to the artifact ``to``; returns a line saying where it went.

    ``args`` carries the options of :func:`add_registry_arguments`.
    """
    envelope = Envelope.from_json(data, location=location)
    try:
        statement = statement_from_envelope(envelope, location=location)
    except TrtguardError as error:
        raise InputError(error.message, location=location, hint=error.hint) from error
    if not envelope.signatures:
        raise InputError("the envelope carries no signature", location=location, hint="sign it first")
    target = ImageReference.parse(to)
    config, deadline = _registry_config(args), _deadline(args)

    async def run() -> Attached:
        async with RegistryClient(config) as client:
            return await attach_attestation(
                RegistryWriter(client), target, data, statement, deadline, location=location
            )

    attached = asyncio.run(run())
    return (
        f"attached {statement.predicate_type} to {target.name}@{attached.digest}; "
        f"referrer {target.name}@{attached.referrer}"
    )

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

from verifier._cli.keys import add_password_arguments, load_signing_key
from verifier.deadline import Deadline
from verifier.dsse import Envelope
from verifier.errors import InputError, TrtguardError
from verifier.intoto import statement_from_envelope
from verifier.references import ImageReference
from verifier.registry.client import RegistryClient
from verifier.registry.config import RegistryConfig, load_registry_config
from verifier.registry.cosign_layout import (
    DSSE_ENVELOPE,
    PREDICATE_TYPE_ANNOTATION,
    SIGNATURE_ANNOTATION,
    SIMPLE_SIGNING,
    append_layer,
    attestation_tag,
    push_referrer,
    signature_tag,
    simple_signing_payload,
)
from verifier.registry.evidence import RegistryEvidence
from verifier.registry.push import push_engine

_MAX_ENVELOPE = 16 * 1024 * 1024
#: Annotation on trtguard's attestation referrer manifests (the name BuildKit uses for in-toto layers).
PREDICATE_TYPE_REFERRER_ANNOTATION = "in-toto.io/predicate-type"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``sign``, ``push-engine`` and ``attach-attestation``."""
    sign = subparsers.add_parser(
        "sign",
        help="sign an image in its registry (cosign-compatible classic signature)",
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
    _add_registry_arguments(sign)
    sign.set_defaults(handler=_sign)

    push = subparsers.add_parser(
        "push-engine",
        help="store a TensorRT engine as an OCI artifact a Pod can mount as an image volume",
        description="Upload ENGINE (and optionally its calibration cache and ONNX model) as an OCI artifact "
        "(artifactType application/vnd.trtguard.engine.v1, one uncompressed layer per file, so the engine "
        "layer's digest is the engine file's sha256). Prints the artifact's digest reference.",
    )
    push.add_argument("engine", type=Path, metavar="ENGINE", help="serialized TensorRT engine (plan) file")
    push.add_argument("--to", required=True, metavar="REF", help="registry/repository[:tag] to push to")
    push.add_argument("--calibration-cache", type=Path, metavar="FILE", help="INT8 calibration cache")
    push.add_argument("--onnx", type=Path, metavar="FILE", help="the ONNX model the engine was built from")
    _add_registry_arguments(push)
    push.set_defaults(handler=_push_engine)

    attach = subparsers.add_parser(
        "attach-attestation",
        help="attach a DSSE attestation to an image or engine artifact in its registry",
        description="Push the DSSE envelope in ENVELOPE to REF's digest twice: as a layer of the cosign "
        "sha256-<digest>.att manifest and as an OCI 1.1 referrer (with the sha256-<digest> fallback index "
        "where the registry has no referrers API). The statement's subject must name the artifact.",
    )
    attach.add_argument("envelope", type=Path, metavar="ENVELOPE", help="DSSE envelope (JSON) file")
    attach.add_argument("--to", required=True, metavar="REF", help="image or engine artifact reference")
    _add_registry_arguments(attach)
    attach.set_defaults(handler=_attach_attestation)


def _add_registry_arguments(parser: argparse.ArgumentParser) -> None:
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
                client,
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
                client,
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
    try:
        if path.stat().st_size > _MAX_ENVELOPE:
            raise InputError(
                f"the envelope is larger than {_MAX_ENVELOPE // (1024 * 1024)} MiB", location=str(path)
            )
        data = path.read_bytes()
    except OSError as error:
        raise InputError(f"cannot read the envelope: {error.strerror}", location=str(path)) from error
    envelope = Envelope.from_json(data, location=str(path))
    try:
        statement = statement_from_envelope(envelope, location=str(path))
    except TrtguardError as error:
        raise InputError(error.message, location=str(path), hint=error.hint) from error
    if not envelope.signatures:
        raise InputError("the envelope carries no signature", location=str(path), hint="sign it first")
    target = ImageReference.parse(args.to)
    config, deadline = _registry_config(args), _deadline(args)

    async def run() -> tuple[str, str]:
        async with RegistryClient(config) as client:
            digest = await client.resolve(target, deadline)
            pinned = target.with_digest(digest)
            subjects = await RegistryEvidence(client).subject_digests(pinned, deadline)
            if not statement.subject_digests() & subjects:
                named = ", ".join(sorted(statement.subject_digests())) or "no sha256 digest"
                raise InputError(
                    f"the attestation is about {named}, not about {pinned.name}@{digest} or its files",
                    location=str(path),
                    hint="attach it to the artifact its statement's subject names",
                )
            await append_layer(
                client,
                pinned,
                attestation_tag(digest),
                data,
                media_type=DSSE_ENVELOPE,
                annotations={PREDICATE_TYPE_ANNOTATION: statement.predicate_type},
                deadline=deadline,
            )
            manifest = await client.get_manifest(pinned, deadline)
            pushed = await push_referrer(
                client,
                pinned,
                manifest.descriptor,
                artifact_type=DSSE_ENVELOPE,
                blob=data,
                blob_media_type=DSSE_ENVELOPE,
                layer_annotations={PREDICATE_TYPE_ANNOTATION: statement.predicate_type},
                annotations={PREDICATE_TYPE_REFERRER_ANNOTATION: statement.predicate_type},
                deadline=deadline,
            )
            return digest, pushed.digest

    digest, referrer = asyncio.run(run())
    print(f"attached {statement.predicate_type} to {target.name}@{digest}; referrer {target.name}@{referrer}")
    return 0

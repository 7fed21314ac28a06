"""What ``trtguard sign`` (cosign or Notary Project), ``trtguard push-engine`` and ``trtguard
attach-attestation`` (DSSE envelopes, statements signed with OpenPGP, Notation envelopes, model signatures)
do: writing to registries, and the pushes ``attest --push`` and ``approve --push`` share.

Each command's options are in its own module (:mod:`trtguard.cli.sign`, :mod:`trtguard.cli.push_engine`,
:mod:`trtguard.cli.attach_attestation`), which loads this one only when the command runs. All three take
``--registry-config FILE`` (else ``$TRTGUARD_REGISTRY_CONFIG``) for CA bundles, credentials and loopback
plain-HTTP registries (format: ``verifier/registry/README.md``), and ``--timeout SECONDS``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import json
import os
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

from trtguard.cli._key_files import load_signing_key
from trtguard.release import (
    Attached,
    CarriedEngine,
    attach_attestation,
    attach_model_signature,
    attach_notation_signature,
    attach_openpgp_statement,
    carried_engine,
    push_engine,
)
from trtguard.release.cosign_layout import append_layer, simple_signing_payload
from trtguard.release.publish import RegistryWriter
from verifier.base import Deadline, ImageReference, InputError, TrtguardError, read_limited
from verifier.crypto import PAYLOAD_TYPE, Envelope, load_private_key, statement_from_envelope
from verifier.registry import SIGNATURE_ANNOTATION, SIMPLE_SIGNING, signature_tag
from verifier.registry.client import RegistryClient
from verifier.registry.config import RegistryConfig, load_registry_config
from verifier.signatures import MAX_SIGNATURE_BYTES, read_signatures
from verifier.signatures.notation import (
    COSE_MEDIA_TYPE,
    JWS_MEDIA_TYPE,
    load_certificates,
    sign_notation,
)

_T = TypeVar("_T")


def registry_config(args: argparse.Namespace) -> RegistryConfig:
    """The registry settings ``--registry-config`` names (:func:`~trtguard.cli._args.add_registry_arguments`),
    else ``$TRTGUARD_REGISTRY_CONFIG``, else none (public registries over TLS, no credentials)."""
    path: Path | None = args.registry_config
    if path is None and os.environ.get("TRTGUARD_REGISTRY_CONFIG"):
        path = Path(os.environ["TRTGUARD_REGISTRY_CONFIG"])
    return load_registry_config(path) if path is not None else RegistryConfig()


def registry_deadline(args: argparse.Namespace) -> Deadline:
    """The deadline ``--timeout`` sets, from now; :class:`InputError` unless it is above 0."""
    seconds: float = args.timeout
    if not seconds > 0:
        raise InputError(f"--timeout must be a positive number of seconds, not {seconds}")
    return Deadline.after(seconds)


def _with_registry(
    args: argparse.Namespace, write: Callable[[RegistryWriter, Deadline], Awaitable[_T]]
) -> _T:
    """Run ``write`` with a writer to the registries as ``args`` configure them, under their ``--timeout``."""
    config, deadline = registry_config(args), registry_deadline(args)

    async def run() -> _T:
        async with RegistryClient(config) as client:
            return await write(RegistryWriter(client), deadline)

    return asyncio.run(run())


def _attached(what: str, target: ImageReference, attached: Attached) -> str:
    """The line saying that ``what`` was attached to ``target``, and where its referrer went."""
    return f"attached {what} to {target.name}@{attached.digest}; referrer {target.name}@{attached.referrer}"


def sign(args: argparse.Namespace) -> int:
    """``trtguard sign``: a cosign or Notary Project signature of an image, pushed to its registry."""
    if args.format == "notation":
        return _sign_notation(args)
    if args.certificate is not None or args.certificate_chain is not None or args.expiry is not None:
        raise InputError("--certificate, --certificate-chain and --expiry go with --format notation")
    reference = ImageReference.parse(args.image)
    annotations: dict[str, str] = {}
    for item in args.annotation:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise InputError(f"annotation {item!r} is not KEY=VALUE", hint="write -a team=inference")
        annotations[name] = value
    key = load_signing_key(args.key, args)

    async def write(writer: RegistryWriter, deadline: Deadline) -> tuple[str, str]:
        digest = await writer.client.resolve(reference, deadline)
        payload = simple_signing_payload(reference, digest, annotations)
        signature = base64.b64encode(key.sign(payload)).decode()
        tag = signature_tag(digest)
        await append_layer(
            writer,
            reference,
            tag,
            payload,
            media_type=SIMPLE_SIGNING,
            annotations={SIGNATURE_ANNOTATION: signature},
            deadline=deadline,
        )
        return digest, tag

    digest, tag = _with_registry(args, write)
    print(f"signed {reference.name}@{digest}; signature in {reference.name}:{tag}")
    return 0


def _sign_notation(args: argparse.Namespace) -> int:
    if args.annotation:
        raise InputError("-a/--annotation adds to cosign payloads; Notary Project payloads carry none here")
    if args.certificate is None:
        raise InputError("--format notation needs --certificate (the signing certificate of --key)")
    chain = list(
        load_certificates(read_limited(args.certificate, "the certificate"), location=str(args.certificate))
    )
    if args.certificate_chain is not None:
        chain += load_certificates(
            read_limited(args.certificate_chain, "the certificate chain"),
            location=str(args.certificate_chain),
        )
    if args.expiry is not None and not args.expiry > 0:
        raise InputError(
            f"--expiry must be a positive number of days, not {args.expiry}", location="--expiry"
        )
    reference = ImageReference.parse(args.image)
    raw_key = read_limited(args.key, "the private key")
    # An x509 signing key is usually a plain PKCS#8 file (openssl's output): no password to ask for then.
    key = (
        load_private_key(raw_key, b"")
        if b"-----BEGIN PRIVATE KEY-----" in raw_key
        else load_signing_key(args.key, args)
    )
    media_type = JWS_MEDIA_TYPE if args.envelope == "jws" else COSE_MEDIA_TYPE
    now = datetime.now(UTC)
    expiry = now + timedelta(days=args.expiry) if args.expiry is not None else None

    async def write(writer: RegistryWriter, deadline: Deadline) -> tuple[str, str]:
        digest = await writer.client.resolve(reference, deadline)
        pinned = reference.with_digest(digest)
        target = (await writer.client.get_manifest(pinned, deadline)).descriptor
        descriptor = {"mediaType": target.media_type, "digest": target.digest, "size": target.size}
        envelope = sign_notation(
            descriptor, key, chain, media_type=media_type, signing_time=now, expiry=expiry
        )
        pushed = await attach_notation_signature(writer, pinned, envelope, media_type, deadline)
        return digest, pushed.referrer

    digest, referrer = _with_registry(args, write)
    print(
        f"signed {reference.name}@{digest} (Notary Project, {media_type}); "
        f"signature {reference.name}@{referrer}"
    )
    return 0


def push_engine_file(args: argparse.Namespace) -> int:
    """``trtguard push-engine``: an engine file (and its companions) pushed as an OCI artifact."""
    target = ImageReference.parse(args.to)

    async def write(writer: RegistryWriter, deadline: Deadline) -> str:
        artifact = await push_engine(
            writer, target, args.engine, deadline, calibration_cache=args.calibration_cache, onnx=args.onnx
        )
        return f"{artifact.reference.name}@{artifact.reference.digest}"

    print(_with_registry(args, write))
    return 0


def _notation_envelope(data: bytes) -> str | None:
    """The media type of a Notary Project envelope (COSE_Sign1 tag 18, or a flattened JWS), else None."""
    if data[:1] == b"\xd2":
        return COSE_MEDIA_TYPE
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if isinstance(document, dict) and {"protected", "header", "signature"} <= set(document):
        return JWS_MEDIA_TYPE
    return None


def attach(args: argparse.Namespace) -> int:
    """``trtguard attach-attestation``: a signed statement or signature attached to an artifact."""
    path: Path = args.envelope
    data = read_limited(path, "the envelope")
    notation = _notation_envelope(data)
    if notation is not None:
        if args.signature:
            raise InputError("--signature goes with statements signed with OpenPGP, not Notation envelopes")
        print(push_notation_signature(data, notation, args.to, args, location=str(path)))
        return 0
    if args.signature:
        signatures = [
            read_limited(p, "the OpenPGP signature", limit=MAX_SIGNATURE_BYTES) for p in args.signature
        ]
        print(push_openpgp_statement(data, signatures, args.to, args, location=str(path)))
        return 0
    if _is_model_signature(data):
        print(push_model_signature(data, args.to, args, location=str(path)))
        return 0
    print(push_attestation(data, args.to, args, location=str(path)))
    return 0


def _is_model_signature(data: bytes) -> bool:
    """Whether ``data`` looks like an OpenSSF Model Signing signature (a Sigstore bundle of its predicate);
    reading it for real is the attaching's."""
    from verifier.model_signing import PREDICATE_TYPE  # noqa: PLC0415 - loaded for model signatures only

    try:
        document = json.loads(data)
        envelope = document["dsseEnvelope"]
        statement = json.loads(base64.b64decode(envelope["payload"], validate=True))
        return bool(statement["predicateType"] == PREDICATE_TYPE)
    except (ValueError, TypeError, KeyError, UnicodeDecodeError, RecursionError, binascii.Error):
        return False


def push_model_signature(
    data: bytes, to: str, args: argparse.Namespace, *, location: str | None = None
) -> str:
    """Attach the model signature ``data`` to the engine artifact ``to``; returns where it went."""
    target = ImageReference.parse(to)
    attached = _with_registry(
        args,
        lambda writer, deadline: attach_model_signature(writer, target, data, deadline, location=location),
    )
    return _attached("a model signature (OpenSSF Model Signing)", target, attached)


def push_notation_signature(
    data: bytes, media_type: str, to: str, args: argparse.Namespace, *, location: str | None = None
) -> str:
    """Push the Notary Project envelope ``data`` as a signature referrer of ``to``; returns where it went."""
    target = ImageReference.parse(to)
    attached = _with_registry(
        args,
        lambda writer, deadline: attach_notation_signature(
            writer, target, data, media_type, deadline, location=location
        ),
    )
    return _attached(f"a Notary Project signature ({media_type})", target, attached)


def push_openpgp_statement(
    data: bytes, signatures: list[bytes], to: str, args: argparse.Namespace, *, location: str | None = None
) -> str:
    """Attach the in-toto statement ``data`` with its detached OpenPGP ``signatures`` to the artifact ``to``.

    Each signature must at least be a binary OpenPGP signature (checked here; verifying it needs the policy's
    keys, which the evaluator has). ``args`` carries the options of :func:`add_registry_arguments`.
    """
    try:
        statement = statement_from_envelope(Envelope(PAYLOAD_TYPE, data, ()), location=location)
        for signature in signatures:
            read_signatures(signature, location=location)
    except TrtguardError as error:
        raise InputError(error.message, location=location, hint=error.hint) from error
    target = ImageReference.parse(to)
    attached = _with_registry(
        args,
        lambda writer, deadline: attach_openpgp_statement(
            writer, target, data, statement, signatures, deadline, location=location
        ),
    )
    return _attached(
        f"{statement.predicate_type} (OpenPGP, {len(signatures)} signature(s))", target, attached
    )


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
    attached = _with_registry(
        args,
        lambda writer, deadline: attach_attestation(
            writer, target, data, statement, deadline, location=location
        ),
    )
    return _attached(statement.predicate_type, target, attached)


def carried_engine_of(reference: str, args: argparse.Namespace) -> CarriedEngine:
    """The artifact digest of ``reference`` and the engine file it carries, as :func:`carried_engine` reads
    them (``args``: the options of :func:`add_registry_arguments`)."""
    target = ImageReference.parse(reference)
    return _with_registry(args, lambda writer, deadline: carried_engine(writer, target, deadline))

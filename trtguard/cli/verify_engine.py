"""``trtguard verify-engine``: check an engine file against its signed build manifest, optionally on a GPU.

The attestation's signing key is ``--attest-key`` (not ``--key``, which names the public key the manifest
must be signed with; one command takes both).

Imported on its own (``from verifier._cli import engine``), this module loads only what the checks need (no
registry client, no sigstore), so that a slim environment on a GPU node can run it; the shared private-key
helper, whose module loads sigstore, is imported only when ``--attest`` asks for a key. The ``trtguard``
command registers every command and so imports them all.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TextIO

from trtguard.cli._args import add_clock_argument
from trtguard.cli._commands import Subparsers, add_command
from trtguard.cli._keys import add_password_arguments
from trtguard.cli._output import check_output, write_output
from verifier.base import InputError, TrtguardError, read_limited
from verifier.crypto import PrivateKey, PublicKey
from verifier.engine import (
    GpuOptions,
    ModelSignatureRequest,
    SignedManifest,
    VerifyRequest,
    load_signed_manifest,
    sign_verification,
    verify_engine,
)

#: Files at least this large get a progress line while they are hashed.
PROGRESS_FROM_BYTES = 64 * 1024 * 1024
_GIB = 1024**3


class _Progress:
    """A progress line on standard error: rewritten in place on a terminal, every 10 s in a log."""

    def __init__(self, name: str, stream: TextIO) -> None:
        self._name = name
        self._stream = stream
        self._tty = stream.isatty()
        self._interval = 0.25 if self._tty else 10.0
        self._last = time.monotonic()
        self._shown = False

    def __call__(self, done: int, total: int) -> None:
        if total < PROGRESS_FROM_BYTES:
            return
        now = time.monotonic()
        if now - self._last < self._interval and done < total:
            return
        self._last = now
        percent = 100 * done // total if total else 100
        text = f"hashing {self._name}: {done / _GIB:.2f} / {total / _GIB:.2f} GiB ({percent}%)"
        if self._tty:
            self._stream.write(f"\r{text}")
            self._shown = True
        else:
            self._stream.write(text + "\n")
        self._stream.flush()

    def finish(self) -> None:
        if self._shown:
            self._stream.write("\n")
            self._stream.flush()


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value <= 24 * 3600:
        raise argparse.ArgumentTypeError("give between 0 and 86400 seconds")
    return value


def _check_arguments(args: argparse.Namespace) -> None:
    """Combinations argparse cannot express; each is a usage error (exit 2)."""
    if args.manifest is not None and not args.key:
        raise InputError(
            "--manifest needs --key",
            hint="the manifest's signature is checked with the builder's public key before it is used",
        )
    if args.key and args.manifest is None:
        raise InputError("--key names the manifest's signer; give the manifest with --manifest")
    if args.gpu and args.manifest is None:
        raise InputError(
            "--gpu needs --manifest and --key",
            hint="an engine is deserialized only after its hash matched a manifest signed by a trusted key",
        )
    if args.allow_host_code and not args.gpu:
        raise InputError("--allow-host-code only applies with --gpu")
    if args.attest:
        if not args.gpu:
            raise InputError(
                "--attest needs --gpu",
                hint="the attestation records what a TensorRT runtime observed on a GPU",
            )
        if args.attest_key is None or args.attest_output is None:
            raise InputError(
                "--attest needs --attest-key KEY and -o FILE",
                hint="--attest-key is the verifier's private key; -o is where the signed attestation goes",
            )
        check_output(args.attest_output, "the attestation")  # before the GPU run, not after it
    elif args.attest_key is not None or args.attest_output is not None:
        raise InputError("--attest-key and -o only apply with --attest")
    keyless = (args.model_identity, args.model_oidc_issuer, args.model_trusted_root)
    trusting = bool(args.model_key or args.model_certificate_chain) or any(x is not None for x in keyless)
    if args.model_signature is not None and not trusting:
        raise InputError(
            "--model-signature needs who may have signed it",
            hint="give --model-key PUB, --model-certificate-chain PEM, or --model-identity with "
            "--model-oidc-issuer and --model-trusted-root",
        )
    if trusting and args.model_signature is None:
        raise InputError("the --model-* signers only apply with --model-signature SIG")
    if any(x is not None for x in keyless) and None in keyless:
        raise InputError(
            "a keyless signer needs --model-identity, --model-oidc-issuer and --model-trusted-root"
        )


#: A PEM public key is a few hundred bytes.
_MAX_KEY_BYTES = 1024 * 1024


def _trusted_keys(paths: list[Path]) -> dict[str, PublicKey]:
    keys: dict[str, PublicKey] = {}
    for path in paths:
        name = path.name if path.name not in keys else str(path)
        try:
            with path.open("rb") as stream:
                keys[name] = PublicKey.from_pem(stream.read(_MAX_KEY_BYTES))
        except OSError as error:
            raise InputError(f"cannot read the public key: {error.strerror}", location=str(path)) from error
        except TrtguardError as error:
            error.location = error.location or str(path)
            raise
    return keys


def _model_signers(args: argparse.Namespace) -> ModelSignatureRequest | None:
    """The ``--model-signature`` to check and its trusted signers, by the file (or identity) naming each."""
    if args.model_signature is None:
        return None
    # Loaded here: the model-signing verifier is needed only with a model signature (slim GPU environments).
    from verifier.model_signing import (  # noqa: PLC0415
        ModelSigningCertificates,
        ModelSigningKey,
        ModelSigningKeyless,
        ModelSigningTrust,
    )

    def read(path: Path, what: str) -> bytes:
        return read_limited(path, what, limit=_MAX_KEY_BYTES)

    trusted: dict[str, ModelSigningTrust] = {}
    for path in args.model_key:
        trusted[str(path)] = ModelSigningKey.from_pem(read(path, "the model-signing key"), str(path))
    for path in args.model_certificate_chain:
        chain = read(path, "the certificate chain")
        trusted[str(path)] = ModelSigningCertificates.from_pem(chain, str(path))
    if args.model_identity is not None:
        from verifier.signatures import KeylessIdentity, TrustRoot  # noqa: PLC0415 - keyless only

        identity = KeylessIdentity(issuer=args.model_oidc_issuer, subject=args.model_identity)
        root = TrustRoot.from_file(args.model_trusted_root)
        trusted[str(identity)] = ModelSigningKeyless(identity, root)
    return ModelSignatureRequest(args.model_signature, trusted)


def _signing_key(args: argparse.Namespace) -> PrivateKey:
    # Imported here: the shared password helper lives with the key commands, whose module also loads the
    # sigstore verifier; only --attest needs it.
    from trtguard.cli._key_files import load_signing_key  # noqa: PLC0415

    return load_signing_key(args.attest_key, args)


def _run(args: argparse.Namespace) -> int:
    _check_arguments(args)
    engine: Path = args.engine
    if not engine.is_file():
        raise InputError(
            "no such engine file", location=str(engine), hint="give the path of the .plan/.engine"
        )
    # Everything that can be a usage error is opened before the (possibly long) hashing and GPU run.
    signing_key: PrivateKey | None = _signing_key(args) if args.attest else None
    signed: SignedManifest | None = None
    if args.manifest is not None:
        signed = load_signed_manifest(args.manifest, _trusted_keys(args.key))
    gpu = GpuOptions(timeout_s=args.timeout, allow_host_code=args.allow_host_code) if args.gpu else None
    request = VerifyRequest(
        engine=engine,
        manifest=signed,
        calibration_cache=args.calibration_cache,
        onnx=args.onnx,
        gpu=gpu,
        model_signature=_model_signers(args),
    )
    progress = _Progress(engine.name, sys.stderr)
    try:
        report = verify_engine(request, progress=progress)
    finally:
        progress.finish()
    print(report.to_json_text() if args.format == "json" else report.render_text())
    if signing_key is not None:
        envelope = sign_verification(report, signing_key)
        write_output(args.attest_output, envelope.to_json(), "the attestation")
        print(
            f"engine-verification attestation (result: {'pass' if report.ok else 'fail'}) "
            f"written to {args.attest_output}",
            file=sys.stderr,
        )
    return 0 if report.ok else 1


def register(subparsers: Subparsers) -> None:
    """Add ``verify-engine``."""
    parser = add_command(
        subparsers,
        "verify-engine",
        description="Static checks first (the manifest's signature, the engine's SHA-256 and size, the plan "
        "header, the calibration cache, the ONNX model, a model signature of the engine); with --gpu, the "
        "engine is then deserialized by TensorRT in a separate process under a time limit and compared with "
        "the manifest. Exit status: "
        "0 when no check failed, 1 when one did, 2 for usage and input errors. A skipped check is not a "
        "pass.",
    )
    parser.add_argument("engine", type=Path, metavar="ENGINE", help="the engine (plan) file")
    parser.add_argument(
        "--manifest", type=Path, metavar="ENVELOPE", help="DSSE envelope of the build manifest"
    )
    parser.add_argument(
        "--key",
        type=Path,
        action="append",
        default=[],
        metavar="PUB",
        help="PEM public key the manifest must be signed with (repeat to trust several)",
    )
    parser.add_argument("--calibration-cache", type=Path, metavar="FILE", help="INT8 calibration cache")
    parser.add_argument("--onnx", type=Path, metavar="FILE", help="the ONNX model the engine was built from")
    model = parser.add_argument_group(
        "model signature",
        "an OpenSSF Model Signing signature of the engine file (`model_signing sign` over it, or over a "
        "folder that holds it): it must be signed by one of the signers given and list the engine's SHA-256",
    )
    model.add_argument("--model-signature", type=Path, metavar="SIG", help="the signature (model.sig)")
    model.add_argument(
        "--model-key", type=Path, action="append", default=[], metavar="PUB", help="a signer's public key"
    )
    model.add_argument(
        "--model-certificate-chain",
        type=Path,
        action="append",
        default=[],
        metavar="PEM",
        help="CA certificates a signer's certificate must chain to",
    )
    model.add_argument("--model-identity", metavar="ID", help="keyless: the certificate identity (SAN)")
    model.add_argument("--model-oidc-issuer", metavar="URL", help="keyless: the OIDC issuer")
    model.add_argument(
        "--model-trusted-root", type=Path, metavar="FILE", help="keyless: Sigstore trusted_root.json"
    )
    parser.add_argument(
        "--gpu", action="store_true", help="deserialize the engine with TensorRT (needs --manifest and --key)"
    )
    parser.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=120.0,
        metavar="SECONDS",
        help="time limit of the GPU child process (default: 120)",
    )
    parser.add_argument(
        "--allow-host-code",
        action="store_true",
        help="let TensorRT run the lean runtime embedded in a version-compatible plan (only after the "
        "hash and the signature passed)",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text", help="report format")
    parser.add_argument(
        "--attest", action="store_true", help="sign an engine-verification attestation of what was observed"
    )
    parser.add_argument(
        "--attest-key", type=Path, metavar="KEY", help="the verifier's private key (cosign format)"
    )
    parser.add_argument(
        "-o", "--attest-output", type=Path, metavar="FILE", help="where to write the signed attestation"
    )
    add_password_arguments(parser, key="--attest-key")
    add_clock_argument(parser)  # the engine's checks compare bytes and build facts, not times
    parser.set_defaults(handler=_run)

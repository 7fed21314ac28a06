"""``trtguard attach-attestation``: attach a signed statement or signature to an image or engine artifact."""

from __future__ import annotations

from pathlib import Path

from trtguard.cli._args import add_registry_arguments
from trtguard.cli._commands import Subparsers, add_command, deferred


def register(subparsers: Subparsers) -> None:
    """Add ``attach-attestation``; what it does is in :mod:`trtguard.cli._registry`, loaded when it runs."""
    attach = add_command(
        subparsers,
        "attach-attestation",
        description="Push the DSSE envelope in ENVELOPE to REF's digest twice: as a layer of the cosign "
        "sha256-<digest>.att manifest and as an OCI 1.1 referrer (with the sha256-<digest> fallback index "
        "where the registry has no referrers API). The statement's subject must name the artifact. A Notary "
        "Project signature envelope (JWS or COSE, as `notation sign` makes) is pushed as Notation stores it: "
        "a referrer of artifact type application/vnd.cncf.notary.signature; its payload must name REF's "
        "manifest (media type, digest and size). An OpenSSF Model Signing signature (`model_signing sign`, "
        "a Sigstore bundle) of the model an engine was built from is pushed as cosign v3 pushes bundles: a "
        "referrer of artifact type application/vnd.dev.sigstore.bundle.v0.3+json.",
    )
    attach.add_argument(
        "envelope",
        type=Path,
        metavar="ENVELOPE",
        help="DSSE envelope (JSON), a Notation envelope (JWS/COSE), or a model signature (model.sig)",
    )
    attach.add_argument("--to", required=True, metavar="REF", help="image or engine artifact reference")
    attach.add_argument(
        "--signature",
        type=Path,
        action="append",
        default=[],
        metavar="ASC",
        help="ENVELOPE is a bare in-toto statement signed with OpenPGP and this its detached signature "
        "(repeatable): pushed as one referrer of type application/vnd.trtguard.statement.openpgp.v1",
    )
    add_registry_arguments(attach)
    attach.set_defaults(handler=deferred("trtguard.cli._registry", "attach"))

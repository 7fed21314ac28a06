"""``trtguard push-engine``: store a TensorRT engine (and its companions) as an OCI artifact."""

from __future__ import annotations

from pathlib import Path

from trtguard.cli._args import add_registry_arguments
from trtguard.cli._commands import Subparsers, add_command, deferred


def register(subparsers: Subparsers) -> None:
    """Add ``push-engine``; what it does is in :mod:`trtguard.cli._registry`, loaded when it runs."""
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
    push.set_defaults(handler=deferred("trtguard.cli._registry", "push_engine_file"))

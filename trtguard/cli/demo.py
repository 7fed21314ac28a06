"""``trtguard demo engine OUT``: a stand-in engine (and ONNX model) for trying the release flow without a GPU.

What the files hold is :mod:`trtguard.demo._engine`'s; the scripted webhook demo is ``make demo``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from trtguard.cli._commands import Subparsers, add_command_group, add_subcommand


def register(subparsers: Subparsers) -> None:
    """Add ``demo`` and ``demo engine``."""
    commands = add_command_group(
        subparsers, "demo", description="Material for trying trtguard without a GPU or a cluster."
    )
    engine = add_subcommand(
        commands,
        "engine",
        help="write a stand-in TensorRT plan with a real header layout (and an ONNX model)",
        description="Write OUT: a stand-in TensorRT plan whose header has the layout trtguard reads "
        "(docs/engine-artifact.md, 'The plan header'), for `manifest create`, `push-engine`, `approve` and "
        "the webhook without a GPU. No TensorRT runtime loads it.",
    )
    engine.add_argument("output", type=Path, metavar="OUT", help="the plan file to write")
    engine.add_argument(
        "--tensorrt-version",
        default="10.8.0.43",
        metavar="VERSION",
        help="the TensorRT version its header names (default 10.8.0.43)",
    )
    engine.add_argument(
        "--seed", default="", metavar="TEXT", help="text written into it: another seed, another digest"
    )
    engine.add_argument("--onnx", type=Path, metavar="FILE", help="also write a small real ONNX model here")
    engine.add_argument("--force", action="store_true", help="overwrite existing files")
    engine.set_defaults(handler=_engine)


def _engine(args: argparse.Namespace) -> int:
    from trtguard.cli._output import Output, check_output, write_outputs  # noqa: PLC0415
    from trtguard.demo import stand_in_onnx, stand_in_plan  # noqa: PLC0415
    from verifier.base import InputError, sha256_bytes  # noqa: PLC0415

    # Every path and the onnx package are checked before anything is written: a bad --onnx leaves no plan.
    files = [(args.output, "the plan")] + ([(args.onnx, "the ONNX model")] if args.onnx is not None else [])
    if args.onnx is not None and args.onnx.resolve() == args.output.resolve():
        raise InputError("OUT and --onnx name the same file", location=str(args.onnx))
    for path, what in files:
        check_output(path, what)
        if path.exists() and not args.force:
            raise InputError(f"{path} exists", hint="use --force to overwrite it")
    plan = stand_in_plan(args.tensorrt_version, args.seed)
    outputs = [Output(args.output, plan, "the plan")]
    if args.onnx is not None:
        outputs.append(Output(args.onnx, stand_in_onnx(), "the ONNX model"))
    write_outputs(outputs)
    print(f"{args.output}: stand-in TensorRT {args.tensorrt_version} plan, sha256:{sha256_bytes(plan)}")
    if args.onnx is not None:
        print(f"{args.onnx}: ONNX model (Relu, input [batch, 3, 224, 224])")
    return 0

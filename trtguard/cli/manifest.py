"""``trtguard manifest import|create|diff``: write engine build manifests and compare them.

Exit status: 0 when the manifest was written (or the diff printed, changes or not), 2 for bad input or an
incomplete manifest (unless ``--allow-incomplete``), 1 when a file contradicts the record it comes with.
``manifest import`` keeps the record's signature apart from its completeness (:data:`IMPORT_EXIT`): 1 when
the signature does not verify, 3 when the record is incomplete, and both are reported (``--report FILE``
writes them as JSON).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import os
import shutil
import sys
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from trtguard.cli._args import add_registry_arguments
from trtguard.cli._commands import Subparsers, add_command_group, add_subcommand
from trtguard.cli._key_commands import write_envelope
from trtguard.cli._key_files import load_signing_key
from trtguard.cli._keys import add_password_arguments
from trtguard.cli._manifest_import import (
    IMPORT_EXIT,
    IMPORT_HELP,
    add_import_arguments,
    import_report,
    signature_state,
    verify_record_signature,
)
from trtguard.cli._output import check_output, write_output
from trtguard.release.manifest import (
    CreateInputs,
    Distribution,
    Draft,
    Environment,
    ManifestSettings,
    create_manifest,
    import_flat,
    parse_json,
    read_manifest_file,
    read_yaml_as,
)
from verifier.base import InputError, hash_file, input_error_from_validation, read_limited
from verifier.crypto import Envelope, sign_statement
from verifier.engine import InvalidCalibrationCache, InvalidOnnxModel
from verifier.manifest import EngineBuildManifest, manifest_digest, manifest_statement
from verifier.manifest_diff import ManifestDiff, diff_manifests

_NVIDIA_SMI_TIMEOUT = 10.0


def register(subparsers: Subparsers) -> None:
    """Add ``manifest import``, ``manifest create`` and ``manifest diff``."""
    commands = add_command_group(
        subparsers,
        "manifest",
        description="Write engine build manifests (in-toto Statements) and compare them.",
    )
    _register_import(commands)
    _register_create(commands)
    _register_diff(commands)


def _output_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", type=Path, help="write here instead of standard output")
    parser.add_argument(
        "--predicate-only",
        action="store_true",
        help="write the bare predicate (for `trtguard attest --predicate`) instead of the in-toto Statement",
    )
    parser.add_argument(
        "--allow-incomplete",
        action="store_true",
        help="when required fields are missing, write a draft predicate with null placeholders (exit 0) "
        "instead of nothing (exit 2); a draft never validates until it is completed",
    )


def _settings_options(parser: argparse.ArgumentParser) -> None:
    """The options that make up :class:`ManifestSettings` (shared by ``create`` and ``import``)."""
    files = parser.add_argument_group("settings files")
    files.add_argument("--builder-config", type=Path, metavar="FILE", help="builder_config as YAML or JSON")
    files.add_argument("--accuracy", type=Path, metavar="FILE", help="accuracy metrics (a YAML or JSON list)")
    files.add_argument(
        "--config", type=Path, metavar="FILE", help="YAML or JSON file with any of the values below"
    )
    given = parser.add_argument_group("values that cannot be read from the build environment")
    given.add_argument("--toolchain-image", metavar="REF", help="builder image reference with @sha256 digest")
    given.add_argument("--audit-id", metavar="ID", help="audit (change) ID of this build")
    given.add_argument(
        "--engine-name", metavar="NAME", help="engine name in the manifest (default: the file name)"
    )
    given.add_argument("--onnx-uri", metavar="URI", help="where the ONNX model is kept")
    given.add_argument(
        "--calibration-sampling", metavar="TEXT", help="how the calibration samples were chosen"
    )
    given.add_argument("--calibration-start", metavar="TIME", help="first sample time (RFC 3339)")
    given.add_argument("--calibration-end", metavar="TIME", help="last sample time (RFC 3339)")
    previous = given.add_mutually_exclusive_group()
    previous.add_argument(
        "--previous-manifest", type=Path, metavar="FILE", help="the previous engine's manifest envelope"
    )
    previous.add_argument(
        "--previous-manifest-digest", metavar="DIGEST", help="sha256:… of that manifest's statement (payload)"
    )
    given.add_argument(
        "--previous-engine",
        metavar="REF",
        help="the previous engine artifact, registry/repo@sha256:… (where its manifest is attached)",
    )
    given.add_argument("--build-timestamp", metavar="TIME", help="RFC 3339 (create's default: now)")
    override = parser.add_argument_group("toolchain and build node (create reads them from the environment)")
    override.add_argument("--tensorrt-version", metavar="VERSION")
    override.add_argument("--cuda-version", metavar="VERSION")
    override.add_argument("--cudnn-version", metavar="VERSION")
    override.add_argument("--gpu-name", metavar="NAME")
    override.add_argument("--compute-capability", metavar="X.Y")
    override.add_argument("--driver-version", metavar="VERSION")


def _register_import(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_subcommand(
        commands, "import", help="convert a flat build record into a build manifest", description=IMPORT_HELP
    )
    add_import_arguments(parser)
    _settings_options(parser)
    _output_options(parser)
    _signing_options(parser)
    parser.set_defaults(handler=_import)


def _register_create(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_subcommand(
        commands,
        "create",
        help="record a build inside the engine build Job",
        description="Hash the build's files, read TensorRT/CUDA/cuDNN versions and the GPU from the "
        "environment, and write the engine build manifest. Flags override the --config file, which "
        "overrides what is read from the environment. Standard error says where each value came from and "
        "what could not be determined.",
    )
    files = parser.add_argument_group("build files")
    files.add_argument(
        "--onnx", type=Path, required=True, metavar="FILE", help="the ONNX model TensorRT parsed"
    )
    files.add_argument("--engine", type=Path, required=True, metavar="FILE", help="the engine (plan) file")
    files.add_argument(
        "--calibration-data",
        type=Path,
        metavar="PATH",
        help="calibration dataset: a file, or a directory (hashed as a trtguard-tree-v1 tree)",
    )
    files.add_argument("--calibration-cache", type=Path, metavar="FILE", help="INT8 calibration cache")
    files.add_argument(
        "--onnx-signature",
        type=Path,
        metavar="SIG",
        help="the ONNX model's OpenSSF Model Signing signature (model.sig): recorded as onnx.signature, "
        "it must list a file of the model's SHA-256",
    )
    _settings_options(parser)
    parser.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="hashing threads (default: the number of CPUs, at most 8)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress lines while hashing")
    _output_options(parser)
    _signing_options(parser)
    parser.set_defaults(handler=_create)


def _signing_options(parser: argparse.ArgumentParser) -> None:
    signing = parser.add_argument_group("signing (instead of `trtguard attest` afterwards)")
    signing.add_argument(
        "--key", type=Path, metavar="KEY", help="sign the statement with this key and write the DSSE envelope"
    )
    signing.add_argument("--push", metavar="REF", help="with --key: also attach it to this engine artifact")
    add_registry_arguments(parser)
    add_password_arguments(parser)


def _register_diff(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_subcommand(
        commands,
        "diff",
        help="list and classify the changes between two build manifests",
        description="Compare two build manifests (bare predicate, in-toto Statement, or DSSE envelope; "
        "signatures are not verified) and classify the changes (FirstInt8, TensorRTMajorUpgrade, "
        "DynamicShapeChange, AccuracyDrop, …). Exit status 0 whether or not anything changed; "
        "2 for bad input.",
    )
    parser.add_argument("old", type=Path, metavar="OLD")
    parser.add_argument("new", type=Path, metavar="NEW")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument(
        "--accuracy-tolerance",
        type=float,
        default=0.0,
        metavar="X",
        help="worsening of a metric (in its own unit) that is not yet an AccuracyDrop (default: 0)",
    )
    parser.set_defaults(handler=_diff)


def _import(args: argparse.Namespace) -> int:
    if (args.signature is None) != (not args.openpgp_key):
        raise InputError(
            "--signature and --openpgp-key go together",
            hint="give the record's .asc signature and the public key(s) that may have made it",
        )
    _check_outputs(args, report=args.report)
    signature = None
    # Read once: the signature is checked over, and the manifest made from, these very bytes.
    data = read_limited(args.record, "the flat record")
    if args.signature is not None:
        signature = verify_record_signature(data, args.signature, args.openpgp_key, now=args.now)
        print(f"manifest import: {signature.line()}", file=sys.stderr)
    record = parse_json(data, args.record, "flat record")
    engine = None
    if args.engine is not None:
        try:
            engine = (args.engine.name, hash_file(args.engine))
        except OSError as error:
            raise InputError(
                f"cannot read the engine file: {error.strerror}", location=str(args.engine)
            ) from error
    draft = import_flat(record, settings=_settings(args), engine=engine)
    if signature is not None and signature.reason is not None:
        _print_notes(draft, "manifest import", sys.stderr)
        status = 1
    elif draft.manifest is None and not args.allow_incomplete:
        _print_notes(draft, "manifest import", sys.stderr)
        print(
            "manifest import: supply the values listed above, or pass --allow-incomplete to write a draft "
            "with null placeholders to complete by hand",
            file=sys.stderr,
        )
        status = 3
    else:
        status = _emit(draft, args, "manifest import")
    complete = "complete" if draft.manifest is not None else f"INCOMPLETE: {len(draft.missing)} field(s)"
    written = status == 0
    print(
        f"manifest import: signature: {signature_state(signature)}; record: {complete}; "
        f"{'written' if written else 'nothing written'} (exit {status}: {IMPORT_EXIT[status]})",
        file=sys.stderr,
    )
    if args.report is not None:
        report = json.dumps(import_report(args, signature, draft, status), indent=2) + "\n"
        write_output(args.report, report.encode("utf-8"), "the report")
    return status


def _create(args: argparse.Namespace) -> int:
    # Measured on 16 cores (bench/manifest.py): 8 threads hash page-cached files 5.4x faster than one.
    jobs = args.jobs if args.jobs is not None else min(8, os.cpu_count() or 1)
    if jobs < 1:
        raise InputError("--jobs must be at least 1", location="--jobs")
    _check_outputs(args)  # before the engine and the model are hashed
    settings = _settings(args)
    inputs = CreateInputs(
        onnx=args.onnx,
        engine=args.engine,
        calibration_data=args.calibration_data,
        calibration_cache=args.calibration_cache,
        onnx_signature=args.onnx_signature,
    )
    environment = Environment(
        environ=dict(os.environ),
        distributions=tuple(
            Distribution(dist.metadata["Name"] or "", dist.version)
            for dist in importlib.metadata.distributions()
        ),
        nvidia_smi=shutil.which("nvidia-smi"),
        nvidia_smi_timeout=_NVIDIA_SMI_TIMEOUT,
        now=datetime.now(UTC),
    )
    progress = None if args.no_progress else sys.stderr
    try:
        draft = create_manifest(inputs, settings, environment, workers=jobs, progress_stream=progress)
    except (InvalidOnnxModel, InvalidCalibrationCache) as error:
        # Failed verifications when an engine is checked against them; here they are the user's files.
        raise InputError(error.message, location=error.location, hint=error.hint) from error
    return _emit(draft, args, "manifest create")


def _settings(args: argparse.Namespace) -> ManifestSettings:
    """Merge the --config file, the builder-config and accuracy files and the flags (flags win)."""
    values: dict[str, Any] = {}
    source = "command line"
    if args.config is not None:
        values = read_yaml_as(args.config, "config file", dict, "a mapping of settings")
        source = str(args.config)
    if args.builder_config is not None:
        values["builder_config"] = read_yaml_as(
            args.builder_config,
            "builder config",
            dict,
            "a mapping of builder_config fields",
            hint="see `trtguard schema manifest`, $defs.BuilderConfig",
        )
    if args.accuracy is not None:
        values["accuracy"] = read_yaml_as(
            args.accuracy,
            "accuracy file",
            list,
            "a list of {metric, value, dataset: {name, sha256}}",
            hint="one entry per metric, with the dataset it was measured on",
            key="accuracy",
        )
    flags = {
        "toolchain_image": args.toolchain_image,
        "audit_id": args.audit_id,
        "engine_name": args.engine_name,
        "onnx_uri": args.onnx_uri,
        "build_timestamp": args.build_timestamp,
        "previous_manifest_digest": args.previous_manifest_digest,
        "previous_engine": args.previous_engine,
        "tensorrt_version": args.tensorrt_version,
        "cuda_version": args.cuda_version,
        "cudnn_version": args.cudnn_version,
        "gpu_name": args.gpu_name,
        "compute_capability": args.compute_capability,
        "driver_version": args.driver_version,
    }
    values.update({key: value for key, value in flags.items() if value is not None})
    if args.previous_manifest is not None:
        try:
            data = args.previous_manifest.read_bytes()
        except OSError as error:
            raise InputError(
                f"cannot read the previous manifest: {error.strerror}", location=str(args.previous_manifest)
            ) from error
        envelope = Envelope.from_json(data, location=str(args.previous_manifest))
        values["previous_manifest_digest"] = manifest_digest(envelope)
    if (args.calibration_start is None) != (args.calibration_end is None):
        raise InputError(
            "--calibration-start and --calibration-end go together",
            location="--calibration-end" if args.calibration_end is None else "--calibration-start",
            hint="give both ends of the time range the samples come from",
        )
    calibration_flags = {
        "sampling": args.calibration_sampling,
        "time_range": {"start": args.calibration_start, "end": args.calibration_end}
        if args.calibration_start is not None
        else None,
    }
    given = {key: value for key, value in calibration_flags.items() if value is not None}
    if given:
        described = values.get("calibration")
        values["calibration"] = {**(described if isinstance(described, dict) else {}), **given}
    try:
        return ManifestSettings.model_validate(values)
    except ValidationError as error:
        raise input_error_from_validation(
            error, source, what="manifest settings", model=ManifestSettings
        ) from None


def _emit(draft: Draft, args: argparse.Namespace, command: str) -> int:
    _print_notes(draft, command, sys.stderr)
    if draft.manifest is None:
        missing = len(draft.missing)
        if not args.allow_incomplete:
            raise InputError(
                f"the manifest is incomplete: {missing} field(s) missing or invalid (listed above); "
                "nothing written",
                location=command,
                hint="supply the values listed above, or pass --allow-incomplete to write a draft with null "
                "placeholders to complete by hand",
            )
        # YAML settings may carry datetimes; the draft writes them the way the manifest would.
        _write(
            json.dumps(draft.document, indent=2, ensure_ascii=False, default=_json_value) + "\n", args.output
        )
        print(
            f"{command}: wrote an INCOMPLETE draft predicate: {missing} field(s) to complete before it "
            "validates or can be attested",
            file=sys.stderr,
        )
        return 0
    engine = draft.manifest.output_engine
    if args.key is not None:
        if args.predicate_only:
            raise InputError("--key signs the statement; it does not go with --predicate-only")
        write_envelope(
            sign_statement(manifest_statement(draft.manifest), load_signing_key(args.key, args)), args
        )
        print(
            f"{command}: signed the build manifest for {engine.name} (sha256:{engine.sha256})",
            file=sys.stderr,
        )
        return 0
    if args.push is not None:
        raise InputError("--push attaches a signed manifest", hint="add --key")
    _write(_render(draft.manifest, predicate_only=args.predicate_only), args.output)
    what = "predicate" if args.predicate_only else "in-toto Statement"
    where = f" to {args.output}" if args.output is not None else ""
    print(f"{command}: wrote the {what} for {engine.name} (sha256:{engine.sha256}){where}", file=sys.stderr)
    return 0


def _json_value(value: object) -> str:
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")


def _render(manifest: EngineBuildManifest, *, predicate_only: bool) -> str:
    if predicate_only:
        document = manifest.model_dump(mode="json")
    else:
        document = json.loads(manifest_statement(manifest).to_json())
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _print_notes(draft: Draft, command: str, stream: TextIO) -> None:
    missing = draft.missing
    others = [note for note in draft.notes if not note.blocking]
    if missing:
        print(f"{command}: missing or invalid ({len(missing)}):", file=stream)
        for note in missing:
            print(f"  {note.field}: {note.message}", file=stream)
    if others:
        print(f"{command}: notes ({len(others)}):", file=stream)
        for note in others:
            print(f"  {note.field}: {note.message}", file=stream)


def _check_outputs(args: argparse.Namespace, *, report: Path | None = None) -> None:
    """Refuse an output path that cannot be written before anything is read or hashed."""
    if args.output is not None:
        check_output(args.output, "the output")
    if report is not None:
        check_output(report, "the report")


def _write(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    write_output(output, text.encode("utf-8"), "the output")


def _diff(args: argparse.Namespace) -> int:
    if not (math.isfinite(args.accuracy_tolerance) and args.accuracy_tolerance >= 0):
        raise InputError(
            f"--accuracy-tolerance must be a finite number, 0 or more, not {args.accuracy_tolerance}",
            location="--accuracy-tolerance",
        )
    old, old_enveloped = read_manifest_file(args.old)
    new, new_enveloped = read_manifest_file(args.new)
    result = diff_manifests(old, new, accuracy_tolerance=args.accuracy_tolerance)
    if args.format == "json":
        document = {"old": str(args.old), "new": str(args.new), **result.to_json()}
        sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(_diff_text(result, str(args.old), str(args.new)))
    if old_enveloped or new_enveloped:
        print(
            "manifest diff: DSSE signatures were not verified (use trtguard verify-attestation)",
            file=sys.stderr,
        )
    return 0


def _diff_text(result: ManifestDiff, old: str, new: str) -> str:
    if not result:
        return f"{old} → {new}: no differences\n"
    lines = [
        f"{old} → {new}: {len(result.changes)} classified change(s), {len(result.fields)} field(s) differ"
    ]
    if result.changes:
        width = max(len(change.kind.value) for change in result.changes)
        lines.append("changes:")
        lines += [f"  {change.kind.value:<{width}}  {change.summary}" for change in result.changes]
    lines.append("fields:")
    for change in result.fields:
        before, after = json.dumps(change.old, ensure_ascii=False), json.dumps(change.new, ensure_ascii=False)
        lines.append(f"  {change.path}: {before} → {after}")
    return "\n".join(lines) + "\n"

"""Comparisons of what was read from the files (and the GPU) with what the signed manifest declares.

Each function returns :class:`~verifier.engine.report.Check` objects and never raises for a mismatch. When
there is no usable manifest, the manifest-dependent checks are skipped with the reason the caller gives
(no ``--manifest``, a signature that did not verify, an invalid predicate).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from verifier.engine.calibration import CalibrationCacheFile
from verifier.engine.dtypes import precision_of
from verifier.engine.header import PlanHeader, PlanMagic
from verifier.engine.inspector import LayerPrecisions
from verifier.engine.onnx_model import OnnxModelInfo
from verifier.engine.report import Check, failed, passed, skipped
from verifier.engine.runtime import LEAN_MODULES, EngineFacts, EngineProfile, GpuOutcome, GpuRun
from verifier.manifest import EngineBuildManifest, parse_tensorrt_version

#: The oldest TensorRT whose plans carry the "ftrt" container with version bytes.
_FTRT_SINCE = (8, 6)


def _version_text(parts: Sequence[int]) -> str:
    return ".".join(str(part) for part in parts)


# --- the engine file --------------------------------------------------------------------------------------


def engine_file_checks(
    sha256: str, size: int, manifest: EngineBuildManifest | None, unavailable: str
) -> list[Check]:
    """The file's SHA-256 and size against ``output_engine`` (which is also the Statement's subject)."""
    if manifest is None:
        return [skipped("output_engine.sha256", unavailable), skipped("output_engine.size", unavailable)]
    declared = manifest.output_engine
    checks = []
    if declared.sha256 == sha256:
        checks.append(passed("output_engine.sha256", "the file's SHA-256 matches", declared.sha256, sha256))
    else:
        checks.append(
            failed(
                "output_engine.sha256",
                "the file's SHA-256 differs from the manifest's: this is not the engine that was built",
                declared.sha256,
                sha256,
            )
        )
    if declared.size == size:
        checks.append(passed("output_engine.size", f"{size} bytes, as declared", declared.size, size))
    else:
        checks.append(
            failed(
                "output_engine.size",
                f"the file has {size} bytes, the manifest declares {declared.size}",
                declared.size,
                size,
            )
        )
    return checks


def plan_checks(header: PlanHeader, size: int) -> list[Check]:
    """Is it a plan at all, and does its size field match the file?"""
    expected_tags = [magic.value for magic in PlanMagic]
    if header.magic is None:
        return [
            failed(
                "plan.format", header.format_problem or "unknown format", expected_tags, header.first_bytes
            ),
            skipped("plan.size", "the file is not a TensorRT plan (see plan.format)"),
        ]
    checks = [
        failed("plan.format", header.format_problem, expected_tags, header.magic.value)
        if header.format_problem
        else passed("plan.format", header.description, expected_tags, header.magic.value)
    ]
    if header.size_problem:
        checks.append(failed("plan.size", header.size_problem, header.declared_size, size))
    else:
        checks.append(
            passed("plan.size", "the header's size field matches the file length", header.declared_size, size)
        )
    return checks


def plan_version_check(header: PlanHeader, manifest: EngineBuildManifest | None, unavailable: str) -> Check:
    """The TensorRT version in the plan header against ``toolchain.tensorrt_version``."""
    name = "toolchain.tensorrt_version"
    if manifest is None:
        return skipped(name, unavailable)
    declared_text = manifest.toolchain.tensorrt_version
    declared = parse_tensorrt_version(declared_text)
    if header.magic is None:
        return skipped(name, "the file is not a TensorRT plan (see plan.format)", declared_text)
    if header.magic is PlanMagic.PTRT:
        if declared[:2] >= _FTRT_SINCE:
            return failed(
                name,
                f"the manifest says TensorRT {declared_text}, whose plans start with 'ftrt', but this file "
                "has the bare 'ptrt' layout of TensorRT < 8.6 plans and timing caches",
                declared_text,
                f"ptrt (serialization {header.serialization_version})",
            )
        return skipped(
            name,
            "plans older than TensorRT 8.6 do not record the TensorRT version "
            f"(serialization number {header.serialization_version}, informational)",
            declared_text,
        )
    observed = header.version_tuple
    if observed is None:
        return failed(name, "the plan header's version bytes could not be read", declared_text, None)
    if observed[: len(declared)] == declared:
        return passed(
            name,
            f"the plan was written by TensorRT {header.tensorrt_version}",
            declared_text,
            header.tensorrt_version,
        )
    return failed(
        name,
        f"the plan was written by TensorRT {header.tensorrt_version}, the manifest says {declared_text}",
        declared_text,
        header.tensorrt_version,
    )


# --- calibration cache ------------------------------------------------------------------------------------


def calibration_checks(
    cache: CalibrationCacheFile | None,
    problem: str | None,
    manifest: EngineBuildManifest | None,
    unavailable: str,
) -> list[Check]:
    """A calibration cache given with ``--calibration-cache`` (``cache`` parsed, or ``problem`` saying
    why it did not parse), against ``calibration.cache``; ``cache`` and ``problem`` both ``None`` means
    no cache was given."""
    declared = manifest.calibration.cache if manifest and manifest.calibration else None
    if cache is None and problem is None:
        if declared is None:
            return []
        return [
            skipped(
                "calibration.cache.sha256",
                "the manifest binds a calibration cache; give it with --calibration-cache to check it",
                declared.sha256,
            )
        ]
    if cache is None:
        return [failed("calibration_cache.format", problem or "", "TRT-<version>-<algorithm>", None)]
    checks = [
        passed(
            "calibration_cache.format",
            f"{cache.header}: {len(cache.scales)} tensors, each with one finite positive scale; "
            f"version {cache.version_number} = TensorRT {cache.tensorrt_version} ({cache.version_encoding} "
            "encoding)",
            None,
            cache.header,
        )
    ]
    if manifest is None:
        checks.append(skipped("calibration.cache.sha256", unavailable))
        return checks
    if declared is None:
        checks.append(
            failed(
                "calibration.cache.sha256",
                "a calibration cache was given but the manifest records none"
                + (
                    " (a strongly typed build uses no calibrator)"
                    if manifest.builder_config.typing == "strong"
                    else ""
                ),
                None,
                cache.sha256,
            )
        )
        return checks
    if declared.sha256 == cache.sha256:
        checks.append(
            passed("calibration.cache.sha256", "the cache's SHA-256 matches", declared.sha256, cache.sha256)
        )
    else:
        checks.append(
            failed(
                "calibration.cache.sha256",
                "the cache's SHA-256 differs from the manifest's: this is not the cache the build used",
                declared.sha256,
                cache.sha256,
            )
        )
    if declared.algorithm is None:
        checks.append(skipped("calibration.cache.algorithm", "the manifest does not name the algorithm"))
    elif declared.algorithm == cache.algorithm:
        checks.append(
            passed("calibration.cache.algorithm", cache.algorithm, declared.algorithm, cache.algorithm)
        )
    else:
        checks.append(
            failed(
                "calibration.cache.algorithm",
                f"the cache was written by {cache.algorithm}, the manifest says {declared.algorithm}",
                declared.algorithm,
                cache.algorithm,
            )
        )
    toolchain = parse_tensorrt_version(manifest.toolchain.tensorrt_version)[:3]
    observed = tuple(int(part) for part in cache.tensorrt_version.split("."))
    if observed[: len(toolchain)] == toolchain:
        checks.append(
            passed(
                "calibration_cache.tensorrt_version",
                f"the cache was written by TensorRT {cache.tensorrt_version}",
                _version_text(toolchain),
                cache.tensorrt_version,
            )
        )
    else:
        checks.append(
            failed(
                "calibration_cache.tensorrt_version",
                f"the cache header says TensorRT {cache.tensorrt_version} ({cache.header}), the manifest's "
                f"toolchain is TensorRT {manifest.toolchain.tensorrt_version}",
                _version_text(toolchain),
                cache.tensorrt_version,
            )
        )
    return checks


# --- ONNX model -------------------------------------------------------------------------------------------


def _profile_json(manifest: EngineBuildManifest) -> list[dict[str, Any]]:
    return [profile.model_dump(mode="json") for profile in manifest.builder_config.optimization_profiles]


def _onnx_input_problems(model: OnnxModelInfo, manifest: EngineBuildManifest) -> list[str]:
    problems: list[str] = []
    profiles = manifest.builder_config.optimization_profiles
    dynamic = [tensor.name for tensor in model.inputs if tensor.is_dynamic]
    if dynamic and not profiles:
        problems.append(
            f"the model's inputs {dynamic} have dynamic dimensions but the manifest declares no "
            "optimization profile"
        )
    for index, profile in enumerate(profiles):
        for name in dynamic:
            if name not in profile.inputs:
                problems.append(f"profile {index} gives no shape range for the dynamic input {name!r}")
        for name, ranges in profile.inputs.items():
            tensor = model.input(name)
            if tensor is None:
                problems.append(f"profile {index} names {name!r}, which is not an input of the model")
                continue
            if tensor.shape is None:
                continue
            if len(ranges.min) != len(tensor.shape):
                problems.append(
                    f"profile {index} gives {name!r} rank {len(ranges.min)}, the model's input has rank "
                    f"{len(tensor.shape)}"
                )
                continue
            for axis, dim in enumerate(tensor.shape):
                if not isinstance(dim, int):
                    continue
                span = (ranges.min[axis], ranges.opt[axis], ranges.max[axis])
                if span != (dim, dim, dim):
                    problems.append(
                        f"dimension {axis} of {name!r} is fixed at {dim} in the model, profile {index} gives "
                        f"min/opt/max {span[0]}/{span[1]}/{span[2]}"
                    )
    return problems


def _onnx_precision_check(model: OnnxModelInfo, manifest: EngineBuildManifest) -> Check:
    config = manifest.builder_config
    carried = sorted(model.precisions)
    allowed = manifest.precisions()
    undeclared = sorted(model.precisions - allowed)
    if config.typing == "strong":
        declared = sorted(set(config.network_precisions) | {"fp32"})
        if undeclared:
            return failed(
                "builder_config.network_precisions",
                f"the model carries {undeclared}, which network_precisions does not list",
                declared,
                carried,
            )
        unseen = sorted(set(config.network_precisions) - model.precisions - {"tf32"})
        note = f"; network_precisions also lists {unseen}, not found in the model's tensors" if unseen else ""
        return passed(
            "builder_config.network_precisions",
            f"every precision the model carries is declared{note}",
            declared,
            carried,
        )
    declared = sorted(allowed)
    if undeclared:
        return failed(
            "onnx.precisions",
            f"the model itself carries {undeclared}, which the build's precisions {declared} do not include",
            declared,
            carried,
        )
    return passed("onnx.precisions", "the model carries only declared precisions", declared, carried)


def onnx_checks(
    model: OnnxModelInfo | None,
    problem: str | None,
    manifest: EngineBuildManifest | None,
    unavailable: str,
) -> list[Check]:
    """An ONNX model given with ``--onnx`` against ``onnx`` and the optimization profiles."""
    if model is None and problem is None:
        if manifest is None:
            return []
        return [
            skipped(
                "onnx.sha256",
                "give the model with --onnx to check its hash, inputs and precisions",
                manifest.onnx.sha256,
            )
        ]
    if model is None:
        return [failed("onnx.format", problem or "", "an ONNX model", None)]
    checks = [
        passed(
            "onnx.format",
            f"ONNX IR {model.ir_version}, opset {model.opset}, {len(model.inputs)} inputs, "
            f"{len(model.outputs)} outputs",
        )
    ]
    if manifest is None:
        checks.append(skipped("onnx.sha256", unavailable))
        return checks
    declared = manifest.onnx
    if declared.sha256 == model.sha256:
        checks.append(passed("onnx.sha256", "the model's SHA-256 matches", declared.sha256, model.sha256))
    else:
        checks.append(
            failed(
                "onnx.sha256",
                "the model's SHA-256 differs from the manifest's: this is not the model the engine was "
                "built from",
                declared.sha256,
                model.sha256,
            )
        )
    if declared.opset is None:
        checks.append(skipped("onnx.opset", "the manifest does not record the opset"))
    elif declared.opset == model.opset:
        checks.append(passed("onnx.opset", f"opset {model.opset}", declared.opset, model.opset))
    else:
        checks.append(
            failed(
                "onnx.opset",
                f"the model has opset {model.opset}, the manifest says {declared.opset}",
                declared.opset,
                model.opset,
            )
        )
    problems = _onnx_input_problems(model, manifest)
    observed = [tensor.to_json() for tensor in model.inputs]
    if problems:
        checks.append(failed("onnx.inputs", "; ".join(problems), _profile_json(manifest), observed))
    else:
        checks.append(
            passed(
                "onnx.inputs",
                "the optimization profiles cover the model's inputs with matching ranks and fixed dimensions",
                _profile_json(manifest),
                observed,
            )
        )
    checks.append(_onnx_precision_check(model, manifest))
    return checks


# --- on the GPU -------------------------------------------------------------------------------------------


def _observed_profiles(engine: EngineFacts) -> list[dict[str, Any]]:
    return [
        {"inputs": {name: {"min": r.min, "opt": r.opt, "max": r.max} for name, r in profile.inputs.items()}}
        for profile in engine.optimization_profiles
    ]


def _profile_problems(engine: EngineFacts, manifest: EngineBuildManifest) -> list[str]:
    declared = manifest.builder_config.optimization_profiles
    dynamic = [t.name for t in engine.io_tensors if t.mode == "INPUT" and -1 in t.shape]
    if not declared:
        if dynamic:
            return [
                f"the engine has dynamic inputs {dynamic} but the manifest declares no optimization profile"
            ]
        return []
    problems: list[str] = []
    if len(declared) != len(engine.optimization_profiles):
        problems.append(
            f"the engine has {len(engine.optimization_profiles)} optimization profiles, the manifest "
            f"declares {len(declared)}"
        )
    for index, (claim, actual) in enumerate(zip(declared, engine.optimization_profiles, strict=False)):
        problems.extend(_one_profile_problems(index, claim.inputs, actual, dynamic))
    return problems


def _one_profile_problems(
    index: int, claim: dict[str, Any], actual: EngineProfile, dynamic: list[str]
) -> list[str]:
    problems: list[str] = []
    for name in dynamic:
        if name not in claim:
            problems.append(f"profile {index}: the manifest gives no range for the dynamic input {name!r}")
    for name, ranges in claim.items():
        observed = actual.inputs.get(name)
        if observed is None:
            problems.append(f"profile {index}: the engine has no input {name!r}")
            continue
        for which in ("min", "opt", "max"):
            want = getattr(ranges, which)
            got = getattr(observed, which)
            if want != got:
                problems.append(
                    f"profile {index}: {name!r} {which} is {got} in the engine, {want} in the manifest"
                )
    return problems


def _io_tensor_problems(engine: EngineFacts, model: OnnxModelInfo) -> list[str]:
    problems: list[str] = []
    sides = (("INPUT", model.inputs), ("OUTPUT", model.outputs))
    for mode, tensors in sides:
        in_engine = {t.name: t for t in engine.io_tensors if t.mode == mode}
        in_model = {t.name: t for t in tensors}
        word = mode.lower() + "s"
        if set(in_engine) != set(in_model):
            problems.append(f"{word}: the engine has {sorted(in_engine)}, the model {sorted(in_model)}")
        for name in sorted(set(in_engine) & set(in_model)):
            actual, declared = in_engine[name], in_model[name]
            if actual.canonical_dtype != declared.dtype:
                problems.append(
                    f"{name!r} is {actual.canonical_dtype} in the engine, {declared.dtype} in the model"
                )
            if declared.shape is None:
                continue
            if len(actual.shape) != len(declared.shape):
                problems.append(
                    f"{name!r} has rank {len(actual.shape)} in the engine, {len(declared.shape)} in the model"
                )
                continue
            for axis, (got, want) in enumerate(zip(actual.shape, declared.shape, strict=True)):
                if isinstance(want, int) and got != want:
                    problems.append(
                        f"dimension {axis} of {name!r} is {got} in the engine, {want} in the model"
                    )
    return problems


def _gpu_failure_check(run: GpuRun) -> Check:
    if run.outcome is GpuOutcome.DESERIALIZE_FAILED:
        return failed(
            "gpu.deserialize",
            f"TensorRT could not deserialize the engine: {run.message}",
            "an engine",
            run.errors or None,
        )
    if run.outcome in (GpuOutcome.NO_GPU, GpuOutcome.NO_RUNTIME):
        return failed("gpu.deserialize", f"not attempted: {run.message}", "an engine", None)
    return failed("gpu.deserialize", run.message, "an engine", run.outcome.value)


def _verdict(name: str, ok: bool, good: str, bad: str, expected: Any, observed: Any) -> Check:
    return passed(name, good, expected, observed) if ok else failed(name, bad, expected, observed)


def _environment_checks(run: GpuRun) -> list[Check]:
    """Did the child find a GPU and a TensorRT runtime?"""
    checks: list[Check] = []
    report = run.report
    probe = report.gpu if report else None
    if probe is not None:
        checks.append(
            _verdict(
                "gpu.device",
                probe.available,
                f"{probe.name}, compute capability {probe.compute_capability}, driver {probe.driver_version}",
                probe.reason or "no GPU",
                None if probe.available else "a CUDA GPU",
                probe.name,
            )
        )
    runtime = report.runtime if report else None
    if runtime is not None:
        checks.append(passed("gpu.runtime", f"{runtime.module} {runtime.version}", None, runtime.module))
    elif run.outcome is GpuOutcome.NO_RUNTIME:
        checks.append(failed("gpu.runtime", run.message, "tensorrt or tensorrt_lean", None))
    return checks


def _compatibility_checks(run: GpuRun, engine: EngineFacts, manifest: EngineBuildManifest) -> list[Check]:
    """Hardware compatibility, build GPU and version compatibility, as far as the load shows them."""
    config = manifest.builder_config
    declared_level = config.hardware_compatibility_level
    level = (engine.hardware_compatibility_level or "").lower() or None
    if level is None:
        return [
            skipped(
                "builder_config.hardware_compatibility_level",
                "this TensorRT version does not report it",
                declared_level,
            )
        ]
    checks = [
        _verdict(
            "builder_config.hardware_compatibility_level",
            level == declared_level,
            level,
            f"the engine was built with {level}, the manifest says {declared_level}",
            declared_level,
            level,
        )
    ]
    probe = run.report.gpu if run.report else None
    if probe is not None and probe.compute_capability and level == "none":
        declared_cc = manifest.build_node.compute_capability
        checks.append(
            _verdict(
                "build_node.compute_capability",
                declared_cc == probe.compute_capability,
                "the engine (no hardware compatibility) loaded on a GPU of the declared compute capability",
                "an engine without hardware compatibility loads only on the compute capability it was "
                f"built for: it loaded on {probe.compute_capability}, the manifest says {declared_cc}",
                declared_cc,
                probe.compute_capability,
            )
        )
    runtime = run.report.runtime if run.report else None
    if runtime is not None and runtime.module in LEAN_MODULES:
        checks.append(
            _verdict(
                "builder_config.version_compatible",
                config.version_compatible,
                "the lean runtime loads only version-compatible engines, and it loaded this one",
                "the lean runtime loaded the engine, so it is version-compatible; the manifest says "
                "it is not",
                config.version_compatible,
                True,
            )
        )
    return checks


def _precision_checks(
    engine: EngineFacts,
    manifest: EngineBuildManifest,
    layers: LayerPrecisions | None,
    layers_unavailable: str | None,
) -> list[Check]:
    """The I/O tensors' and (where the inspector shows them) the layers' precisions against the manifest."""
    allowed = sorted(manifest.precisions())
    io_precisions = sorted({p for p in (precision_of(t.canonical_dtype) for t in engine.io_tensors) if p})
    extra = sorted(set(io_precisions) - set(allowed))
    checks = [
        _verdict(
            "builder_config.io_precisions",
            not extra,
            "the I/O tensors use declared precisions only",
            f"I/O tensors use {extra}, which the manifest does not declare",
            allowed,
            io_precisions,
        )
    ]
    name = "builder_config.layer_precisions"
    if layers is None:
        checks.append(skipped(name, layers_unavailable or "no layer information", allowed))
    elif not layers.detailed:
        checks.append(
            skipped(
                name,
                "the engine was not built with ProfilingVerbosity.DETAILED, so its layers carry no precision",
                allowed,
            )
        )
    else:
        extra = sorted(layers.precisions - set(allowed))
        checks.append(
            _verdict(
                name,
                not extra,
                f"{layers.layers} layers, all in declared precisions",
                f"layers compute in {extra}, which the manifest does not declare",
                allowed,
                layers.per_precision,
            )
        )
    return checks


def _unrecorded_check(manifest: EngineBuildManifest) -> list[Check]:
    config = manifest.builder_config
    declared = {
        "max_workspace_size": config.max_workspace_size is not None,
        # The workspace pool is max_workspace_size under its other name (the manifest fills in both).
        "memory_pool_limits": bool(config.memory_pool_limits.keys() - {"workspace"}),
        "builder_optimization_level": config.builder_optimization_level is not None,
        "plugins": bool(config.plugins),
    }
    unrecorded = [field for field, present in declared.items() if present]
    if not unrecorded:
        return []
    return [
        skipped(
            "builder_config.unrecorded",
            f"a serialized engine does not record {', '.join(unrecorded)}: these claims rest on the "
            "manifest's signature alone",
        )
    ]


def gpu_checks(
    run: GpuRun,
    manifest: EngineBuildManifest,
    model: OnnxModelInfo | None,
    layers: LayerPrecisions | None,
    layers_unavailable: str | None,
) -> list[Check]:
    """What the engine said on the GPU against the manifest (and the ONNX model, when given)."""
    checks = _environment_checks(run)
    engine = run.report.engine if run.report else None
    if run.outcome is not GpuOutcome.OK or engine is None:
        checks.append(_gpu_failure_check(run))
        return checks
    runtime = run.report.runtime if run.report else None
    checks.append(
        passed(
            "gpu.deserialize",
            f"{runtime.module if runtime else 'TensorRT'} deserialized the engine: {len(engine.io_tensors)} "
            f"I/O tensors, {engine.num_layers} layers, {len(engine.optimization_profiles)} profiles",
        )
    )
    problems = _profile_problems(engine, manifest)
    checks.append(
        _verdict(
            "builder_config.optimization_profiles",
            not problems,
            "every declared min/opt/max matches the engine",
            "; ".join(problems),
            _profile_json(manifest),
            _observed_profiles(engine),
        )
    )
    checks += _compatibility_checks(run, engine, manifest)
    if model is None:
        checks.append(
            skipped("onnx.io_tensors", "no --onnx given: the engine's I/O tensors are not compared")
        )
    else:
        io_problems = _io_tensor_problems(engine, model)
        checks.append(
            _verdict(
                "onnx.io_tensors",
                not io_problems,
                "the engine's I/O tensors have the model's names, dtypes and shapes",
                "; ".join(io_problems),
                model.to_json(),
                [
                    {"name": t.name, "mode": t.mode.lower(), "dtype": t.canonical_dtype, "shape": t.shape}
                    for t in engine.io_tensors
                ],
            )
        )
    checks += _precision_checks(engine, manifest, layers, layers_unavailable)
    checks += _unrecorded_check(manifest)
    return checks

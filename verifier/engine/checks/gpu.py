"""What TensorRT reported on deserializing the engine, against the manifest (and the ONNX model, when given):
the GPU and runtime found, optimization profiles, hardware and version compatibility, I/O tensors and
precisions, and the builder settings no engine records."""

from __future__ import annotations

from typing import Any

from verifier.engine._dtypes import precision_of
from verifier.engine._inspector import LayerPrecisions
from verifier.engine._onnx_model import OnnxModelInfo
from verifier.engine._report import Check, compared, failed, passed, skipped, verdict
from verifier.engine._runtime import LEAN_MODULES, EngineFacts, EngineProfile, GpuOutcome, GpuRun
from verifier.engine.checks import declared_profiles
from verifier.manifest import EngineBuildManifest


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
        verdict(
            "builder_config.optimization_profiles",
            not problems,
            "every declared min/opt/max matches the engine",
            "; ".join(problems),
            declared_profiles(manifest),
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
            verdict(
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


def _environment_checks(run: GpuRun) -> list[Check]:
    """Did the child find a GPU and a TensorRT runtime?"""
    checks: list[Check] = []
    report = run.report
    probe = report.gpu if report else None
    if probe is not None:
        checks.append(
            verdict(
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
        compared(
            "builder_config.hardware_compatibility_level",
            declared_level,
            level,
            level,
            f"the engine was built with {level}, the manifest says {declared_level}",
        )
    ]
    probe = run.report.gpu if run.report else None
    if probe is not None and probe.compute_capability and level == "none":
        declared_cc = manifest.build_node.compute_capability
        checks.append(
            compared(
                "build_node.compute_capability",
                declared_cc,
                probe.compute_capability,
                "the engine (no hardware compatibility) loaded on a GPU of the declared compute capability",
                "an engine without hardware compatibility loads only on the compute capability it was "
                f"built for: it loaded on {probe.compute_capability}, the manifest says {declared_cc}",
            )
        )
    runtime = run.report.runtime if run.report else None
    if runtime is not None and runtime.module in LEAN_MODULES:
        checks.append(
            verdict(
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
        verdict(
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
            verdict(
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

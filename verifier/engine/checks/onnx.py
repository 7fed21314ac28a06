"""An ONNX model given with ``--onnx`` against the manifest: hash, opset, inputs against the optimization
profiles, and the precisions the model carries."""

from __future__ import annotations

from verifier.engine._onnx_model import OnnxModelInfo
from verifier.engine._report import Check, compared, failed, not_read, passed, sha256_matches, skipped
from verifier.engine.checks import declared_profiles
from verifier.manifest import EngineBuildManifest


def onnx_checks(
    model: OnnxModelInfo | None,
    problem: str | None,
    manifest: EngineBuildManifest | None,
    unavailable: str,
) -> list[Check]:
    """An ONNX model given with ``--onnx`` against ``onnx`` and the optimization profiles."""
    if model is None:
        ask = "give the model with --onnx to check its hash, inputs and precisions"
        unchecked = None if manifest is None else skipped("onnx.sha256", ask, manifest.onnx.sha256)
        return not_read(problem, "onnx.format", "an ONNX model", unchecked)
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
    checks.append(
        sha256_matches(
            "onnx.sha256",
            "model",
            declared.sha256,
            model.sha256,
            "this is not the model the engine was built from",
        )
    )
    checks.append(
        compared(
            "onnx.opset",
            declared.opset,
            model.opset,
            f"opset {model.opset}",
            f"the model has opset {model.opset}, the manifest says {declared.opset}",
            unrecorded="the manifest does not record the opset",
        )
    )
    problems = _onnx_input_problems(model, manifest)
    observed = [tensor.to_json() for tensor in model.inputs]
    if problems:
        checks.append(failed("onnx.inputs", "; ".join(problems), declared_profiles(manifest), observed))
    else:
        checks.append(
            passed(
                "onnx.inputs",
                "the optimization profiles cover the model's inputs with matching ranks and fixed dimensions",
                declared_profiles(manifest),
                observed,
            )
        )
    checks.append(_onnx_precision_check(model, manifest))
    return checks


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

"""What changed between two engine builds, and which kinds of change that is.

:func:`diff_manifests` compares two build manifests field by field and classifies the differences into
:class:`ChangeKind` values (``FirstInt8``, ``TensorRTMajorUpgrade``, ``AccuracyDrop``, …). Change control
gates deployments on these kinds, approvals name them, and ``trtguard audit history`` shows them, so the
classification rules below are part of the contract:

==============================  ==========================================================================
kind                            when
==============================  ==========================================================================
FirstInt8                       the new build uses INT8 (flag or network precision) and the old one did not
PrecisionChange                 :meth:`~verifier.manifest.EngineBuildManifest.precisions` differ
TypingChange                    ``builder_config.typing`` differs (weak ↔ strong)
TensorRTMajorUpgrade            the TensorRT major version went up
TensorRTMinorUpgrade            same major, higher minor, patch or build
TensorRTDowngrade               the TensorRT version went down
CudaVersionChange               ``toolchain.cuda_version`` differs
CudnnVersionChange              ``toolchain.cudnn_version`` differs
ToolchainImageChange            the builder image's repository or digest differs (a tag alone does not count)
BuildGpuChange                  the build GPU's name or compute capability differs (not the driver)
OnnxModelChange                 ``onnx.sha256`` differs
CalibrationDataChange           anything under ``calibration`` differs (data, cache, sampling, time range)
DynamicShapeChange              ``builder_config.optimization_profiles`` differ
BatchSizeChange                 ``max_batch_size`` differs, or the largest dimension 0 of any profile's
                                ``max`` shape differs (dimension 0 is taken to be the batch)
WorkspaceChange                 ``max_workspace_size`` or ``memory_pool_limits`` differ
HardwareCompatibilityChange     hardware compatibility level, version compatibility or lean exclusion differs
OptimizationLevelChange         ``builder_optimization_level`` differs
PluginChange                    the plugins (name, version, library digest) differ
AccuracyDrop                    a metric measured on the same dataset got worse by more than the tolerance
                                (in the direction the old manifest's ``higher_is_better`` gives)
AccuracyMetricRemoved           a metric of the old build is missing from the new one
AccuracyDatasetChange           a metric was measured on a different dataset (values not comparable)
==============================  ==========================================================================

Every differing field is also listed as a :class:`FieldChange`, classified or not (timestamps, audit ID,
engine digest, …).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, NamedTuple

from verifier.base import ImageReference, format_path, shorten
from verifier.manifest import BuilderConfig, EngineBuildManifest, OptimizationProfile
from verifier.predicates import ChangeKind

__all__ = ["Change", "ChangeKind", "FieldChange", "ManifestDiff", "diff_manifests"]

# Lists whose items are matched by a natural key rather than by position.
_KEYED_LISTS: Mapping[tuple[str, ...], str] = {("builder_config", "plugins"): "name", ("accuracy",): "metric"}


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One leaf field that differs; ``old``/``new`` are JSON values, None where absent or null."""

    path: str
    old: Any
    new: Any

    def to_json(self) -> dict[str, Any]:
        """``{"path", "old", "new"}``."""
        return {"path": self.path, "old": self.old, "new": self.new}


@dataclass(frozen=True, slots=True)
class Change:
    """One classified change.

    ``old``/``new`` are the compared values (JSON). ``amount`` is the size of the change where it has one:
    the drop of an ``AccuracyDrop`` (always positive, in the metric's unit), the difference in bytes of a
    ``WorkspaceChange``.
    """

    kind: ChangeKind
    summary: str
    paths: tuple[str, ...]
    old: Any = None
    new: Any = None
    amount: float | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON object with every attribute."""
        return {
            "kind": self.kind.value,
            "summary": self.summary,
            "paths": list(self.paths),
            "old": self.old,
            "new": self.new,
            "amount": self.amount,
        }


@dataclass(frozen=True, slots=True)
class ManifestDiff:
    """The differences between two manifests: classified changes and every differing field."""

    changes: tuple[Change, ...]
    fields: tuple[FieldChange, ...]

    @property
    def kinds(self) -> frozenset[ChangeKind]:
        """The kinds of change found."""
        return frozenset(change.kind for change in self.changes)

    def __bool__(self) -> bool:
        return bool(self.fields)

    def to_json(self) -> dict[str, Any]:
        """``{"changes": [...], "fields": [...]}``."""
        return {
            "changes": [change.to_json() for change in self.changes],
            "fields": [change.to_json() for change in self.fields],
        }


def diff_manifests(
    old: EngineBuildManifest, new: EngineBuildManifest, *, accuracy_tolerance: float = 0.0
) -> ManifestDiff:
    """Compare ``old`` with ``new``; see the module docstring for the classification rules.

    ``accuracy_tolerance`` is the largest worsening of a metric (in the metric's own unit) that is not yet an
    ``AccuracyDrop``.
    """
    if accuracy_tolerance < 0 or not math.isfinite(accuracy_tolerance):
        raise ValueError("accuracy_tolerance must be a finite number >= 0")
    fields = tuple(_field_changes(old.model_dump(mode="json"), new.model_dump(mode="json")))
    changes = (
        *_precision(old, new),
        *_toolchain(old, new),
        *_build_node(old, new),
        *_inputs(old, new),
        *_builder(old, new),
        *_accuracy(old, new, accuracy_tolerance),
    )
    return ManifestDiff(changes=tuple(changes), fields=fields)


def _field_changes(old: Any, new: Any) -> list[FieldChange]:
    old_leaves: dict[_Path, Any] = {}
    new_leaves: dict[_Path, Any] = {}
    _leaves(old, (), old_leaves)
    _leaves(new, (), new_leaves)
    paths = list(old_leaves) + [path for path in new_leaves if path not in old_leaves]
    return [
        FieldChange(path=_path_text(path), old=old_leaves.get(path), new=new_leaves.get(path))
        for path in paths
        if old_leaves.get(path) != new_leaves.get(path)
    ]


class _ByKey(NamedTuple):
    """A list item addressed by its natural key: rendered ``[metric=top1_acc]``."""

    field: str
    value: str


_Path = tuple[str | int | _ByKey, ...]


def _path_text(path: _Path) -> str:
    text = ""
    for part in path:
        if isinstance(part, _ByKey):
            text += f"[{part.field}={part.value}]"
        else:
            piece = format_path((part,))
            text += piece if piece.startswith("[") or not text else f".{piece}"
    return text


def _leaves(value: Any, path: _Path, out: dict[_Path, Any]) -> None:
    """Collect leaf values by path into ``out``. Lists of objects are walked (by key where one is defined);
    other lists are leaves."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _leaves(item, (*path, key), out)
    elif isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        key_name = _KEYED_LISTS.get(tuple(str(part) for part in path if isinstance(part, str)))
        for index, item in enumerate(value):
            part: int | _ByKey = _ByKey(key_name, str(item[key_name])) if key_name else index
            _leaves(item, (*path, part), out)
    else:
        out[path] = value


def _precision(old: EngineBuildManifest, new: EngineBuildManifest) -> Iterator[Change]:
    before, after = old.precisions(), new.precisions()
    paths = ("builder_config.precision_flags", "builder_config.network_precisions")
    if not old.uses_int8() and new.uses_int8():
        yield Change(
            ChangeKind.FIRST_INT8,
            "the new build uses INT8; the old one did not",
            paths,
            sorted(before),
            sorted(after),
        )
    if before != after:
        added, removed = sorted(after - before), sorted(before - after)
        parts = [f"added {', '.join(added)}"] if added else []
        parts += [f"removed {', '.join(removed)}"] if removed else []
        yield Change(
            ChangeKind.PRECISION_CHANGE,
            f"precisions: {'; '.join(parts)}",
            paths,
            sorted(before),
            sorted(after),
        )
    yield from _field(ChangeKind.TYPING_CHANGE, "typing", "builder_config.typing", old, new)


def _toolchain(old: EngineBuildManifest, new: EngineBuildManifest) -> Iterator[Change]:
    before, after = old.toolchain, new.toolchain
    # "10.5" and "10.5.0.0" name the same release.
    old_release, new_release = _padded(before.tensorrt_release), _padded(after.tensorrt_release)
    if old_release != new_release:
        if new_release < old_release:
            kind = ChangeKind.TENSORRT_DOWNGRADE
        elif new_release[0] > old_release[0]:
            kind = ChangeKind.TENSORRT_MAJOR_UPGRADE
        else:
            kind = ChangeKind.TENSORRT_MINOR_UPGRADE
        yield _simple(
            kind, "TensorRT", "toolchain.tensorrt_version", before.tensorrt_version, after.tensorrt_version
        )
    yield from _field(ChangeKind.CUDA_VERSION_CHANGE, "CUDA", "toolchain.cuda_version", old, new)
    yield from _field(ChangeKind.CUDNN_VERSION_CHANGE, "cuDNN", "toolchain.cudnn_version", old, new)
    old_image, new_image = ImageReference.parse(before.image), ImageReference.parse(after.image)
    if (old_image.name, old_image.digest) != (new_image.name, new_image.digest):
        yield _simple(
            ChangeKind.TOOLCHAIN_IMAGE_CHANGE, "builder image", "toolchain.image", before.image, after.image
        )


def _build_node(old: EngineBuildManifest, new: EngineBuildManifest) -> Iterator[Change]:
    before, after = old.build_node, new.build_node
    if (before.gpu_name, before.compute_capability) != (after.gpu_name, after.compute_capability):
        yield Change(
            ChangeKind.BUILD_GPU_CHANGE,
            f"build GPU: {before.gpu_name} (compute {before.compute_capability}) → "
            f"{after.gpu_name} (compute {after.compute_capability})",
            ("build_node.gpu_name", "build_node.compute_capability"),
            {"gpu_name": before.gpu_name, "compute_capability": before.compute_capability},
            {"gpu_name": after.gpu_name, "compute_capability": after.compute_capability},
        )


def _inputs(old: EngineBuildManifest, new: EngineBuildManifest) -> Iterator[Change]:
    yield from _field(ChangeKind.ONNX_MODEL_CHANGE, "ONNX model", "onnx.sha256", old, new)
    before = old.calibration.model_dump(mode="json") if old.calibration else {}
    after = new.calibration.model_dump(mode="json") if new.calibration else {}
    if before != after:
        parts = []
        for part in ("dataset", "cache"):
            low, high = before.get(part), after.get(part)
            if low == high:
                continue
            if low is None or high is None:
                parts.append(f"{part} {'added' if low is None else 'removed'}")
            else:
                changed = sorted(key for key in low.keys() | high.keys() if low.get(key) != high.get(key))
                parts.append(f"{part} {', '.join(changed)} changed")
        yield Change(
            ChangeKind.CALIBRATION_DATA_CHANGE,
            f"calibration: {'; '.join(parts)}",
            ("calibration",),
            before or None,
            after or None,
        )


def _builder(old: EngineBuildManifest, new: EngineBuildManifest) -> Iterator[Change]:
    before, after = old.builder_config, new.builder_config
    if before.optimization_profiles != after.optimization_profiles:
        yield Change(
            ChangeKind.DYNAMIC_SHAPE_CHANGE,
            _profiles_summary(before.optimization_profiles, after.optimization_profiles),
            ("builder_config.optimization_profiles",),
            [profile.model_dump(mode="json") for profile in before.optimization_profiles],
            [profile.model_dump(mode="json") for profile in after.optimization_profiles],
        )
    if before.max_batch_size != after.max_batch_size:
        yield _simple(
            ChangeKind.BATCH_SIZE_CHANGE,
            "max_batch_size",
            "builder_config.max_batch_size",
            before.max_batch_size,
            after.max_batch_size,
        )
    else:
        old_batch, new_batch = (
            _profile_batch(before.optimization_profiles),
            _profile_batch(after.optimization_profiles),
        )
        if old_batch is not None and new_batch is not None and old_batch != new_batch:
            yield Change(
                ChangeKind.BATCH_SIZE_CHANGE,
                f"largest batch (dimension 0 of the profiles' max shapes): {old_batch} → {new_batch}",
                ("builder_config.optimization_profiles",),
                old_batch,
                new_batch,
                float(new_batch - old_batch),
            )
    # The workspace limit is memory_pool_limits["workspace"] (the manifest fills in max_workspace_size too).
    old_pools, new_pools = before.memory_pool_limits, after.memory_pool_limits
    if old_pools != new_pools:
        old_ws, new_ws = before.max_workspace_size, after.max_workspace_size
        yield Change(
            ChangeKind.WORKSPACE_CHANGE,
            f"workspace / memory pools: {_pools_text(old_pools)} → {_pools_text(new_pools)}",
            ("builder_config.max_workspace_size", "builder_config.memory_pool_limits"),
            old_pools,
            new_pools,
            float(new_ws - old_ws) if old_ws is not None and new_ws is not None else None,
        )
    compat_fields = ("hardware_compatibility_level", "version_compatible", "exclude_lean_runtime")
    old_compat = {name: getattr(before, name) for name in compat_fields}
    new_compat = {name: getattr(after, name) for name in compat_fields}
    if old_compat != new_compat:
        differing = [name for name in compat_fields if old_compat[name] != new_compat[name]]
        yield Change(
            ChangeKind.HARDWARE_COMPATIBILITY_CHANGE,
            "; ".join(f"{name}: {old_compat[name]} → {new_compat[name]}" for name in differing),
            tuple(f"builder_config.{name}" for name in differing),
            old_compat,
            new_compat,
        )
    yield from _field(
        ChangeKind.OPTIMIZATION_LEVEL_CHANGE,
        "builder optimization level",
        "builder_config.builder_optimization_level",
        old,
        new,
    )
    if _plugin_set(before) != _plugin_set(after):
        # Names are unique within a manifest (the model checks), so they key the summary.
        old_plugins = {plugin.name: plugin for plugin in before.plugins}
        new_plugins = {plugin.name: plugin for plugin in after.plugins}
        parts = [f"added {name}" for name in new_plugins if name not in old_plugins]
        parts += [f"removed {name}" for name in old_plugins if name not in new_plugins]
        parts += [
            f"{name} changed"
            for name in old_plugins
            if name in new_plugins and old_plugins[name] != new_plugins[name]
        ]
        yield Change(
            ChangeKind.PLUGIN_CHANGE,
            f"plugins: {', '.join(parts)}",
            ("builder_config.plugins",),
            [plugin.model_dump(mode="json") for plugin in before.plugins],
            [plugin.model_dump(mode="json") for plugin in after.plugins],
        )


def _accuracy(old: EngineBuildManifest, new: EngineBuildManifest, tolerance: float) -> Iterator[Change]:
    new_metrics = {entry.metric: entry for entry in new.accuracy}
    for before in old.accuracy:
        path = f"accuracy[metric={before.metric}]"
        after = new_metrics.get(before.metric)
        if after is None:
            yield Change(
                ChangeKind.ACCURACY_METRIC_REMOVED,
                f"{before.metric} ({before.value} on {before.dataset.name}) is not in the new manifest",
                (path,),
                before.value,
                None,
            )
        elif after.dataset != before.dataset:
            yield Change(
                ChangeKind.ACCURACY_DATASET_CHANGE,
                f"{before.metric} measured on {after.dataset.name} (sha256 {after.dataset.sha256[:12]}…) "
                f"instead of {before.dataset.name} (sha256 {before.dataset.sha256[:12]}…): "
                "values not comparable",
                (f"{path}.dataset",),
                before.dataset.model_dump(mode="json"),
                after.dataset.model_dump(mode="json"),
            )
        else:
            # The old build's direction decides: a new manifest that flips higher_is_better must not turn
            # a drop into an improvement.
            worse = before.value - after.value if before.higher_is_better else after.value - before.value
            if worse > tolerance:
                relative = f", {worse / abs(before.value):.2%}" if before.value else ""
                flipped = (
                    f", judged by the old manifest's higher_is_better: {before.higher_is_better}"
                    if after.higher_is_better != before.higher_is_better
                    else ""
                )
                yield Change(
                    ChangeKind.ACCURACY_DROP,
                    f"{before.metric} {before.value:g} → {after.value:g} (worse by {worse:.6g}{relative}"
                    f"{flipped}) on {after.dataset.name}",
                    (f"{path}.value",),
                    before.value,
                    after.value,
                    worse,
                )


def _plugin_set(config: BuilderConfig) -> list[tuple[str, str | None, str]]:
    """The plugins as (name, version, library digest), in name order: their order means nothing."""
    return sorted(((p.name, p.version, p.library_sha256) for p in config.plugins), key=lambda t: t[0])


def _padded(release: tuple[int, ...]) -> tuple[int, ...]:
    return release + (0,) * (4 - len(release))


def _field(
    kind: ChangeKind, label: str, path: str, old: EngineBuildManifest, new: EngineBuildManifest
) -> Iterator[Change]:
    """The change of the field at ``path`` (dotted, as changes name it), when the manifests differ there."""
    read = attrgetter(path)
    if read(old) != read(new):
        yield _simple(kind, label, path, read(old), read(new))


def _simple(kind: ChangeKind, label: str, path: str, old: Any, new: Any) -> Change:
    return Change(kind, f"{label}: {_text(old)} → {_text(new)}", (path,), old, new)


def _text(value: Any) -> str:
    return "(none)" if value is None else str(value)


def _profiles_summary(old: list[OptimizationProfile], new: list[OptimizationProfile]) -> str:
    if len(old) != len(new):
        return f"optimization profiles: {len(old)} → {len(new)}"
    parts = []
    for index, (before, after) in enumerate(zip(old, new, strict=True)):
        for name in sorted(before.inputs.keys() | after.inputs.keys()):
            low, high = before.inputs.get(name), after.inputs.get(name)
            if low == high:
                continue
            if low is None or high is None:
                parts.append(f"profile {index} input {name!r} {'added' if low is None else 'removed'}")
                continue
            for bound in ("min", "opt", "max"):
                if getattr(low, bound) != getattr(high, bound):
                    parts.append(
                        f"profile {index} {name!r} {bound} {shorten(getattr(low, bound))} → "
                        f"{shorten(getattr(high, bound))}"
                    )
    return "optimization profiles: " + "; ".join(parts)


def _profile_batch(profiles: list[OptimizationProfile]) -> int | None:
    batches = [shape.max[0] for profile in profiles for shape in profile.inputs.values() if shape.max]
    return max(batches) if batches else None


def _pools_text(pools: Mapping[str, int | None]) -> str:
    shown = {name: value for name, value in pools.items() if value is not None}
    return ", ".join(f"{name}={value}" for name, value in shown.items()) or "(none)"

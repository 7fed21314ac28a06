"""Model rules over the verified build manifest (``models.rules``): what the engine was built with and how
well it does.

``precisions`` (the precisions the engine may use), ``int8RequiresCalibration`` (INT8 only with recorded
calibration evidence), ``minAccuracy`` (a floor per recorded metric) and ``pluginsAllowed`` (plugin
libraries by digest). The rules with a module of their own: ``expressions`` (:mod:`policies.rules.
expressions`) and ``toolchain`` (:mod:`policies.rules._toolchain`).
"""

from __future__ import annotations

from policies.evaluation import EngineSubject, Evaluation
from policies.rules._findings import EngineFamily, Findings, has_build_manifest
from policies.schema import ModelRulesSpec
from verifier.manifest import EngineBuildManifest

__all__ = ["MODEL_RULES"]


async def _check(_run: Evaluation, found: Findings, engine: EngineSubject) -> EngineSubject:
    """The model rules against the engine's verified build manifest."""
    if engine.build is not None:
        _judge(found, engine.models.rules, engine.build.manifest.manifest)
    return engine


#: ``models.rules`` ``precisions``, ``int8RequiresCalibration``, ``minAccuracy``, ``pluginsAllowed``: an
#: engine rule over the build manifest.
MODEL_RULES = EngineFamily(
    name="models.rules",
    applies=has_build_manifest,
    check=_check,
)


def _judge(found: Findings, rules: ModelRulesSpec, manifest: EngineBuildManifest) -> None:
    """Precisions, INT8 calibration, accuracy floors and plugins, each against the manifest."""
    if rules.precisions is not None:
        extra = sorted(manifest.precisions() - set(rules.precisions))
        if extra:
            found.add(
                "models.rules.precisions",
                f"engine uses precision {', '.join(extra)}, allowed: {', '.join(rules.precisions)}",
                "rebuild without those precisions, or have the policy extended after review",
            )
    if rules.int8_requires_calibration and manifest.uses_int8() and not manifest.has_calibration_evidence():
        found.add(
            "models.rules.int8RequiresCalibration",
            "engine uses INT8 but its build manifest records no calibration evidence",
            "record the calibration dataset and cache hashes (`trtguard manifest create`)",
        )
    for metric, floor in rules.min_accuracy.items():
        value = manifest.accuracy_value(metric)
        if value is None:
            found.add(
                f"models.rules.minAccuracy.{metric}",
                f"build manifest records no accuracy metric {metric!r}",
                f"measure {metric} on the release dataset and record it in the manifest",
            )
        elif value < floor:
            found.add(
                f"models.rules.minAccuracy.{metric}",
                f"{metric} is {value:g}, below the required {floor:g}",
                "improve the engine's accuracy (recalibrate, or use a higher precision)",
            )
    if rules.plugins_allowed is not None:
        allowed = set(rules.plugins_allowed)
        for plugin in manifest.builder_config.plugins:
            if f"sha256:{plugin.library_sha256}" not in allowed:
                found.add(
                    "models.rules.pluginsAllowed",
                    f"plugin {plugin.name} library sha256:{plugin.library_sha256} is not allowed",
                    "build without the plugin, or have its library digest reviewed and allowed",
                )

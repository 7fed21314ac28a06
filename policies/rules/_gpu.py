"""GPU fit (``models.rules.gpuCompatibility``): the engine can run where the Pod is scheduled, in the runtime
it is handed to.

A TensorRT engine runs only on GPUs of the compute capability it was built on, unless its manifest records
a hardware-compatibility level (``ampere_plus``: compute capability 8.0 and newer), and only with the
TensorRT version that built it, unless it was built version-compatible. Nothing else stops a workload whose
engine was built on a 9.0 GPU from landing on 8.0 nodes, where it fails when it loads.

``nodes``: every way the Pods of every template the engine reaches can be placed (nodeSelector and each
required node-affinity term, :mod:`policies.workload_model._scheduling`; each template on its own: a Ray
worker group, an
LWS worker, a Volcano task) must confine them to GPUs that fit, by the labels NVIDIA GPU Feature Discovery
puts on nodes: ``nvidia.com/gpu.compute.major`` and ``.minor``, or ``nvidia.com/gpu.product`` naming the
build GPU itself.

``runtime``: every container that can read the engine, in any template
(:attr:`~policies.workload_model._pods.EngineUse.readers`), must run a TensorRT that can load it. Its version
comes from the signed build manifest when the container runs the builder image (same digest), else from
``tensorrtVersion`` of the policy's image rules that select the container's image; with neither, the
version is unknown and the rule cannot be checked (``onError``).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from policies.evaluation import EngineSubject, Evaluation
from policies.rules._findings import EngineFamily, Findings
from policies.rules._toolchain import runtime_groups
from policies.workload_model import EngineUse, ImageUse, NodeTerm, PodTemplate
from verifier.base import EvidenceUnavailable, ImageReference, InvalidReference
from verifier.manifest import EngineBuildManifest, parse_tensorrt_version

__all__ = [
    "AMPERE_OR_NEWER",
    "GPU_COMPATIBILITY",
    "MAJOR_LABEL",
    "MINOR_LABEL",
    "PRODUCT_LABEL",
    "GpuFit",
    "loads",
    "misfit",
    "misfits",
    "product_label",
]

MAJOR_LABEL = "nvidia.com/gpu.compute.major"
MINOR_LABEL = "nvidia.com/gpu.compute.minor"
PRODUCT_LABEL = "nvidia.com/gpu.product"
#: ``nvidia.com/gpu.product`` values (as GPU Feature Discovery writes them) of data-center GPUs of compute
#: capability 8.0 or newer: a node selection confined to them runs an ``ampere_plus`` engine. A product not
#: listed is judged by its compute capability labels.
AMPERE_OR_NEWER: Final = frozenset(
    {
        "NVIDIA-A100-SXM4-40GB",
        "NVIDIA-A100-SXM4-80GB",
        "NVIDIA-A100-PCIE-40GB",
        "NVIDIA-A100-80GB-PCIe",
        "NVIDIA-A10",
        "NVIDIA-A10G",
        "NVIDIA-A30",
        "NVIDIA-A40",
        "NVIDIA-L4",
        "NVIDIA-L40",
        "NVIDIA-L40S",
        "NVIDIA-H100-80GB-HBM3",
        "NVIDIA-H100-PCIe",
        "NVIDIA-H100-NVL",
        "NVIDIA-H200",
        "NVIDIA-GH200-480GB",
    }
)
_NODES = "models.rules.gpuCompatibility.nodes"
_RUNTIME = "models.rules.gpuCompatibility.runtime"
#: Version-compatible engines load in a newer major release only across these (TensorRT support matrix).
_MAJOR_STEPS = frozenset({(8, 10), (10, 11)})
#: Compute capabilities a message lists one by one; more are written as ranges of majors and minors.
_CAPABILITIES = 16
#: Other terms a message names by path when several admit GPUs the engine does not fit.
_OTHER_TERMS = 3
#: Malformed parts of a node selection a message names; it counts the rest.
_LISTED_PROBLEMS = 3


async def _check(run: Evaluation, found: Findings, engine: EngineSubject) -> EngineSubject:
    """The engine fits the GPUs its Pods may be placed on (``nodes``) and its runtimes (``runtime``)."""
    rule = engine.models.rules.gpu_compatibility
    if rule is None or engine.build is None:
        return engine
    manifest = engine.build.manifest.manifest
    if rule.nodes:
        await _nodes(run, found, engine.use, manifest)
    if rule.runtime:
        await _runtime(run, found, engine.use, manifest)
    return engine


#: ``models.rules.gpuCompatibility``, an engine rule over the build manifest.
GPU_COMPATIBILITY = EngineFamily(
    name="models.rules.gpuCompatibility",
    applies=lambda policy: (
        (models := policy.spec.models) is not None
        and models.build_manifest is not None
        and models.rules.gpu_compatibility is not None
    ),
    check=_check,
)


def product_label(gpu_name: str) -> str:
    """The ``nvidia.com/gpu.product`` value GPU Feature Discovery writes for an ``nvidia-smi`` name."""
    return "-".join(gpu_name.split())


@dataclass(frozen=True, slots=True)
class GpuFit:
    """What an engine asks of the GPUs of the nodes it runs on, from its build manifest."""

    major: int
    minor: int
    product: str
    """The build GPU's ``nvidia.com/gpu.product`` label value (:func:`product_label`)."""
    ampere_plus: bool
    """Built with hardware compatibility ``ampere_plus``: any GPU of compute capability 8.0 or newer."""
    built: str
    """What the engine was built on, for messages."""

    @classmethod
    def of(cls, manifest: EngineBuildManifest) -> GpuFit:
        """The fit the signed build manifest ``manifest`` records."""
        build = manifest.build_node
        major, minor = (int(part) for part in build.compute_capability.split("."))
        ampere_plus = manifest.builder_config.hardware_compatibility_level == "ampere_plus"
        built = f"the engine was built on {build.gpu_name} (compute capability {build.compute_capability}"
        built += ", hardware compatibility ampere_plus)" if ampere_plus else ")"
        return cls(major, minor, product_label(build.gpu_name), ampere_plus, built)


def misfit(term: NodeTerm, fit: GpuFit) -> str | None:
    """Why a node the term admits may have a GPU the engine does not fit, or None when none may (a term
    that matches no node places nothing)."""
    if term.matches_no_node:
        return None
    return _ampere_plus(term, fit) if fit.ampere_plus else _same_capability(term, fit)


def misfits(
    template: PodTemplate, fit: GpuFit, step: Callable[[], object] = lambda: None
) -> tuple[tuple[str, str], ...]:
    """The violation of ``template``'s placement for an engine of ``fit``, as a (message, fix) pair, or none:
    its node selection cannot be read, or terms admit GPUs the engine does not fit (one violation naming
    the first few and counting the others, however many there are). ``step`` (the evaluation budget's) is
    called once per term."""
    where = template.describe()
    selection = template.selection
    if selection.problems:
        problems = selection.problems
        listed = "; ".join(problems[:_LISTED_PROBLEMS])
        more = f"; and {len(problems) - _LISTED_PROBLEMS} more" if len(problems) > _LISTED_PROBLEMS else ""
        return (
            (f"the node selection of {where} cannot be read: {listed}{more}", "fix the Pods' node selection"),
        )
    bad: list[tuple[NodeTerm, str]] = []
    for term in selection.terms:
        step()
        message = misfit(term, fit)
        if message is not None:
            bad.append((term, message))
    if not bad:
        return ()
    (term, message), others = bad[0], [t.path for t, _ in bad[1:]]
    if others:
        listed = ", ".join(others[:_OTHER_TERMS]) + (", …" if len(others) > _OTHER_TERMS else "")
        message += f"; so do {len(others)} more of its terms ({listed})"
    if fit.ampere_plus:
        fix = (
            f"confine the Pods of {where} to Ampere or newer GPUs: node affinity {{key: {MAJOR_LABEL}, "
            'operator: Gt, values: ["7"]}} (a GPU Feature Discovery label)'
        )
    else:
        fix = (
            f'add to {where} nodeSelector {MAJOR_LABEL}: "{fit.major}" and {MINOR_LABEL}: "{fit.minor}" '
            f'(labels NVIDIA GPU Feature Discovery sets), or {PRODUCT_LABEL}: "{fit.product}"; or rebuild '
            "the engine hardware-compatible"
        )
    return ((f"{where}: {message} ({term.path}); {fit.built}", fix),)


async def _nodes(run: Evaluation, found: Findings, use: EngineUse, manifest: EngineBuildManifest) -> None:
    templates = run.context.templates_of(use)
    if not templates:
        found.add(
            _NODES,
            "the engine is in no pod template, so where it runs cannot be told",
            "mount the engine in the pod template that runs it",
        )
    fit = GpuFit.of(manifest)
    for template in templates:
        # Judged once per template and fit, however many engines, containers and policies reach it.
        judged = await run.computed(
            ("gpuCompatibility.nodes", template.path, fit),
            functools.partial(misfits, template, fit, run.budget.step),
            template.spec,
        )
        if run.first((found.policy.name, _NODES, found.engine, template.path)):
            for message, fix in judged:
                found.add(_NODES, message, fix)


def _same_capability(term: NodeTerm, fit: GpuFit) -> str | None:
    """Why the term admits GPUs of another compute capability, or None when it does not."""
    products = term.texts(PRODUCT_LABEL)
    if products is not None and products <= {fit.product}:
        return None
    majors, minors = term.numbers(MAJOR_LABEL), term.numbers(MINOR_LABEL)
    if majors.within((fit.major,)) and minors.within((fit.minor,)):
        return None
    capability = f"{fit.major}.{fit.minor}"
    if majors.others or minors.others:
        return f"the Pod may be scheduled on nodes whose GPU is not of compute capability {capability}"
    if majors.count * minors.count <= _CAPABILITIES:
        pairs = itertools.product(majors.smallest(_CAPABILITIES), minors.smallest(_CAPABILITIES))
        admitted = ", ".join(f"{a}.{b}" for a, b in pairs)
    else:
        admitted = f"major {majors.describe()}, minor {minors.describe()}"
    return (
        f"the Pod may be scheduled on GPUs of compute capability {admitted}, where the engine does not load"
    )


def _ampere_plus(term: NodeTerm, fit: GpuFit) -> str | None:
    """Why the term admits GPUs older than Ampere, or None when it does not: it confines the compute
    capability major to 8 or more, or the product to GPUs known to be Ampere or newer (the build GPU's
    own, which built an ``ampere_plus`` engine, among them)."""
    products = term.texts(PRODUCT_LABEL)
    known = AMPERE_OR_NEWER | ({fit.product} if fit.major >= 8 else set())
    if products is not None and products <= known:
        return None
    admitted = term.numbers(MAJOR_LABEL)
    least = admitted.least()
    if not admitted.others and (least is None or least >= 8):
        return None
    return "the Pod may be scheduled on GPUs older than Ampere (compute capability below 8.0)"


def loads(built: str, runtime: str, *, version_compatible: bool, exclude_lean_runtime: bool) -> str | None:
    """Why TensorRT ``runtime`` cannot load an engine built by TensorRT ``built``, or None when it can.

    Without version compatibility (or with the lean runtime excluded from the plan, which then needs the
    lean runtime of its own release) the release must be the same: major, minor and patch, and the build
    number where both give one. A version-compatible engine loads in the same or a later release of the
    same major version, and across 8→10 and 10→11.
    """
    b, r = parse_tensorrt_version(built), parse_tensorrt_version(runtime)
    if not version_compatible or exclude_lean_runtime:
        same = b[:3] == r[:3] and (len(b) < 4 or len(r) < 4 or b[3] == r[3])
        kind = "is not version-compatible" if not version_compatible else "excludes the lean runtime"
        return None if same else f"the engine {kind}, so it loads only in TensorRT {built}"
    if r < b:
        return f"a version-compatible engine loads only in TensorRT {built} or later"
    if r[0] != b[0] and (b[0], r[0]) not in _MAJOR_STEPS:
        return f"a version-compatible TensorRT {b[0]} engine does not load in TensorRT {r[0]}"
    return None


async def _runtime(run: Evaluation, found: Findings, use: EngineUse, manifest: EngineBuildManifest) -> None:
    groups = await runtime_groups(run, found, _RUNTIME, use)
    if groups is None:
        return
    if not run.context.readers(use):
        found.add(
            _RUNTIME,
            "no container runs the engine, so the TensorRT that loads it is unknown",
            "mount the engine's image volume in the container that serves it, or name that container in the "
            "trtguard.dev/engines annotation",
        )
    built = manifest.toolchain.tensorrt_version
    config = manifest.builder_config
    # Judged once per image and engine digest, however many containers run it or volumes mount the engine.
    for group in groups:
        where = group.describe()
        if group.image is None:
            found.add(
                _RUNTIME,
                f"{where} can read the engine, but {group.unnamed} (the operator fills it in), so the "
                "TensorRT that loads the engine is unknown",
                "name the container's image",
                error=True,
            )
            continue
        version = await _runtime_version(run, found, group.image, manifest, where)
        if version is None:
            continue
        reason = loads(
            built,
            version,
            version_compatible=config.version_compatible,
            exclude_lean_runtime=config.exclude_lean_runtime,
        )
        if reason is not None:
            found.add(
                _RUNTIME,
                f"{where} runs TensorRT {version}, which cannot load the engine built with TensorRT {built}: "
                f"{reason}",
                "run the engine in a TensorRT image that can load it, or rebuild it (version-compatible) "
                "for that runtime",
            )


async def _runtime_version(
    run: Evaluation, found: Findings, image: ImageUse, manifest: EngineBuildManifest, where: str
) -> str | None:
    """The TensorRT version of the container's image, or None with a violation saying why it is unknown."""
    ref = run.reference(image.reference)
    if isinstance(ref, InvalidReference):
        found.add(_RUNTIME, f"{where} runs an invalid image reference: {ref.message}", "fix the reference")
        return None
    builder = run.reference(manifest.toolchain.image)
    try:
        digest = await run.digest(ref)
    except EvidenceUnavailable as error:
        found.add(
            _RUNTIME,
            f"the TensorRT version of {where} {ref} is unknown: {error.message}",
            "pin the image by digest",
            error=True,
        )
        return None
    if isinstance(builder, ImageReference) and builder.digest == digest:
        return manifest.toolchain.tensorrt_version  # the signed manifest says what the builder image holds
    declared: set[str] = set()
    for compiled in found.policy.image_rules:
        version = compiled.rule.tensorrt_version
        if version is not None and compiled.applies_to(ref, image.field):
            declared.add(version)
    if len(declared) > 1:
        found.add(
            _RUNTIME,
            f"the image rules that select {where} {ref} give different TensorRT versions: "
            f"{', '.join(sorted(declared))}",
            "give the image one tensorrtVersion",
        )
        return None
    if not declared:
        found.add(
            _RUNTIME,
            f"the TensorRT version of {where} {ref} is unknown: it is not the builder image "
            f"{manifest.toolchain.image}, and no image rule that selects it gives a tensorrtVersion",
            "run the builder image, or set tensorrtVersion on the image rule that selects this image",
            error=True,
        )
        return None
    return declared.pop()

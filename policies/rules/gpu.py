"""GPU fit (``models.rules.gpuCompatibility``): the engine can run where the Pod is scheduled, in the runtime
it is handed to.

A TensorRT engine runs only on GPUs of the compute capability it was built on, unless its manifest records
a hardware-compatibility level (``ampere_plus``: compute capability 8.0 and newer), and only with the
TensorRT version that built it, unless it was built version-compatible. Nothing else stops a workload whose
engine was built on a 9.0 GPU from landing on 8.0 nodes, where it fails when it loads.

``nodes``: every way the Pods of every template the engine reaches can be placed (nodeSelector and each
required node-affinity term, :mod:`policies.scheduling`; each template on its own: a Ray worker group, an
LWS worker, a Volcano task) must confine them to GPUs that fit, by the labels NVIDIA GPU Feature Discovery
puts on nodes: ``nvidia.com/gpu.compute.major`` and ``.minor``, or ``nvidia.com/gpu.product`` naming the
build GPU itself.

``runtime``: every container that can read the engine, in any template
(:attr:`~policies.pods.EngineUse.readers`), must run a TensorRT that can load it. Its version
comes from the signed build manifest when the container runs the builder image (same digest), else from
``tensorrtVersion`` of the policy's image rules that select the container's image; with neither, the
version is unknown and the rule cannot be checked (``onError``).
"""

from __future__ import annotations

from policies.pods import Container, EngineUse, ImageUse
from policies.rules.evaluation import Evaluation
from policies.rules.findings import Findings
from policies.scheduling import NodeTerm
from policies.schema import GpuCompatibilityRule
from policies.verified import VerifiedManifest
from verifier.base import EvidenceUnavailable, ImageReference, InvalidReference
from verifier.manifest import EngineBuildManifest, parse_tensorrt_version

__all__ = ["MAJOR_LABEL", "MINOR_LABEL", "PRODUCT_LABEL", "check", "loads", "product_label"]

MAJOR_LABEL = "nvidia.com/gpu.compute.major"
MINOR_LABEL = "nvidia.com/gpu.compute.minor"
PRODUCT_LABEL = "nvidia.com/gpu.product"
_NODES = "models.rules.gpuCompatibility.nodes"
_RUNTIME = "models.rules.gpuCompatibility.runtime"
#: Version-compatible engines load in a newer major release only across these (TensorRT support matrix).
_MAJOR_STEPS = frozenset({(8, 10), (10, 11)})


async def check(
    run: Evaluation, found: Findings, rule: GpuCompatibilityRule, use: EngineUse, verified: VerifiedManifest
) -> None:
    """The engine fits the GPUs its Pods may be placed on (``nodes``) and its runtimes (``runtime``)."""
    if rule.nodes:
        _nodes(run, found, use, verified.manifest)
    if rule.runtime:
        await _runtime(run, found, use, verified.manifest)


def product_label(gpu_name: str) -> str:
    """The ``nvidia.com/gpu.product`` value GPU Feature Discovery writes for an ``nvidia-smi`` name."""
    return "-".join(gpu_name.split())


def _nodes(run: Evaluation, found: Findings, use: EngineUse, manifest: EngineBuildManifest) -> None:
    templates = run.context.templates_of(use)
    if not templates:
        found.add(
            _NODES,
            "the engine is in no pod template, so where it runs cannot be told",
            "mount the engine in the pod template that runs it",
        )
    for template in templates:
        where = template.describe()
        selection = template.node_selection()
        for problem in selection.problems:
            found.add(
                _NODES,
                f"the node selection of {where} cannot be read: {problem}",
                "fix the Pods' node selection",
            )
        if not selection.problems:
            _terms(found, selection.terms, manifest, where)


def _terms(found: Findings, terms: tuple[NodeTerm, ...], manifest: EngineBuildManifest, where: str) -> None:
    build = manifest.build_node
    major, minor = (int(part) for part in build.compute_capability.split("."))
    level = manifest.builder_config.hardware_compatibility_level
    product = product_label(build.gpu_name)
    for term in terms:
        if level == "ampere_plus":
            message = _ampere_plus(term)
            fix = (
                f"confine the Pods of {where} to Ampere or newer GPUs: node affinity {{key: {MAJOR_LABEL}, "
                'operator: Gt, values: ["7"]}} (a GPU Feature Discovery label)'
            )
        else:
            message = _same_capability(term, major, minor, product)
            fix = (
                f'add to {where} nodeSelector {MAJOR_LABEL}: "{major}" and {MINOR_LABEL}: "{minor}" (labels '
                f'NVIDIA GPU Feature Discovery sets), or {PRODUCT_LABEL}: "{product}"; or rebuild the engine '
                "hardware-compatible"
            )
        if message is not None:
            built = f"the engine was built on {build.gpu_name} (compute capability {build.compute_capability}"
            built += ", hardware compatibility ampere_plus)" if level == "ampere_plus" else ")"
            found.add(_NODES, f"{where}: {message} ({term.path}); {built}", fix)


def _same_capability(term: NodeTerm, major: int, minor: int, product: str) -> str | None:
    """Why the term admits GPUs of another compute capability, or None when it does not."""
    products = term.texts(PRODUCT_LABEL)
    if products is not None and products <= {product}:
        return None
    majors, minors = term.numbers(MAJOR_LABEL).values, term.numbers(MINOR_LABEL).values
    if majors is not None and minors is not None and majors <= {major} and minors <= {minor}:
        return None
    if majors is None or minors is None:
        return f"the Pod may be scheduled on nodes whose GPU is not of compute capability {major}.{minor}"
    admitted = ", ".join(f"{a}.{b}" for a in sorted(majors) for b in sorted(minors))
    return (
        f"the Pod may be scheduled on GPUs of compute capability {admitted}, where the engine does not load"
    )


def _ampere_plus(term: NodeTerm) -> str | None:
    admitted = term.numbers(MAJOR_LABEL)
    if admitted.values is not None and all(value >= 8 for value in admitted.values):
        return None
    if admitted.values is None and admitted.low is not None and admitted.low >= 8:
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
    readers = run.context.readers(use)
    if not readers:
        found.add(
            _RUNTIME,
            "no container runs the engine, so the TensorRT that loads it is unknown",
            "mount the engine's image volume in the container that serves it, or name that container in the "
            "trtguard.dev/engines annotation",
        )
    built = manifest.toolchain.tensorrt_version
    config = manifest.builder_config
    for container in readers:
        where = container.describe()
        image = _image_of(found, container)
        if image is None:
            continue
        version = await _runtime_version(run, found, image, manifest, where)
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


def _image_of(found: Findings, container: Container) -> ImageUse | None:
    """The container's image, or None with a violation saying its TensorRT is unknown (``onError``)."""
    if container.image is None:
        found.add(
            _RUNTIME,
            f"{container.describe()} can read the engine, but its image is not named here (the operator "
            "fills it in), so the TensorRT that loads the engine is unknown",
            "name the container's image",
            error=True,
        )
    return container.image


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

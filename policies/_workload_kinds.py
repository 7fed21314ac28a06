"""``WorkloadKind`` documents → the kind registry of a policy set, and the kind names policies use, checked.

A ``WorkloadKind`` adds a custom resource kind (or replaces a shipped definition, to follow a CRD version
trtguard does not know yet); the built-in Kubernetes kinds are fixed (the schema refuses their groups). Its
``podTemplates`` carry the engines annotation in their own metadata; the object's own annotations count for
its Pods only when it has exactly one template, at a fixed path, that has no metadata of its own (one
``podSpecs`` path): with several, an engine named on the object could not be tied to the Pod that runs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from policies._kind_schema import WorkloadKindDocument
from policies.workload_model import DEFAULT_KINDS, KindDefinition, KindRegistry, template
from verifier.base import Document

__all__ = ["kind_name_problems", "registry"]


def _definition(doc: WorkloadKindDocument, where: str) -> KindDefinition:
    spec = doc.spec
    single = (
        len(spec.pod_specs) == 1
        and not spec.pod_templates
        and not spec.containers
        and not any(mark in spec.pod_specs[0] for mark in "*[")
    )
    return KindDefinition(
        spec.group,
        spec.kind,
        "",  # the webhook's rules name the resource: the chart's webhook.extraRules
        (
            *(template(path) for path in spec.pod_templates),
            *(template(path, "podSpec", object_annotations=single) for path in spec.pod_specs),
            *(template(path, "container") for path in spec.containers),
        ),
        versions=tuple(spec.versions or ()),
        source=f"WorkloadKind {doc.metadata.name} ({where})",
        origin=where,
    )


def registry(
    docs: Sequence[tuple[WorkloadKindDocument, Document, Path]], problems: list[str]
) -> KindRegistry:
    """The built-in and shipped kinds with every ``WorkloadKind`` of ``docs``; a kind defined twice is a
    problem."""
    definitions: dict[tuple[str, str], KindDefinition] = {}
    for doc, document, path in docs:
        where = f"{path}:{document.line}"
        definition = _definition(doc, where)
        earlier = definitions.get(definition.group_kind)
        if earlier is not None:
            problems.append(f"{where}: WorkloadKind {definition.name} is already defined at {earlier.origin}")
            continue
        definitions[definition.group_kind] = definition
    return DEFAULT_KINDS.with_definitions(definitions.values())


def kind_name_problems(documents: Sequence[tuple[Document, Path]], kinds: KindRegistry) -> list[str]:
    """Every ``match.kinds`` and ``exclude.kinds`` entry of the policy documents that names no kind of
    ``kinds``.

    Read from the documents as written, so that a policy with other errors reports these too (at once,
    rather than after the others are fixed); entries that are not strings are the schema's to report.
    """
    found = []
    for document, path in documents:
        found += _kind_name_problems(document, path, kinds)
    return found


def _kind_name_problems(document: Document, path: Path, kinds: KindRegistry) -> list[str]:
    found = []
    spec = document.data.get("spec") if isinstance(document.data, dict) else None
    for key in ("match", "exclude"):
        selection = spec.get(key) if isinstance(spec, dict) else None
        names = selection.get("kinds") if isinstance(selection, dict) else None
        for index, name in enumerate(names if isinstance(names, list) else []):
            if not isinstance(name, str):
                continue
            try:
                kinds.resolve(name)
            except ValueError as error:
                line = document.line_of(("spec", key, "kinds", index))
                found.append(f"{path}:{line}: spec.{key}.kinds[{index}]: {error}")
    return found

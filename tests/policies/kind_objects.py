"""Objects of any workload kind built from pod specs: each pod spec placed in one of the kind's templates.

:func:`build` reads a :class:`~policies.workload_model._kinds.KindDefinition` (a built-in, shipped or
WorkloadKind one) and
puts each given pod spec where the definition says its Pods are: a pod spec or a pod template at a fixed
path, one list item or map value per pod spec under a wildcard. Tests use it to move the same pod spec to
every position of every kind.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from policies.workload_model._kinds import KindDefinition, Template

_BUILTIN_VERSIONS = {"": "v1", "apps": "apps/v1", "extensions": "extensions/v1beta1", "batch": "batch/v1"}


def slots(definition: KindDefinition) -> list[Template]:
    """The templates of ``definition`` that hold a pod spec (not the single-container ones)."""
    return [t for t in definition.templates if t.shape != "container"]


def capacity(template: Template) -> int | None:
    """How many pod specs a template holds: one at a fixed path, any number (None) under a wildcard."""
    return None if template.path.has_wildcard else 1


def api_version(definition: KindDefinition) -> str:
    if definition.origin == "builtin":
        return _BUILTIN_VERSIONS[definition.group]
    return f"{definition.group}/{definition.versions[0] if definition.versions else 'v1'}"


def build(
    definition: KindDefinition,
    placed: Sequence[Sequence[Mapping[str, Any]]],
    *,
    name: str = "w",
    namespace: str = "prod",
) -> dict[str, Any]:
    """An object of ``definition`` with ``placed[i]`` (pod specs) in its ``i``-th slot (:func:`slots`).

    Slots nested in another (a KServe predictor's ``workerSpec``) get an empty parent when the parent
    holds nothing. Each pod spec is copied.
    """
    obj: dict[str, Any] = {
        "apiVersion": api_version(definition),
        "kind": definition.kind,
        "metadata": {"name": name, "namespace": namespace},
    }
    # Outer paths first, so that a nested slot lands inside the value its parent slot put there.
    order = sorted(range(len(placed)), key=lambda i: len(slots(definition)[i].path.segments))
    for index in order:
        template, specs = slots(definition)[index], placed[index]
        if not specs:
            continue
        values = [_value(template, spec) for spec in specs]
        _place(obj, template, values)
    return obj


def _value(template: Template, spec: Mapping[str, Any]) -> dict[str, Any]:
    if template.shape == "podTemplate":
        return {"metadata": {"labels": {"app": "w"}}, "spec": copy.deepcopy(dict(spec))}
    return copy.deepcopy(dict(spec))


def _place(obj: dict[str, Any], template: Template, values: list[dict[str, Any]]) -> None:
    segments = template.path.segments
    wildcard = next((i for i, s in enumerate(segments) if s in ("[*]", "*")), None)
    if wildcard is None:
        [value] = values
        _merge(_descend(obj, segments[:-1]).setdefault(segments[-1], {}), value)
        return
    container_keys, rest = segments[:wildcard], segments[wildcard + 1 :]
    holder = _descend(obj, container_keys[:-1])
    items = []
    for number, value in enumerate(values):
        entry: dict[str, Any] = {}
        if template.name_key is not None:
            entry[template.name_key] = f"group-{number}"
        _descend(entry, rest[:-1])[rest[-1]] = value
        items.append(entry)
    key = container_keys[-1]
    if segments[wildcard] == "[*]":
        existing = holder.setdefault(key, [])
        for number, entry in enumerate(items):
            if number < len(existing):
                _merge(existing[number], entry)
            else:
                existing.append(entry)
    else:
        existing_map = holder.setdefault(key, {})
        for number, entry in enumerate(items):
            _merge(existing_map.setdefault(f"Role{number}", {}), entry)


def _merge(into: dict[str, Any], extra: Mapping[str, Any]) -> None:
    """``extra`` merged into ``into``: maps key by key, anything else replaced."""
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)


def _descend(node: dict[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    for key in keys:
        node = node.setdefault(key, {})
    return node

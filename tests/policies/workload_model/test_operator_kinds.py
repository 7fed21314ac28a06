"""policies.workload_model._operator_kinds against the operators' CRD schemas
(tests/data/500-operator-crd-image-paths.json).

For every served version of every CRD: the shipped definition reads exactly the pod specs, containers and
model storage URIs the schema has under ``spec``: nothing the schema holds is missed, and nothing the
definition names is missing from the schema (a misspelt path would silently read nothing).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from policies.workload_model._kinds import KindDefinition
from policies.workload_model._operator_kinds import DEFAULT_KINDS, OPERATOR_KINDS
from tests.conftest import DATA

CRDS: list[dict[str, Any]] = json.loads((DATA / "500-operator-crd-image-paths.json").read_text())["crds"]
#: Schema areas that keep unknown fields but hold no Pods: Argo Rollouts' traffic-router and step plugin
#: settings, handed to the plugin as they are.
OPAQUE_WITHOUT_PODS = {
    ("Rollout", "spec.strategy.canary.steps[*].plugin.config"),
    ("Rollout", "spec.strategy.canary.trafficRouting.plugins"),
}


def _read_by(definition: KindDefinition) -> dict[str, set[str]]:
    """The paths a definition reads, absolute, in the summary's terms."""
    paths: dict[str, set[str]] = {"podSpecs": set(), "containers": set(), "storageUris": set()}
    for template in definition.templates:
        if template.shape == "container":
            paths["containers"].add(template.path.text)
            continue
        paths["podSpecs"].add(template.pod_spec)
        paths["containers"] |= {f"{template.pod_spec}.{c.text}" for c in template.containers}
        paths["storageUris"] |= {f"{template.pod_spec}.{u.text}" for u in template.image_uris}
    return paths


def _cases() -> list[tuple[str, str, str]]:
    return [(crd["repository"], crd["kind"], version) for crd in CRDS for version in crd["versions"]]


@pytest.mark.parametrize(("repository", "kind", "version"), _cases())
def test_each_definition_reads_what_the_crd_schema_holds(repository: str, kind: str, version: str) -> None:
    [crd] = [c for c in CRDS if c["repository"] == repository and c["kind"] == kind]
    definition = DEFAULT_KINDS.get(crd["group"], kind, version)
    assert definition is not None, f"{kind}.{crd['group']} {version} is served but not shipped"
    schema = crd["versions"][version]
    read = _read_by(definition)
    assert read["podSpecs"] == set(schema["podSpecs"])
    # A newer version's field (KubeRay's historyServerOptions) may be read in an older one: absent there.
    assert set(schema["containers"]) <= read["containers"]
    assert set(schema["storageUris"]) <= read["storageUris"]
    assert {(kind, path) for path in schema["opaque"]} <= OPAQUE_WITHOUT_PODS
    assert (definition.resource, definition.namespaced) == (crd["plural"], crd["scope"] == "Namespaced")
    assert crd["path"] in definition.source and crd["commit"][:8] in definition.source


@pytest.mark.parametrize("definition", OPERATOR_KINDS, ids=lambda d: d.name)
def test_every_path_of_a_definition_is_in_its_crd_schema(definition: KindDefinition) -> None:
    crds = [c for c in CRDS if (c["group"], c["kind"]) == definition.group_kind]
    assert crds, f"{definition.name} was checked against no CRD"
    assert sorted(definition.versions) == sorted({v for c in crds for v in c["versions"]})
    in_schema: dict[str, set[str]] = {"podSpecs": set(), "containers": set(), "storageUris": set()}
    for crd in crds:
        for found in crd["versions"].values():
            for key, paths in in_schema.items():
                paths |= set(found[key])
    for key, paths in _read_by(definition).items():
        assert paths <= in_schema[key], f"{definition.name} {key}: {sorted(paths - in_schema[key])}"


def test_versions_trtguard_was_not_checked_against_are_unknown() -> None:
    assert DEFAULT_KINDS.get("serving.kserve.io", "InferenceService", "v1alpha2") is None
    assert DEFAULT_KINDS.get("serving.kserve.io", "InferenceService", "v1beta1") is not None
    assert DEFAULT_KINDS.get("ray.io", "RayCronJob", "v1alpha1") is None

"""Where a CustomResourceDefinition's schema keeps pod specs, containers and model storage URIs.

Writes the JSON that tests/policies/workload_model/test_operator_kinds.py holds the shipped operator kinds
against
(tests/data/500-operator-crd-image-paths.json):

    python scripts/crd_image_paths.py OWNER/REPO@COMMIT:PATH=FILE ...
    # e.g. kserve/kserve@aaac4e29…:config/crd/full/serving.kserve.io_inferenceservices.yaml=/tmp/isvc.yaml

Each argument names the CRD's repository, commit and path, and the local copy of that file. For every served
version, under ``spec``: ``podSpecs`` are objects with a ``containers`` list of objects with an ``image``
(the walk goes on inside them, past their standard fields); ``containers`` are other objects with a string
``image``; ``storageUris`` are string fields named ``storageUri`` (and ``storageUris[*].uri``);
``opaque`` are objects whose schema keeps unknown fields (anything could be inside). Paths use ``[*]`` for
list items and ``*`` for map values, as trtguard's kind definitions do.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

_POD_SPEC_FIELDS = frozenset({"containers", "initContainers", "ephemeralContainers", "volumes"})


def _walk(schema: Any, path: str, found: dict[str, list[str]]) -> None:
    if not isinstance(schema, dict):
        return
    properties = schema.get("properties") or {}
    if schema.get("x-kubernetes-preserve-unknown-fields") and not properties:
        found["opaque"].append(path)
    skipped: frozenset[str] = frozenset()
    containers = properties.get("containers", {}).get("items", {}).get("properties", {})
    if "image" in containers:
        found["podSpecs"].append(path)
        skipped = _POD_SPEC_FIELDS
    elif properties.get("image", {}).get("type") == "string":
        found["containers"].append(path)
    for key, value in properties.items():
        if key in skipped:
            continue
        child = f"{path}.{key}"
        if key == "storageUri" and value.get("type") == "string":
            found["storageUris"].append(child)
        elif key == "storageUris" and "uri" in value.get("items", {}).get("properties", {}):
            found["storageUris"].append(f"{child}[*].uri")
        _walk(value, child, found)
    if isinstance(schema.get("items"), dict):
        _walk(schema["items"], f"{path}[*]", found)
    if isinstance(schema.get("additionalProperties"), dict):
        _walk(schema["additionalProperties"], f"{path}.*", found)


def summarise(source: str, crd: dict[str, Any]) -> dict[str, Any]:
    """The summary of one CRD; ``source`` is ``owner/repo@commit:path``."""
    repository, _, rest = source.partition("@")
    commit, _, path = rest.partition(":")
    versions = {}
    for version in crd["spec"]["versions"]:
        if not version.get("served", True):
            continue
        found: dict[str, list[str]] = {"podSpecs": [], "containers": [], "storageUris": [], "opaque": []}
        spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
        _walk(spec, "spec", found)
        versions[version["name"]] = {key: sorted(paths) for key, paths in found.items()}
    return {
        "repository": repository,
        "commit": commit,
        "path": path,
        "group": crd["spec"]["group"],
        "kind": crd["spec"]["names"]["kind"],
        "plural": crd["spec"]["names"]["plural"],
        "scope": crd["spec"]["scope"],
        "versions": versions,
    }


def main(arguments: list[str]) -> None:
    """Print the summaries of the CRDs named by ``arguments`` (``SOURCE=FILE`` each)."""
    crds = []
    for argument in arguments:
        source, _, file = argument.rpartition("=")
        crds.append(summarise(source, yaml.safe_load(Path(file).read_text())))
    json.dump({"about": __doc__.split("\n\n")[0], "crds": crds}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])

"""PolicyReport and ClusterPolicyReport objects checked against the working group's CRDs (tests/data/780).

Strict: an object with a field its schema does not name fails (the API server would prune it silently, so a
report that relied on it would lose it).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import yaml

CRDS = Path(__file__).resolve().parents[1] / "data" / "780-wgpolicyk8s-policyreport-crds"
_FILES = {
    "PolicyReport": "wgpolicyk8s.io_policyreports.yaml",
    "ClusterPolicyReport": "wgpolicyk8s.io_clusterpolicyreports.yaml",
}
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


@functools.cache
def _schema(kind: str, version: str) -> dict[str, Any]:
    crd = yaml.safe_load((CRDS / _FILES[kind]).read_text())
    assert crd["spec"]["names"]["kind"] == kind
    [served] = [v for v in crd["spec"]["versions"] if v["name"] == version]
    strict: dict[str, Any] = _strict(served["schema"]["openAPIV3Schema"])
    return strict


def _strict(schema: Any) -> Any:
    if isinstance(schema, dict):
        strict = {key: _strict(value) for key, value in schema.items()}
        if "properties" in strict and "additionalProperties" not in strict:
            # metadata is `type: object` with no properties: the API server's own checks apply there
            strict["additionalProperties"] = False
        return strict
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    return schema


def validate_report(document: dict[str, Any]) -> None:
    """Assert ``document`` is a valid ``wgpolicyk8s.io/v1alpha2`` report of its kind."""
    group, _, version = document["apiVersion"].partition("/")
    assert group == "wgpolicyk8s.io" and version == "v1alpha2", document["apiVersion"]
    jsonschema.validate(document, _schema(document["kind"], version))
    metadata = document["metadata"]
    assert _DNS_SUBDOMAIN.fullmatch(metadata["name"]), metadata["name"]
    assert ("namespace" in metadata) == (document["kind"] == "PolicyReport")
    counted = {
        key: sum(1 for r in document.get("results", []) if r["result"] == key) for key in document["summary"]
    }
    assert counted == document["summary"], "the summary counts the results"

"""verifier.scans: a document listing more than MAX_COMPONENTS components is refused (an InputError, so
unreadable evidence: "cannot tell") from a count of the raw JSON, before any component is built (attack 35
E3: reading 550,000 components cost 6 s of CPU before the components check's own limit said so)."""

from __future__ import annotations

from typing import Any

import pytest

from verifier.base import InputError
from verifier.scans import MAX_COMPONENTS, model, read_scan
from verifier.scans import _cosign as cosign
from verifier.scans import _cyclonedx as cyclonedx
from verifier.scans import _spdx as spdx

CDX = "https://cyclonedx.org/bom"
SPDX = "https://spdx.dev/Document"
VULN = "https://cosign.sigstore.dev/attestation/vuln/v1"
TIME = "2026-12-01T00:00:00Z"


def _many(count: int) -> list[dict[str, Any]]:
    return [{"name": f"a{n}"} for n in range(count)]


def _cyclonedx(top: int, nested: int, described: int) -> dict[str, Any]:
    return {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "metadata": {"timestamp": TIME, "component": {"name": "image", "components": _many(described)}},
        "components": [*_many(top), {"name": "app", "components": _many(nested)}],
    }


def _trivy(count: int) -> dict[str, Any]:
    result = {"Target": "t", "Class": "lang-pkgs", "Type": "pip", "Packages": _many(count)}
    return {"scanner": {"uri": "trivy", "result": {"SchemaVersion": 2, "Results": [result]}}}


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The components the readers build (none, where the count refuses the document)."""
    names: list[str] = []
    real = model.component_from

    def counted(name: str, *args: Any, **kwargs: Any) -> model.Component:
        names.append(name)
        return real(name, *args, **kwargs)

    for reader in (cyclonedx, spdx, cosign):
        monkeypatch.setattr(reader, "component_from", counted)
    return names


@pytest.mark.parametrize(
    ("predicate_type", "document"),
    [
        (CDX, _cyclonedx(MAX_COMPONENTS, 0, 0)),  # with "app", one more than the limit
        (CDX, _cyclonedx(0, MAX_COMPONENTS, 0)),  # nested
        (CDX, _cyclonedx(0, 0, MAX_COMPONENTS)),  # in metadata.component
        (CDX, _cyclonedx(MAX_COMPONENTS // 2, MAX_COMPONENTS // 4, MAX_COMPONENTS // 4)),
        (
            SPDX,
            {
                "spdxVersion": "SPDX-2.3",
                "creationInfo": {"created": TIME},
                "packages": _many(MAX_COMPONENTS + 1),
            },
        ),
        (VULN, _trivy(MAX_COMPONENTS + 1)),
        (VULN, {"scanner": {"uri": "pip-audit", "result": {"dependencies": _many(MAX_COMPONENTS + 1)}}}),
        (VULN, {"scanner": {"uri": "x", "result": _cyclonedx(MAX_COMPONENTS, 0, 0)}}),
    ],
)
def test_a_document_of_too_many_components_is_refused_before_they_are_built(
    built: list[str], predicate_type: str, document: dict[str, Any]
) -> None:
    with pytest.raises(InputError, match=f"lists more than {MAX_COMPONENTS} components"):
        read_scan(predicate_type, document, "doc")
    assert built == []


def test_a_document_at_the_limit_is_read(monkeypatch: pytest.MonkeyPatch, built: list[str]) -> None:
    for module in (model, cyclonedx):
        monkeypatch.setattr(module, "MAX_COMPONENTS", 4)
    read_scan(CDX, _cyclonedx(1, 1, 1), "doc")  # 1 + "app" + its 1 + metadata.component's 1
    assert len(built) == 4
    built.clear()
    with pytest.raises(InputError):
        read_scan(CDX, _cyclonedx(1, 2, 1), "doc")
    assert built == []

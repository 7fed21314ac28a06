"""SPDX 2.2 and 2.3 JSON: the packages of an SBOM (SPDX 2 has no vulnerability results).

A strict subset read with pydantic, like :mod:`verifier.scans._cyclonedx`: ``spdxVersion``,
``creationInfo.created`` (the document's time) and each package's ``name``, ``versionInfo`` and purl (an
``externalRefs`` entry of category ``PACKAGE-MANAGER`` and type ``purl``); every other field is ignored.
docs/scans.md compares this with ``spdx-tools``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from verifier.base import InputError
from verifier.scans._lenient_model import LenientModel
from verifier.scans._times import parse_time
from verifier.scans.model import (
    ScanDocument,
    check_component_count,
    component_from,
    images_about,
    listed_count,
)

__all__ = ["is_spdx", "read_spdx"]

_VERSIONS = frozenset({"SPDX-2.2", "SPDX-2.3"})
# SPDX 2.3 writes the category with a hyphen; 2.2 documents and some tools use an underscore.
_PACKAGE_MANAGER = frozenset({"PACKAGE-MANAGER", "PACKAGE_MANAGER"})


class _ExternalRef(LenientModel):
    category: str = Field(alias="referenceCategory")
    type: str = Field(alias="referenceType")
    locator: str = Field(alias="referenceLocator")


class _Package(LenientModel):
    name: str
    version: str | None = Field(default=None, alias="versionInfo")
    external_refs: list[_ExternalRef] | None = Field(default=None, alias="externalRefs")


class _CreationInfo(LenientModel):
    created: str


class _Document(LenientModel):
    spdx_version: str = Field(alias="spdxVersion")
    creation_info: _CreationInfo = Field(alias="creationInfo")
    packages: list[_Package] | None = None


def is_spdx(data: Mapping[str, Any]) -> bool:
    """Whether ``data`` says it is an SPDX 2 JSON document."""
    version = data.get("spdxVersion")
    return isinstance(version, str) and version.startswith("SPDX-2.")


def read_spdx(data: Mapping[str, Any], source: str) -> ScanDocument:
    """An SPDX 2.2/2.3 JSON document as a :class:`ScanDocument` (components only).

    Raises :class:`~verifier.base.InputError` for another SPDX version or fields of the wrong type.
    """
    version = data.get("spdxVersion")
    if version not in _VERSIONS:
        raise InputError(
            f"not an SPDX 2.2 or 2.3 JSON document (spdxVersion is {version!r})",
            location=source,
            hint="attest the SBOM tool's SPDX 2.3 JSON output as the predicate",
        )
    check_component_count(listed_count(data.get("packages")), source)  # before validating: MAX_COMPONENTS
    document = _Document.read(data, source, "the SPDX document")
    unknowns: list[str] = []
    created = parse_time(document.creation_info.created, "creationInfo.created", unknowns)
    components = tuple(
        component_from(package.name, package.version, _purl(package)) for package in document.packages or []
    )
    if not components:
        unknowns.append("the document lists no package (an empty SBOM)")
    unknowns.append("an SPDX 2 document carries no vulnerability results")
    # a package that is a container image (syft's root package: pkg:oci/…@sha256:…) names what it describes
    about = images_about(_purl(package) for package in document.packages or [])
    return ScanDocument(
        format="spdx", scanned_at=created, components=components, unknowns=tuple(unknowns), about=about
    )


def _purl(package: _Package) -> str | None:
    for ref in package.external_refs or []:
        if ref.category in _PACKAGE_MANAGER and ref.type == "purl":
            return ref.locator
    return None

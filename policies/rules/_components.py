"""The built-in ``components`` check of an attestation rule: ``required`` packages listed, ``banned`` not.

A policy names a package by the name it has in its ecosystem or by a purl, and the SBOM's components are
matched on the names :func:`verifier.scans.component_from` normalised, so that no spelling escapes a ban
(docs/scans.md, "Component names"):

* names are compared after NFKC, without surrounding white space, in lower case, and under PEP 503 where
  the component is (or may be) a Python package: ``Typing_Extensions``, a full-width ``PyYAML`` and
  `` pyyaml`` are ``typing-extensions`` and ``pyyaml``;
* a Maven package is ``group:artifact`` or ``group/artifact`` (the purl's form), from the purl or from a
  CycloneDX component's ``group`` and ``name``; a bare artifact name is no Maven package;
* a purl names the ecosystem too, and its version, when it has one, must be the component's (PyPI versions
  compared under PEP 440: ``5.3`` is ``5.3.0``); a purl is parsed (``%40`` is ``@``), never compared as
  text. A banned version matches a component that records no version (it cannot be ruled out); a required
  one does not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from policies.rules.findings import Findings
from verifier.scans import Component, component_from, normal_text

__all__ = ["check_components", "wanted_package"]

_PEP503: Final = re.compile(r"[-_.]+")
# PEP 440's version scheme (its appendix's pattern), for comparing PyPI versions: 5.3 is 5.3.0, 1.0RC1 1.0rc1
_PEP440: Final = re.compile(
    r"v?(?:(?P<epoch>[0-9]+)!)?(?P<release>[0-9]+(?:\.[0-9]+)*)"
    r"(?:[-_.]?(?P<pre_l>a|b|c|rc|alpha|beta|pre|preview)[-_.]?(?P<pre_n>[0-9]+)?)?"
    r"(?:-(?P<post_n1>[0-9]+)|[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>[0-9]+)?)?"
    r"(?P<dev>[-_.]?dev[-_.]?(?P<dev_n>[0-9]+)?)?(?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?"
)
_PRE: Final = {
    "a": "a",
    "alpha": "a",
    "b": "b",
    "beta": "b",
    "c": "rc",
    "rc": "rc",
    "pre": "rc",
    "preview": "rc",
}
#: Packages named in one message at most (the rest are counted).
_SHOWN: Final = 8


@dataclass(frozen=True, slots=True)
class WantedPackage:
    """A package a policy names, ready to match: its ecosystem (a purl's type), names and version."""

    written: str
    ecosystem: str | None
    names: frozenset[str]
    version: str | None = None


def wanted_package(written: str) -> WantedPackage:
    """The package ``written`` names: a purl (``pkg:pypi/pyyaml@5.3``) or a name in its ecosystem."""
    text = normal_text(written)
    if text.startswith("pkg:"):
        parsed = component_from(written, None, written.strip())
        if parsed.ecosystem is not None:
            return WantedPackage(written, parsed.ecosystem, _names(parsed), parsed.version)
    return WantedPackage(written, None, frozenset({text, *_slashed(text)}))


def check_components(
    found: Findings,
    rule_id: str,
    *,
    required: Sequence[str],
    banned: Sequence[str],
    listed: Sequence[Component],
    origin: str,
) -> None:
    """``components``: every ``required`` package is among the ``listed`` components of the document at
    ``origin``, and no ``banned`` one.

    The components are indexed once by the PEP 503 form of their names (equal names have equal forms), so
    that each name the policy gives is compared with the few components of that name only: linear in the
    names and the components, never their product (a thousand bans against a five-thousand-component SBOM).
    """
    if not listed:
        return  # a document that lists nothing is said once, by the rule's document check
    index = ComponentIndex(listed)
    missing = [name for name in required if not index.find(wanted_package(name), unknown_version=False)]
    if missing:
        found.add(
            f"{rule_id}.required",
            f"the SBOM ({origin}) does not list {', '.join(missing)}",
            "build the image with the required components, then generate and attest its SBOM again",
        )
    hits = [
        f"{name} (listed as {c.raw_name}{f' {c.version}' if c.version else ' with no version recorded'})"
        for name in banned
        for c in index.find(wanted_package(name), unknown_version=True)
    ]
    if hits:
        found.add(
            f"{rule_id}.banned",
            f"the SBOM ({origin}) lists banned component(s): {_listed(dict.fromkeys(hits))}",
            "remove the banned components from the image, then generate and attest its SBOM again",
        )


class ComponentIndex:
    """Components by the PEP 503 form of each of their names (:func:`_names`), for :meth:`find`."""

    __slots__ = ("_by_name",)

    def __init__(self, components: Iterable[Component]) -> None:
        self._by_name: dict[str, list[Component]] = {}
        for component in components:
            for name in {_loose(n) for n in _names(component)}:
                self._by_name.setdefault(name, []).append(component)

    def find(self, wanted: WantedPackage, *, unknown_version: bool) -> list[Component]:
        """The components that are ``wanted`` (:func:`matches`), each once."""
        candidates = {id(c): c for n in wanted.names for c in self._by_name.get(_loose(n), ())}
        return [c for c in candidates.values() if matches(wanted, c, unknown_version=unknown_version)]


def matches(wanted: WantedPackage, component: Component, *, unknown_version: bool) -> bool:
    """Whether ``component`` is the package ``wanted``; ``unknown_version``: what a component that records
    no version is when ``wanted`` names one (a ban cannot rule it out; a requirement is not met by it)."""
    if wanted.ecosystem is not None and component.ecosystem not in (None, wanted.ecosystem):
        return False
    names = _names(component)
    if component.ecosystem in (None, "pypi") or wanted.ecosystem == "pypi":
        # The ecosystem may be Python's (no purl says otherwise): PEP 503, so spelling does not escape.
        if not {_loose(n) for n in names} & {_loose(n) for n in wanted.names}:
            return False
    elif not names & wanted.names:
        return False
    if wanted.version is None:
        return True
    versions = _versions(component)
    if not versions:
        return unknown_version
    python = "pypi" in (wanted.ecosystem, component.ecosystem)
    return _version_key(wanted.version, python=python) in {_version_key(v, python=python) for v in versions}


def _names(component: Component) -> frozenset[str]:
    # package (group:artifact for Maven) and name (namespace/name), and each Maven spelling of both
    names = {component.package, component.name}
    return frozenset(names | {s for n in names for s in _slashed(n)})


def _slashed(name: str) -> set[str]:
    """``group:artifact`` and ``group/artifact`` are one Maven package (README: both spellings match)."""
    if name.count(":") == 1 and "/" not in name:
        return {name.replace(":", "/")}
    if name.count("/") == 1 and ":" not in name and not name.startswith("@"):
        return {name.replace("/", ":")}
    return set()


def _versions(component: Component) -> set[str]:
    versions = {component.version} if component.version else set()
    if component.purl is not None:
        purl_version = component_from(component.raw_name, None, component.purl).version
        if purl_version:
            versions.add(purl_version)
    return versions


def _version_key(version: str, *, python: bool) -> tuple[object, ...]:
    text = normal_text(version)
    found = _PEP440.fullmatch(text) if python else None
    if found is None:
        return ("text", text)
    release = [int(part) for part in found["release"].split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    post = found["post_n1"] or found["post_n2"] or ("0" if found["post_l"] else None)
    return (
        "pep440",
        int(found["epoch"] or 0),
        tuple(release),
        (_PRE[found["pre_l"]], int(found["pre_n"] or 0)) if found["pre_l"] else None,
        int(post) if post is not None else None,
        int(found["dev_n"] or 0) if found["dev"] else None,
        re.sub(r"[-_]", ".", found["local"]) if found["local"] else None,
    )


def _loose(name: str) -> str:
    """PEP 503: ``Typing_Extensions`` and ``typing.extensions`` are ``typing-extensions``."""
    return _PEP503.sub("-", name).lower()


def _listed(items: Iterable[str]) -> str:
    shown: Sequence[str] = list(items)
    more = len(shown) - _SHOWN
    return "; ".join(shown[:_SHOWN]) + (f"; and {more} more" if more > 0 else "")

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
  text. As PEP 440's ``==``, a PyPI version without a local label names every local build of it (``2.1.0``
  is ``2.1.0+cu118``); as SemVer's precedence, an npm, Cargo, Go or NuGet version without build metadata
  names every build of it (``4.17.20`` is ``4.17.20+build.5``), and Go's ``v`` prefix is no part of the
  version (``v1.2.3`` is ``1.2.3``). A Debian, RPM or Arch version's epoch is read from the version
  (``1:1.0.2k-16.el7``) or the purl's ``epoch`` qualifier (none is 0), and one without an epoch names every
  epoch of it (a ban over-matches rather than misses). A banned version matches a component that records
  no version (it cannot be ruled out); a required one does not.
* each component is read once and indexed (:class:`ComponentIndex`); a document of more than
  :data:`verifier.scans.MAX_COMPONENTS` components is refused when it is read, and a list that long
  given here cannot tell.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote

from verifier.scans import MAX_COMPONENTS, Component, component_from, normal_text

__all__ = ["MAX_COMPONENTS", "ComponentFinding", "component_findings", "wanted_package"]

_PEP503: Final = re.compile(r"[-_.]+")
#: Ecosystems whose versions are SemVer 2, where build metadata (``+...``) never makes another version.
_SEMVER: Final = frozenset({"npm", "cargo", "golang", "nuget"})
#: Ecosystems whose versions may carry an epoch (``1:1.0.2k-16.el7``; Trivy writes it in the purl's
#: ``epoch`` qualifier instead). Alpine's apk versions have none.
_EPOCHS: Final = frozenset({"deb", "rpm", "alpm"})
_EPOCH: Final = re.compile(r"([0-9]+):(.+)")
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
            version = parsed.version
            if version is not None and parsed.ecosystem in _EPOCHS and parsed.purl is not None:
                epoch, bare = _epoch_of(version, parsed.purl)
                version = f"{epoch}:{bare}" if epoch is not None else bare
            return WantedPackage(written, parsed.ecosystem, _names(parsed), version)
    return WantedPackage(written, None, frozenset({text, *_slashed(text)}))


@dataclass(frozen=True, slots=True)
class ComponentFinding:
    """One violation the check found: its rule, what it says and how to fix it."""

    rule: str
    message: str
    fix: str
    indeterminate: bool = False


def component_findings(
    rule_id: str,
    *,
    required: Sequence[str],
    banned: Sequence[str],
    listed: Sequence[Component],
    origin: str,
    step: Callable[[int], None] = lambda _count: None,
) -> list[ComponentFinding]:
    """``components``: every ``required`` package is among the ``listed`` components of the document at
    ``origin``, and no ``banned`` one; what is not, as findings. Pure work: an evaluation runs it in its
    budget's thread, and ``step`` counts the work so that the budget can stop it.

    Each component's purl is parsed once, and the components are indexed by ecosystem, name and version
    (:class:`ComponentIndex`), so that each name the policy gives is one look-up: linear in the names and
    the components, never their product (a thousand bans against a five-thousand-component SBOM, or fifty
    versioned bans against twenty thousand copies of one package).
    """
    if not listed:
        return []  # a document that lists nothing is said once, by the rule's document check
    if len(listed) > MAX_COMPONENTS:
        return [
            ComponentFinding(
                rule_id,
                f"cannot tell: the SBOM ({origin}) lists {len(listed)} components, more than the "
                f"{MAX_COMPONENTS} trtguard reads",
                "attest an SBOM of the image alone (one entry per package)",
                indeterminate=True,
            )
        ]
    wanted = {name: wanted_package(name) for name in (*required, *banned)}
    index = ComponentIndex(listed, step, versions=any(w.version is not None for w in wanted.values()))
    findings: list[ComponentFinding] = []
    missing = [name for name in required if not index.find(wanted[name], unknown_version=False)]
    if missing:
        findings.append(
            ComponentFinding(
                f"{rule_id}.required",
                f"the SBOM ({origin}) does not list {', '.join(missing)}",
                "build the image with the required components, then generate and attest its SBOM again",
            )
        )
    hits: dict[str, None] = {}
    for name in dict.fromkeys(banned):
        matched = index.find(wanted[name], unknown_version=True)
        hits.update(dict.fromkeys(f"{name} (listed as {index.shown(c)})" for c in matched))
    if hits:
        findings.append(
            ComponentFinding(
                f"{rule_id}.banned",
                f"the SBOM ({origin}) lists banned component(s): {_listed(hits)}",
                "remove the banned components from the image, then generate and attest its SBOM again",
            )
        )
    return findings


#: A look-up key of :class:`ComponentIndex`: ecosystem (a purl type, or None) and name in it.
_Key = tuple[str | None, str]


class _Named:
    """The components of one ecosystem and name: all of them, those that record no version, and by version."""

    __slots__ = ("every", "unversioned", "versions")

    def __init__(self) -> None:
        self.every: dict[int, Component] = {}
        self.unversioned: dict[int, Component] = {}
        self.versions: dict[tuple[bool, tuple[object, ...]], dict[int, Component]] = {}


class ComponentIndex:
    """Components by ecosystem, by the name they match under (:func:`_names`: PEP 503 where the component is
    or may be a Python package) and by the key of each version they record, for :meth:`find`."""

    __slots__ = ("_holding", "_named", "_shown", "_step")

    def __init__(
        self,
        components: Iterable[Component],
        step: Callable[[int], None] = lambda _count: None,
        *,
        versions: bool = True,
    ) -> None:
        """Index ``components``, counting each in ``step`` (and :meth:`find`'s look-ups and the components
        they find); by version too unless ``versions`` is false (no name looked up names a version: then
        :meth:`find` is asked for none)."""
        self._step = step
        self._named: dict[_Key, _Named] = {}
        # the ecosystems holding each name, so that a name without an ecosystem is looked up where it is,
        # not in every ecosystem the document names (attack 35 E4: 90,000 purl types)
        self._holding: dict[str, list[str | None]] = {}
        self._shown: dict[int, str] = {}
        for component in dict.fromkeys(components):  # equal components are one
            step(1)
            recorded = _versions(component) if versions else set()
            keys: set[tuple[bool, tuple[object, ...]]] = set()
            if recorded and component.ecosystem in _EPOCHS and component.purl is not None:
                keys |= _epoch_keys(recorded, component.purl)
            for python in _key_kinds(component.ecosystem):
                for version in recorded:
                    key = _version_key(version, python=python)
                    # PEP 440: a version without a local label (+cu118) names every local build of it;
                    # SemVer: one without build metadata, every build of it
                    keys |= {(python, key), (python, _without_local(key))}
                    if component.ecosystem in _SEMVER and not python:
                        for builds in (True, False):
                            keys.add((False, _semver_key(version, component.ecosystem, builds=builds)))
            ecosystem = component.ecosystem
            for name in {_matched_as(n, ecosystem) for n in _names(component)}:
                named = self._named.get((ecosystem, name))
                if named is None:
                    named = self._named[(ecosystem, name)] = _Named()
                    self._holding.setdefault(name, []).append(ecosystem)
                named.every[id(component)] = component
                if not recorded:
                    named.unversioned[id(component)] = component
                for key in keys:
                    named.versions.setdefault(key, {})[id(component)] = component
            version = f" {component.version}" if component.version else " with no version recorded"
            self._shown[id(component)] = f"{component.raw_name}{version}"

    def shown(self, component: Component) -> str:
        """How a denial names ``component``: its written name and version."""
        return self._shown[id(component)]

    def find(self, wanted: WantedPackage, *, unknown_version: bool) -> list[Component]:
        """The components that are ``wanted``, each once: of its ecosystem (or of none), by its name in it,
        of its version when it names one (``unknown_version``: what a component that records no version is
        then: a ban cannot rule it out; a requirement is not met by it). A name without an ecosystem is
        looked up in the ecosystems that hold it; each look-up and each component found is a step."""
        if wanted.ecosystem is None:  # the ecosystems that hold the name, in the form each matches it by
            places = [
                (ecosystem, form)
                for name in wanted.names
                for form in {name, _loose(name)}
                for ecosystem in self._holding.get(form, ())
                if _matched_as(name, ecosystem) == form
            ]
        else:
            places = [(e, _matched_as(n, e)) for e in (None, wanted.ecosystem) for n in wanted.names]
        python = wanted.ecosystem == "pypi"
        key = (python, _version_key(wanted.version, python=python)) if wanted.version is not None else None
        if key is not None and wanted.version is not None and wanted.ecosystem in _SEMVER:
            key = (False, _semver_key(wanted.version, wanted.ecosystem, builds=False))
        found: dict[int, Component] = {}
        self._step(1)
        for place in dict.fromkeys(places):
            named = self._named.get(place)
            if named is None:
                self._step(1)
                continue
            if key is None:
                hits = named.every
            else:
                hits = {**named.versions.get(key, {}), **(named.unversioned if unknown_version else {})}
            self._step(1 + len(hits))  # each component found is work, as each look-up is
            found.update(hits)
        return list(found.values())


def _matched_as(name: str, ecosystem: str | None) -> str:
    """The form of ``name`` a component of ``ecosystem`` is matched by: PEP 503 where it is (or, without a
    purl, may be) a Python package, so that spelling does not escape a ban; as normalised elsewhere."""
    return _loose(name) if ecosystem in (None, "pypi") else name


def _key_kinds(ecosystem: str | None) -> tuple[bool, ...]:
    """Which version keys a component of ``ecosystem`` is compared under (PEP 440: True): PyPI's; a
    component without a purl may be a Python package or not."""
    if ecosystem == "pypi":
        return (True,)
    return (True, False) if ecosystem is None else (False,)


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
    """The versions ``component`` records: its ``version`` field and its purl's."""
    versions = {component.version} if component.version else set()
    purl_version = _purl_version(component.purl) if component.purl is not None else None
    if purl_version:
        versions.add(purl_version)
    return versions


def _epoch_of(version: str, purl: str) -> tuple[int | None, str]:
    """The epoch of a Debian, RPM or Arch ``version`` (written in it, ``1:1.0.2k``, or in the ``purl``'s
    ``epoch`` qualifier; None where neither gives one) and the version without it."""
    written = _EPOCH.fullmatch(version.strip())
    if written is not None:
        return int(written[1]), written[2]
    query = purl.split("#", 1)[0].partition("?")[2]
    for pair in query.split("&") if query else ():
        name, _, value = pair.partition("=")
        if name == "epoch" and unquote(value).strip().isdigit():
            return int(unquote(value)), version
    return None, version


def _epoch_keys(versions: set[str], purl: str) -> set[tuple[bool, tuple[object, ...]]]:
    """The keys a Debian, RPM or Arch component is found by: each version without its epoch (a ban
    without one names every epoch) and as ``epoch:version`` for each epoch it records (0 where none)."""
    split = [_epoch_of(version, purl) for version in versions]
    epochs = {epoch for epoch, _ in split if epoch is not None} or {0}
    keys: set[tuple[bool, tuple[object, ...]]] = set()
    for _, bare in split:
        keys.add((False, _version_key(bare, python=False)))
        keys |= {(False, _version_key(f"{epoch}:{bare}", python=False)) for epoch in epochs}
    return keys


def _purl_version(purl: str) -> str | None:
    """The version of a component's purl, which :func:`verifier.scans.component_from` wrote in its
    canonical form (an ``@`` inside a name percent-encoded): what follows the last ``@`` before the
    qualifiers and subpath, decoded. Reading it so costs a fraction of parsing the purl again, which an
    SBOM of one package listed twenty thousand times made the bulk of an admission (attack 27, F7)."""
    head = purl.split("#", 1)[0].split("?", 1)[0]
    _, at, version = head.rpartition("@")
    return unquote(version) if at else None


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
        _local(found["local"]) if found["local"] else None,
    )


def _semver_key(version: str, ecosystem: str | None, *, builds: bool) -> tuple[object, ...]:
    """The key of a SemVer version: Go's ``v`` prefix dropped, and with ``builds`` its build metadata too
    (a component is found by both keys; a wanted version that names a build only as that build)."""
    text = normal_text(version)
    if ecosystem == "golang" and text[:1] == "v" and text[1:2].isdigit():
        text = text[1:]
    if builds:
        text = text.split("+", 1)[0]
    return ("text", text)


def _local(label: str) -> tuple[int | str, ...]:
    """PEP 440's local label: segments split on ``.``, ``-`` or ``_``, numeric ones compared as integers."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"[-_.]", label))


def _without_local(key: tuple[object, ...]) -> tuple[object, ...]:
    """``key`` without its local label (the last part of a PEP 440 key)."""
    return (*key[:-1], None) if key[0] == "pep440" else key


def _loose(name: str) -> str:
    """PEP 503: ``Typing_Extensions`` and ``typing.extensions`` are ``typing-extensions``."""
    return _PEP503.sub("-", name).lower()


def _listed(items: Iterable[str]) -> str:
    shown: Sequence[str] = list(items)
    more = len(shown) - _SHOWN
    return "; ".join(shown[:_SHOWN]) + (f"; and {more} more" if more > 0 else "")

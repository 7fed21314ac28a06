"""policies.rules._components: the built-in ``components`` check, matching packages named in a policy against
the components of real SBOMs (tests/data 607 cyclonedx-py, 613 Trivy) however either side spells them
(attack findings F8, F9, F11), signed about the image digest and judged by the evaluator."""

from __future__ import annotations

import re

import pytest
import yaml
from packaging.specifiers import SpecifierSet

from policies.loader import PolicyLoadError
from policies.results import Action
from policies.rules._components import component_findings
from tests.policies.conftest import Material
from tests.policies.rules.test_attestations import CDX, README, attest, data, judge
from tests.policies.rules.test_scan_rules import BASE, found, policy
from verifier.scans import Component, component_from

BANNED = f"{BASE}[{CDX}].components.banned"
REQUIRED = f"{BASE}[{CDX}].components.required"


def rule(key: str, names: list[str]) -> str:
    quoted = ", ".join(f"{name!r}" for name in names)
    return f"""
    - predicateType: {CDX}
      keys: [platform/scanner]
      document: sbom
      components: {{{key}: [{quoted}]}}
    """


def sbom_with(component: dict[str, object]) -> dict[str, object]:
    """cyclonedx-py's SBOM (607) with its first component replaced."""
    document = data("607-cyclonedx-py-requirements.cdx.json")
    document["components"][0] = component
    return document


@pytest.mark.parametrize(
    "purl",
    [
        "pkg:pypi/PyYAML@5.3?foo=bar",  # qualifiers do not make another package
        "pkg:pypi/pyyaml@5.3#sub/path",  # nor a subpath
        "pkg:pypi/Py.YAML@5.3".replace(".", ""),  # PyPI names in any case
        "pkg:pypi/PyYAML@5.3.0",  # PEP 440: 5.3 is 5.3.0
        "pkg:pypi/pyyam%6C@5.3",  # percent-encoded
        "pkg:PYPI/pyyaml@5.3",  # the type in any case
    ],
)
def test_a_banned_purl_with_a_version_matches_every_spelling_of_it(material: Material, purl: str) -> None:
    # attack finding F8: the ban's purl and the SBOM's were compared as text
    attest(material, CDX, sbom_with({"type": "library", "name": "PyYAML", "version": "5.3", "purl": purl}))
    decision = judge(material, policy(rule("banned", ["pkg:pypi/pyyaml@5.3"])))
    assert found(decision) == {(BANNED, Action.DENY, False)}


def test_a_version_in_a_purl_counts(material: Material) -> None:
    # the SBOM lists PyYAML 5.3: a ban on 6.0.2 does not match, a requirement of 6.0.2 is not met
    attest(material, CDX, data("607-cyclonedx-py-requirements.cdx.json"))
    assert judge(material, policy(rule("banned", ["pkg:pypi/pyyaml@6.0.2"]))).allowed
    assert found(judge(material, policy(rule("required", ["pkg:pypi/pyyaml@6.0.2"])))) == {
        (REQUIRED, Action.DENY, False)
    }
    assert judge(material, policy(rule("required", ["pkg:pypi/pyyaml@5.3"]))).allowed


def test_a_banned_version_matches_a_component_that_records_none(material: Material) -> None:
    attest(material, CDX, sbom_with({"type": "library", "name": "PyYAML"}))
    decision = judge(material, policy(rule("banned", ["pkg:pypi/pyyaml@5.3"])))
    assert found(decision) == {(BANNED, Action.DENY, False)}
    assert "no version recorded" in decision.violations[0].message
    assert not judge(material, policy(rule("required", ["pkg:pypi/pyyaml@5.3"]))).allowed


@pytest.mark.parametrize(
    "written",
    [
        "org.apache.logging.log4j:log4j-core",
        "org.apache.logging.log4j/log4j-core",
        "pkg:maven/org.apache.logging.log4j/log4j-core",
        "pkg:maven/org.apache.logging.log4j/log4j-core@2.14",
    ],
)
@pytest.mark.parametrize("with_purl", [True, False])
def test_a_maven_ban_matches_the_purl_and_the_group_and_name_fields(
    material: Material, written: str, with_purl: bool
) -> None:
    # attack finding F9: the README's ban, in either spelling, against Trivy's component shape (613):
    # `group` and `name`, with or without the purl
    component: dict[str, object] = {
        "type": "library",
        "group": "org.apache.logging.log4j",
        "name": "log4j-core",
        "version": "2.14",
    }
    if with_purl:
        component["purl"] = "pkg:maven/org.apache.logging.log4j/log4j-core@2.14"
    attest(material, CDX, sbom_with(component))
    assert found(judge(material, policy(rule("banned", [written])))) == {(BANNED, Action.DENY, False)}
    # a bare artifact name is no Maven package; another group is another package
    assert judge(material, policy(rule("banned", ["log4j-core", "org.example:log4j-core"]))).allowed


def _readme_bans() -> list[str]:
    """The ``banned`` list of policies/README.md's example of the built-in rules."""
    found = re.search(r"^\s+banned: (\[.*\])$", README.read_text(), re.MULTILINE)
    assert found is not None
    bans: list[str] = yaml.safe_load(found.group(1))
    return bans


def test_the_readme_example_bans_what_it_says(material: Material) -> None:
    # the policies/README.md example's ban list, against Trivy's real Maven scan (613) with a log4j-core added
    assert _readme_bans() == ["org.apache.logging.log4j:log4j-core", "pkg:pypi/urllib3"]
    document = data("613-trivy-pom-scan.cdx.json")
    document["components"].append(
        {"type": "library", "group": "org.apache.logging.log4j", "name": "log4j-core", "version": "2.14.1"}
    )
    document.pop("vulnerabilities")  # an SBOM
    attest(material, CDX, document)
    decision = judge(material, policy(rule("banned", _readme_bans())))
    assert found(decision) == {(BANNED, Action.DENY, False)}
    assert "listed as log4j-core 2.14.1" in decision.violations[0].message


@pytest.mark.parametrize(
    "listed",
    [
        " PyYAML ",  # surrounding white space
        "PYYAML",  # case
        "\uff30\uff59\uff39\uff21\uff2d\uff2c",  # full-width PyYAML (NFKC)
        "Py\u00adYA\u200bML",  # invisible: a soft hyphen, a zero-width space
        "Typing_Extensions".replace("Typing_Extensions", "pyYaml"),  # mixed case
    ],
)
@pytest.mark.parametrize("with_purl", [True, False])
def test_a_name_in_another_form_does_not_escape_a_ban(
    material: Material, listed: str, with_purl: bool
) -> None:
    # attack finding F11
    component: dict[str, object] = {"type": "library", "name": listed, "version": "5.3"}
    if with_purl:
        component["purl"] = f"pkg:pypi/{listed.strip()}@5.3"
    attest(material, CDX, sbom_with(component))
    assert found(judge(material, policy(rule("banned", ["pyyaml"])))) == {(BANNED, Action.DENY, False)}
    # and a policy that writes the name in a compatibility form means the same package
    assert found(judge(material, policy(rule("banned", ["\uff50\uff59\uff59\uff41\uff4d\uff4c"])))) == {
        (BANNED, Action.DENY, False)
    }


@pytest.mark.parametrize(
    ("written", "message"),
    [
        ("pkg:pypi/pyyaml@5.3?arch=x86_64", "qualifiers"),
        ("pkg:pypi/pyyaml#sub", "subpath"),
        ("pkg:", "not a valid purl"),
    ],
)
def test_a_purl_that_cannot_name_a_package_is_refused_at_load(
    material: Material, written: str, message: str
) -> None:
    with pytest.raises(PolicyLoadError, match=message):
        judge(material, policy(rule("banned", [written])))


@pytest.mark.parametrize(
    "written",
    [
        "pkg:pypi/pyyaml@<5.4",
        "pkg:pypi/pyyaml@%3C5.4",
        "pkg:pypi/pyyaml@vers:pypi/<5.4",
        "pkg:pypi/pyyaml@>=5.3,<5.4",
        "pkg:npm/lodash@^4.17.0",
        "pyyaml<5.4",
        "pyyaml==5.3",
        "pyyaml~=5.3",
        "PyYAML@5.3",
        "@angular/core@1.0",
    ],
)
def test_a_version_range_is_refused_at_load(material: Material, written: str) -> None:
    # attack 27 case E: bans with a version range or specifier loaded and matched nothing (PyYAML 5.3 passed)
    with pytest.raises(PolicyLoadError, match="not supported"):
        judge(material, policy(rule("banned", [written])))


@pytest.mark.parametrize(
    "written", ["pkg:deb/debian/openssl@3.0.11~rc1-1", "@angular/core", "pkg:pypi/pyyaml@5.3"]
)
def test_exact_versions_and_scoped_names_still_load(material: Material, written: str) -> None:
    judge(material, policy(rule("banned", [written])))


def _parses(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """Every purl the components check parses (its calls of ``component_from``), recorded."""
    from policies.rules import _components  # noqa: PLC0415 - the module under test, patched

    parsed: list[str | None] = []
    real = component_from

    def counted(name: str, version: str | None, purl: str | None) -> Component:
        parsed.append(purl)
        return real(name, version, purl)

    monkeypatch.setattr(_components, "component_from", counted)
    return parsed


def _check(required: list[str], banned: list[str], listed: list[Component]) -> list[str]:
    """The rules that :func:`component_findings` says ``listed`` breaks."""
    found = component_findings("r", required=required, banned=banned, listed=listed, origin="sbom")
    return [finding.rule for finding in found]


def test_checking_names_is_linear_in_names_and_components(monkeypatch: pytest.MonkeyPatch) -> None:
    # the family of S1: every policy name was compared with every component (and its purl parsed each time)
    listed = [component_from(f"package-{n}", "1.0", f"pkg:pypi/package-{n}@1.0") for n in range(1000)] + [
        component_from("PyYAML", "5.3", "pkg:pypi/pyyaml@5.3")
    ]
    parsed = _parses(monkeypatch)
    bans = [f"pkg:pypi/banned-{n}" for n in range(1000)] + ["pyyaml"]
    assert _check(["package-7"], bans, listed) == ["r.banned"]
    assert len(parsed) <= len(listed) + len(bans) + 1  # each component's purl once, each policy purl once


def test_versioned_bans_parse_each_component_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # attack 27 F7: 50 versioned bans of one package against 2,000 copies of it re-parsed a purl per
    # (ban, component) pair, 100,000 parses (20,000 copies: a minute of one admission's event loop)
    listed = [component_from("PyYAML", f"9.{n}", f"pkg:pypi/pyyaml@9.{n}") for n in range(2000)]
    listed.append(component_from("PyYAML", "5.3.0", "pkg:pypi/pyyaml@5.3.0"))
    parsed = _parses(monkeypatch)
    bans = [f"pkg:pypi/pyyaml@5.{n}" for n in range(50)]
    assert _check(["pkg:pypi/pyyaml@9.1999"], bans, listed) == ["r.banned"]
    assert len(parsed) <= len(listed) + len(bans) + 1


def test_too_many_components_cannot_tell(monkeypatch: pytest.MonkeyPatch) -> None:
    from policies.rules import _components  # noqa: PLC0415 - the module under test, patched

    monkeypatch.setattr(_components, "MAX_COMPONENTS", 10)
    listed = [component_from(f"package-{n}", "1.0", None) for n in range(11)]
    [finding] = _components.component_findings("r", required=[], banned=["xz"], listed=listed, origin="sbom")
    assert finding.indeterminate and finding.rule == "r"
    assert (
        _components.component_findings("r", required=[], banned=["xz"], listed=listed[:10], origin="s") == []
    )


@pytest.mark.parametrize(
    ("banned", "listed", "hit"),
    [
        ("pkg:pypi/torch@2.1.0", "2.1.0+cu118", True),  # PEP 440: no local label in the ban: every build
        ("pkg:pypi/torch@2.1", "2.1.0+CU118", True),
        ("pkg:pypi/torch@2.1.0+cu118", "2.1.0+cu118", True),
        ("pkg:pypi/torch@2.1.0+cu118", "2.1.0+cu121", False),  # a local label in the ban names that build
        ("pkg:pypi/torch@2.1.0+cu118", "2.1.0", False),
        ("pkg:pypi/torch@2.1.0+abc.01", "2.1.0+abc-1", True),  # segments compared as PEP 440 says
        ("pkg:pypi/torch@2.1.0", "2.1.0.post1+cu118", False),
    ],
)
def test_a_pypi_version_matches_as_pep_440_equality_does(banned: str, listed: str, hit: bool) -> None:
    # attack 27 F2: a ban of pkg:pypi/torch@2.1.0 missed torch 2.1.0+cu118 (every CUDA wheel of
    # download.pytorch.org carries such a label); packaging, the reference, agrees with each case
    version = banned.split("@")[1]
    assert (listed in SpecifierSet(f"=={version}")) is hit
    component = component_from("torch", listed, f"pkg:pypi/torch@{listed.replace('+', '%2B')}")
    assert _check([], [banned], [component]) == (["r.banned"] if hit else [])
    assert _check([banned], [], [component]) == ([] if hit else ["r.required"])


@pytest.mark.parametrize("ecosystem", ["deb", "rpm"])
def test_other_ecosystems_compare_versions_as_written(ecosystem: str) -> None:
    # a Debian or RPM version's "+" is part of it (1.2+dfsg-1), not a local label nor build metadata
    component = component_from("pkg", "1.2+dfsg-1", f"pkg:{ecosystem}/pkg@1.2%2Bdfsg-1")
    assert _check([], [f"pkg:{ecosystem}/pkg@1.2"], [component]) == []
    assert _check([], [f"pkg:{ecosystem}/pkg@1.2+DFSG-1"], [component]) == ["r.banned"]


@pytest.mark.parametrize(
    ("purl", "banned", "matches"),
    [
        # SemVer precedence ignores build metadata: a ban without one names every build
        ("pkg:npm/lodash@4.17.20%2Bbuild.5", "pkg:npm/lodash@4.17.20", True),
        ("pkg:cargo/time@0.1.45%2Bpatched", "pkg:cargo/time@0.1.45", True),
        ("pkg:nuget/Newtonsoft.Json@12.0.1%2Bsha.abc", "pkg:nuget/newtonsoft.json@12.0.1", True),
        # a ban that names a build names that build only
        ("pkg:npm/lodash@4.17.20%2Bbuild.5", "pkg:npm/lodash@4.17.20+build.6", False),
        ("pkg:npm/lodash@4.17.20%2Bbuild.5", "pkg:npm/lodash@4.17.20+build.5", True),
        # Go: the "v" is no part of the version, and +incompatible is build metadata
        ("pkg:golang/github.com/gin-gonic/gin@v1.6.0", "pkg:golang/github.com/gin-gonic/gin@1.6.0", True),
        (
            "pkg:golang/github.com/docker/docker@v20.10.0%2Bincompatible",
            "pkg:golang/github.com/docker/docker@v20.10.0",
            True,
        ),
        (
            "pkg:golang/github.com/docker/docker@v20.10.0%2Bincompatible",
            "pkg:golang/github.com/docker/docker@20.10.0+incompatible",
            True,
        ),
        ("pkg:npm/lodash@4.17.21", "pkg:npm/lodash@4.17.20", False),
    ],
)
def test_semver_versions_match_as_semver_precedence_does(purl: str, banned: str, matches: bool) -> None:
    component = component_from("x", None, purl)
    assert _check([], [banned], [component]) == (["r.banned"] if matches else [])


def test_the_torch_wheel_of_a_cuda_image_is_banned_end_to_end(material: Material) -> None:
    sbom = data("607-cyclonedx-py-requirements.cdx.json")
    sbom["components"].append(
        {"type": "library", "name": "torch", "version": "2.1.0+cu118", "purl": "pkg:pypi/torch@2.1.0%2Bcu118"}
    )
    attest(material, CDX, sbom)
    decision = judge(material, policy(rule("banned", ["pkg:pypi/torch@2.1.0"])))
    assert found(decision) == {(BANNED, Action.DENY, False)}
    assert "torch 2.1.0+cu118" in decision.violations[0].message


@pytest.mark.parametrize(
    ("purl", "version", "banned", "matches"),
    [
        # attack 35 C2: Trivy splits the epoch into the purl's qualifier; errata write epoch:version-release
        ("pkg:rpm/centos/openssl-libs@1.0.2k-16.el7?epoch=1", "1.0.2k", "1:1.0.2k-16.el7", True),
        ("pkg:rpm/centos/openssl-libs@1.0.2k-16.el7?epoch=1", "1.0.2k", "1.0.2k-16.el7", True),
        ("pkg:rpm/centos/openssl-libs@1.0.2k-16.el7?epoch=1", "1.0.2k", "0:1.0.2k-16.el7", False),
        ("pkg:rpm/centos/openssl-libs@1.0.2k-16.el7?epoch=1", "1.0.2k", "2:1.0.2k-16.el7", False),
        ("pkg:rpm/centos/openssl-libs@1.0.2k-16.el7", None, "0:1.0.2k-16.el7", True),  # no epoch is 0
        ("pkg:rpm/centos/openssl-libs@1.0.2k-16.el7", None, "1:1.0.2k-16.el7", False),
        ("pkg:rpm/centos/openssl-libs@1.0.2k-16.el7", None, "1.0.2k-16.el7?epoch=0", True),
        ("pkg:rpm/centos/openssl-libs@1.0.2k-16.el7", None, "1.0.2k-16.el7?epoch=1", False),
        ("pkg:deb/debian/libc6@2:2.28-10", None, "2.28-10", True),  # an epoch written in the version
        ("pkg:deb/debian/libc6@2:2.28-10", None, "2:2.28-10", True),
        ("pkg:deb/debian/libc6@2:2.28-10", None, "1:2.28-10", False),
    ],
)
def test_rpm_and_debian_epochs_match_however_written(
    purl: str, version: str | None, banned: str, matches: bool
) -> None:
    component = component_from("x", version, purl)
    wanted = purl.split("@", maxsplit=1)[0] + "@" + banned
    assert _check([], [wanted], [component]) == (["r.banned"] if matches else [])


def test_a_name_only_ban_looks_only_where_the_name_is(monkeypatch: pytest.MonkeyPatch) -> None:
    # attack 35 E4: a name without an ecosystem was looked up in every ecosystem the SBOM names, uncounted
    # (90,000 purl types x 200 bans: 23 s of CPU charged as 200 steps)
    from policies.rules import _components  # noqa: PLC0415 - the module under test, patched

    listed = [component_from("x", "1", f"pkg:t{n}x/c{n}@1") for n in range(2000)]
    listed += [component_from("xz", "1", f"pkg:t{n}x/xz@1") for n in range(50)]
    steps: list[int] = []
    index = _components.ComponentIndex(listed, steps.append)
    assert sum(steps) == len(listed)
    looked: list[tuple[str, str | None]] = []
    real = _components._matched_as

    def counted(name: str, ecosystem: str | None) -> str:
        looked.append((name, ecosystem))
        return real(name, ecosystem)

    monkeypatch.setattr(_components, "_matched_as", counted)
    steps.clear()
    for n in range(200):
        assert index.find(_components.wanted_package(f"ban{n}"), unknown_version=True) == []
    assert len(looked) == 0  # no ecosystem holds the names
    assert 200 <= sum(steps) <= 2 * 200
    steps.clear()
    assert len(index.find(_components.wanted_package("xz"), unknown_version=True)) == 50
    assert len(looked) == 50  # the 50 ecosystems that hold it, each once
    assert sum(steps) >= len(looked) + 50  # each look-up and each component found is counted

"""policies._allow_lists: ``vulnerabilities.allow`` and ``allowFrom`` files: where the file may be (attack
finding F3) and how many comparisons matching findings costs (S1), with real scanner output (605, 609)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from policies._allow_lists import AllowEntry, AllowList
from policies.loader import PolicyLoadError
from tests.policies.conftest import Material
from tests.policies.rules.test_attestations import VULN, attest, data, judge, wrapped
from tests.policies.rules.test_scan_rules import policy, vulns

NOW = datetime(2026, 12, 2, tzinfo=UTC)


class CountedId(str):
    """An allow-list entry's id that counts how often it is compared or hashed."""

    __slots__ = ()
    operations = 0

    def __eq__(self, other: object) -> bool:
        CountedId.operations += 1
        return str.__eq__(self, other)

    def __hash__(self) -> int:
        CountedId.operations += 1
        return str.__hash__(self)


def _allow_from(name: str) -> str:
    return vulns("high").replace("maxSeverity: high", f"maxSeverity: high\n        allowFrom: {name!r}")


@pytest.mark.parametrize(("entries", "findings"), [(100, 100), (1000, 1000)])
def test_matching_findings_is_linear_in_entries_and_ids(entries: int, findings: int) -> None:
    # attack finding S1: every finding scanned the whole list (entries x findings x aliases comparisons)
    CountedId.operations = 0
    listed = AllowList.of(
        AllowEntry(CountedId(f"CVE-2099-{n:05d}"), "filler", None, "exceptions.allow.yaml:1")
        for n in range(entries)
    )
    built = CountedId.operations
    CountedId.operations = 0
    ids_per_finding = 3
    for n in range(findings):
        # none is allow-listed but the last: the worst case for a scan of the list
        admitted, expired = listed.match(
            (f"GHSA-{n}", f"PYSEC-{n}", f"CVE-2099-{entries - 1:05d}" if n == findings - 1 else f"CVE-3-{n}"),
            NOW,
        )
        assert (admitted is not None) == (n == findings - 1) and expired == []
    assert built <= 2 * entries  # indexed once
    assert CountedId.operations <= findings * ids_per_finding  # never entries x findings


def test_an_expired_entry_is_reported_and_an_active_one_admits() -> None:
    expired = AllowEntry("CVE-2020-14343", "old", datetime(2026, 1, 1, tzinfo=UTC), "a:1")
    active = AllowEntry("CVE-2020-14343", "renewed", None, "a:2")
    assert AllowList.of([expired]).match(("PYSEC-2021-142", "CVE-2020-14343"), NOW) == (None, [expired])
    assert AllowList.of([expired, active]).match(("CVE-2020-14343",), NOW) == (active, [])


def entry(finding_id: str) -> AllowEntry:
    return AllowEntry(finding_id, "triaged", None, "policy.yaml:1")


def test_allowing_one_cve_never_admits_another_the_same_finding_carries() -> None:
    # grype names Amazon Linux findings by advisory, with every CVE it fixes as a reference (attack 35b)
    finding = ("ALAS-2023-1950", "CVE-2023-0215", "CVE-2023-0286")
    one = entry("CVE-2023-0215")
    assert AllowList.of([one]).match(finding, NOW) == (None, [])
    both = [one, entry("CVE-2023-0286")]
    assert AllowList.of(both).match(finding, NOW)[0] == one
    advisory = entry("ALAS-2023-1950")
    assert AllowList.of([advisory]).match(finding, NOW) == (advisory, [])
    # one vulnerability under several schemes (GHSA with its CVE and PYSEC aliases): any of them admits
    ghsa = ("GHSA-8q59-q68h-6hv4", "CVE-2020-14343", "PYSEC-2021-142")
    assert AllowList.of([entry("CVE-2020-14343")]).match(ghsa, NOW)[0] is not None


@pytest.mark.parametrize("where", ["../outside.allow.yaml", "sub/../../outside.allow.yaml", "absolute"])
def test_allow_from_outside_the_policy_folder_is_refused(material: Material, where: str) -> None:
    # attack finding F3: `allowFrom` read any file on the machine
    outside = material.root.parent / f"{material.root.name}-outside.allow.yaml"
    outside.write_text("- {id: CVE-2020-14343, reason: nobody reviewed this}\n")
    folder = material.root / "policies"
    folder.mkdir()
    name = str(outside) if where == "absolute" else where.replace("outside", f"{material.root.name}-outside")
    attest(material, VULN, wrapped(data("605-pip-audit-pyyaml-5.3.json")))
    material.root = folder  # the policy is written into the folder
    with pytest.raises(PolicyLoadError, match="must lie in the policy's folder"):
        judge(material, policy(_allow_from(name)))


def test_allow_from_a_symbolic_link_out_of_the_folder_is_refused(material: Material) -> None:
    outside = material.root / "elsewhere"
    outside.mkdir()
    (outside / "real.allow.yaml").write_text("- {id: CVE-2020-14343, reason: r}\n")
    folder = material.root / "policies"
    (folder / "lists").mkdir(parents=True)
    (folder / "lists" / "link.allow.yaml").symlink_to(outside / "real.allow.yaml")
    attest(material, VULN, wrapped(data("605-pip-audit-pyyaml-5.3.json")))
    material.root = folder
    with pytest.raises(PolicyLoadError, match=r"is a symbolic link to .*outside the policy's folder"):
        judge(material, policy(_allow_from("lists/link.allow.yaml")))


def test_allow_from_below_the_folder_and_links_inside_it_are_read(material: Material) -> None:
    # a ConfigMap mount: the file is a link to ..data/, inside the folder
    attest(material, VULN, wrapped(data("609-cyclonedx-vex-pyyaml-ratings.cdx.json")))
    (material.root / "..data").mkdir()
    (material.root / "..data" / "x.allow.yaml").write_text("- {id: CVE-2020-14343, reason: r}\n")
    (material.root / "lists").mkdir()
    (material.root / "lists" / "x.allow.yaml").symlink_to(Path("..") / "..data" / "x.allow.yaml")
    assert judge(material, policy(_allow_from("lists/x.allow.yaml"))).allowed
    assert not judge(material, policy(vulns("high"))).allowed  # without the list: the CRITICAL finding

"""The seven intents of docs/scans.md ("Seven intents, without CEL"), each read from the page and run on
real scanner output (tests/data 602-607: pip-audit in CycloneDX and JSON, cyclonedx-py) attested seven
ways with real keys: fresh, stale, future, unaudited, tampered, wrong key, wrong subject (issue 27)."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from policies.evaluator import PolicyEvaluator
from policies.loader import load_policy_set
from policies.results import Decision
from tests.conftest import DATA
from tests.policies.conftest import Material
from verifier.evidence_folder import LocalEvidence

SCANS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "scans.md"
VULN = "https://cosign.sigstore.dev/attestation/vuln/v1"
CDX = "https://cyclonedx.org/bom"
DIGEST = "c7" * 32
IMAGE = f"registry.example.com/team/app@sha256:{DIGEST}"
NOW = datetime(2026, 12, 2, 12, tzinfo=UTC)
#: The intents that judge a scan (the others judge an SBOM), by their names on the page.
SCAN_INTENTS = ("no-critical", "allow-listed", "fresh-scan", "either-format")
SBOM_INTENTS = ("lists-pyyaml", "no-banned", "fresh-sbom")
STATES = ("fresh", "stale", "future", "unaudited", "tampered", "wrong-key", "wrong-subject")


def intents() -> dict[str, str]:
    """The policies of the page's "Seven intents" section, by name."""
    section = SCANS_PAGE.read_text().split("## Seven intents, without CEL", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```yaml\n(.*?)```", section, re.S)
    return {re.search(r"metadata: \{name: ([a-z-]+)\}", b).group(1): b for b in blocks}  # type: ignore[union-attr]


def _time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _document(scan: bool, state: str) -> tuple[str, dict[str, Any]]:
    made = {"stale": NOW - timedelta(days=40), "future": NOW + timedelta(days=30)}.get(
        state, NOW - timedelta(days=1)
    )
    if scan:
        result = (
            "604-pip-audit-offline-skipped.json" if state == "unaudited" else "606-pip-audit-clean.cdx.json"
        )
        predicate = {
            "scanner": {
                "uri": "pkg:pypi/pip-audit@2.10.1",
                "result": json.loads((DATA / result).read_text()),
            },
            "metadata": {"scanStartedOn": _time(made), "scanFinishedOn": _time(made)},
        }
        return VULN, predicate
    source = (
        "602-pip-audit-offline-skipped.cdx.json"
        if state == "unaudited"
        else "607-cyclonedx-py-requirements.cdx.json"
    )
    bom: dict[str, Any] = json.loads((DATA / source).read_text())
    bom["metadata"] = {**bom["metadata"], "timestamp": _time(made)}
    return CDX, bom


def judge(material: Material, policy: str, state: str, scan: bool) -> Decision:
    predicate_type, predicate = _document(scan, state)
    signer = "rogue" if state == "wrong-key" else "image-signer"
    subject = "ee" * 32 if state == "wrong-subject" else DIGEST
    material.statement(subject, predicate_type, predicate, signer, "document.json")
    if state == "tampered":  # the signed statement edited afterwards: its signature no longer verifies
        path = material.attestations / "document.json"
        envelope = json.loads(path.read_text())
        signed = base64.b64decode(envelope["payload"])
        statement = signed.replace(b'"PyYAML"', b'"PyYAmL"', 1)
        assert statement != signed
        envelope["payload"] = base64.b64encode(statement).decode()
        path.write_text(json.dumps(envelope))
    paths = [material.policy(policy), material.keys_file("image-signer")]
    material.key("rogue")
    engine = PolicyEvaluator(load_policy_set(paths), LocalEvidence(material.attestations), clock=lambda: NOW)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "app", "namespace": "prod"},
        "spec": {"containers": [{"name": "app", "image": IMAGE}]},
    }
    return asyncio.run(engine.evaluate(pod))


def test_the_page_has_seven_intents_without_cel() -> None:
    found = intents()
    assert sorted(found) == sorted((*SCAN_INTENTS, *SBOM_INTENTS))
    assert not any("cel:" in text or "conditions:" in text for text in found.values())


#: What each state must say in some violation (None: admitted).
SAID = {
    "future": "in the future",
    "tampered": "payload altered",
    "wrong-key": "signed by [platform/image-signer]",
    "wrong-subject": "found 1 signed about other digests",
}


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("name", (*SCAN_INTENTS, *SBOM_INTENTS))
def test_each_intent_on_each_document(material: Material, name: str, state: str) -> None:
    decision = judge(material, intents()[name], state, scan=name in SCAN_INTENTS)
    stale_denied = name in ("fresh-scan", "fresh-sbom")
    admitted = state == "fresh" or (state == "stale" and not stale_denied)
    assert decision.allowed is admitted, [v.one_line() for v in decision.violations]
    if admitted:
        assert decision.violations == ()
        return
    messages = " | ".join(v.message for v in decision.violations)
    if state == "stale":
        assert {v.rule.rsplit(".", 1)[1] for v in decision.violations} == {"maxAge"}
        assert ("the scan is 40 days" if name == "fresh-scan" else "the SBOM is 40 days") in messages
    elif state == "unaudited":
        # (anyOf: the CycloneDX alternative is missing, the cosign one cannot tell)
        assert any(v.indeterminate and v.rule.endswith(".document") for v in decision.violations), messages
        assert not any(v.error for v in decision.violations)
    else:
        assert SAID[state] in messages
        assert not any(v.error for v in decision.violations)

"""Fixtures of the evidence-report tests: packages made by the evidence tests' end-to-end flow.

The world is the one of tests/trtguard/audit/package (a decision log written by the webhook's own Reviewer
against the demo policies, with signed approvals and a GPU verification). A second log holds requests
carrying the hostile strings of tests/data/760-hostile-strings.json in a workload's name, the requester and
its groups (the invisible and line-breaking ones among them), an engine's volume name, a container's name,
the engines annotation and an image reference, so that they reach the package's records, the denial
messages and the page.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from decisionlog import SQLiteStore
from tests.support.harness import pod, review
from tests.trtguard.audit.package.world import (
    World,
    edit_record,
    export_package,
    make_world,
    rewrite,
)
from trtguard.audit.package import Selection
from trtguard.demo.material import TENSORRT_IMAGE
from verifier.evidence_folder import LocalEvidence
from webhook._admission import Reviewer
from webhook._metrics import Metrics
from webhook._policy_store import PolicyStore
from webhook._wire import parse_review_document

HOSTILE_FILE = Path(__file__).parents[3] / "data" / "760-hostile-strings.json"


#: The hostile strings of invisible or line-breaking characters: a requester's groups carry them.
INVISIBLE = (
    "tag_characters",
    "line_separators",
    "soft_hyphen",
    "variation_selectors",
    "hangul_filler",
    "escape_sequence",
)
#: Each as the report writes it out.
WRITTEN_OUT = {
    "tag_characters": "ops<U+E0061><U+E0064><U+E006D><U+E0069><U+E006E>",
    "line_separators": "alice<U+2028>bob<U+2029>carol<U+0085>dave",
    "soft_hyphen": "ad<U+00AD>min",
    "variation_selectors": "root<U+FE0F><U+E0100>",
    "hangul_filler": "<U+3164>",
    "escape_sequence": "<U+001B>[2Jcleared",
}


def hostile_strings() -> dict[str, str]:
    """The hostile strings by name."""
    strings: dict[str, str] = json.loads(HOSTILE_FILE.read_text())["strings"]
    return strings


@pytest.fixture(scope="package")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    """A decision log judged by the webhook, its material, and the exporter's key."""
    return make_world(tmp_path_factory.mktemp("report-world"))


@pytest.fixture(scope="package")
def resnet_package(world: World, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default (segment) package of every decision about prod/resnet."""
    output = tmp_path_factory.mktemp("packages") / "resnet.tar.gz"
    asyncio.run(export_package(world, Selection.workload("prod/resnet"), output))
    return output


@pytest.fixture(scope="package")
def fp16_package(world: World, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package of the fp16 engine's admissions (seq 2 and 3): its segment holds the INT8 engine that
    replaced it in both workloads (seq 7 and 9)."""
    output = tmp_path_factory.mktemp("packages") / "fp16.tar.gz"
    asyncio.run(export_package(world, Selection.engine(world.engine_digests["fp16"]), output))
    return output


@pytest.fixture(scope="package")
def tampered_package(resnet_package: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The resnet package with one decision turned from a denial into an admission, no key at hand."""
    output = tmp_path_factory.mktemp("tampered") / "tampered.tar.gz"
    return rewrite(resnet_package, output, edit_record(4, "allowed", True))


def _hostile_pods(world: World) -> list[tuple[dict[str, Any], str, list[str]]]:
    """(pod, requester, groups) of each hostile request."""
    s = hostile_strings()
    fp16 = world.material.engines["fp16"]
    named = pod("hostile-volume", TENSORRT_IMAGE, engine=fp16)
    named["metadata"]["name"] = s["script"] + s["bidi_override"]
    named["spec"]["volumes"][0]["name"] = s["attribute_break"]
    named["spec"]["containers"][0]["volumeMounts"][0]["name"] = s["attribute_break"]
    named["spec"]["containers"][0]["name"] = s["single_quote_break"]
    annotated = pod("hostile-annotation", TENSORRT_IMAGE)
    annotated["metadata"]["annotations"] = {
        "trtguard.dev/engines": json.dumps([{"name": s["svg_onload"] + s["template_syntax"], "ref": fp16}]),
        "note": s["style_import"],
    }
    denied = pod("hostile-image", f"registry.example.com/{s['javascript_url']}{s['script']}:latest")
    invisible = [s[name] for name in INVISIBLE]
    return [
        (named, s["bidi_override"] + s["attribute_break"], [s["zero_width"], s["script"], *invisible]),
        (annotated, s["javascript_url"], [s["style_import"]]),
        (denied, s["svg_onload"], []),
    ]


async def _judge_hostile(world: World, log: Path) -> None:
    store = SQLiteStore(log)
    await store.open()
    policies = PolicyStore(world.policies, LocalEvidence(world.attestations))
    policies.load()
    reviewer = Reviewer(policies, store, Metrics())
    try:
        for obj, user, groups in _hostile_pods(world):
            body = review(obj=obj)
            body["request"]["userInfo"] = {"username": user, "groups": groups}
            await reviewer.review(parse_review_document(body), api_timeout=10, started=time.perf_counter())
    finally:
        await store.close()


@pytest.fixture(scope="package")
def hostile_package(world: World, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package of the fp16 engine's admissions from a log of hostile requests (denials in its chain)."""
    root = tmp_path_factory.mktemp("hostile")
    log = root / "hostile.db"
    asyncio.run(_judge_hostile(world, log))
    hostile_world = World(
        root,
        world.material,
        log,
        world.exporter,
        world.key_file,
        world.public_key,
        world.password_file,
        world.engine_files,
        world.engine_digests,
    )
    output = root / "hostile.tar.gz"
    selection = Selection.engine(world.engine_digests["fp16"])
    asyncio.run(export_package(hostile_world, selection, output))
    return output

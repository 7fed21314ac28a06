"""trtguard/attestation_folder.py and ``trtguard fetch-attestations``: a folder fetched from a real registry
gives ``check --attestations`` the verdicts ``check --registry`` gives.

The registry holds the world of the cache-order tests (:func:`tests.policies.registry_world.build_world`):
signed and unsigned images sharing a digest, a ``.sig`` tag copied into another repository, engines with
good and forged build manifests, and an engine mirrored into another repository without its manifest (which
the folder must not let the good engine's manifest vouch for: evidence stays per repository).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.policies.registry_world import World, build_world, pod, run_cli
from tests.support.localregistry import LocalRegistry, start_registry

pytestmark = pytest.mark.registry
_FILE = re.compile(r"manifest\.json|(signature-\d+\.cosign|bundle-\d+\.sigstore|attestation-\d+\.dsse)\.json")
_DIGEST = re.compile(r"sha256-[0-9a-f]{64}")


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    running = start_registry(tmp_path_factory.mktemp("folder-registry"), http={}, auth=None)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def world(registry: LocalRegistry, tmp_path_factory: pytest.TempPathFactory) -> World:
    return build_world(registry, tmp_path_factory.mktemp("folder-world"))


def _workloads(world: World, folder: Path) -> Path:
    path = folder / "workloads.yaml"
    documents = [pod(r.image, r.engine, name=name) for name, r in world.resources.items()]
    path.write_text(yaml.safe_dump_all(documents))
    return path


def _verdicts(world: World, workloads: Path, *evidence: object) -> dict[str, tuple[bool, list[str]]]:
    status, out, err = run_cli(
        "check", "--policies", world.policies, *evidence, "--format", "json", workloads
    )
    assert status in (0, 1), err
    results: list[dict[str, Any]] = json.loads(out)
    return {
        result["name"]: (
            result["allowed"],
            sorted(f"{v['rule']}: {v['message']}" for v in result["violations"]),
        )
        for result in results
    }


def test_a_fetched_folder_gives_the_registrys_verdicts(world: World, tmp_path: Path) -> None:
    workloads = _workloads(world, tmp_path)
    folder = tmp_path / "evidence"
    status, out, err = run_cli(
        "fetch-attestations", workloads, "-o", folder, "--registry-config", world.config
    )
    assert status == 0, err
    assert f"wrote {folder}:" in out
    online = _verdicts(world, workloads, "--registry-config", world.config)
    offline = _verdicts(world, workloads, "--attestations", folder)
    assert {name: allowed for name, (allowed, _) in online.items()} == {
        name: r.allowed for name, r in world.resources.items()
    }
    assert {name: allowed for name, (allowed, _) in offline.items()} == {
        name: allowed for name, (allowed, _) in online.items()
    }
    # The same rules fail for the same reasons, where a message does not name where evidence was looked for.
    for name, (_, violations) in online.items():
        assert [v.split(":")[0] for v in offline[name][1]] == [v.split(":")[0] for v in violations], name
    # The kinds of file the folder may hold, one folder per artifact: <registry>/<repository>/<digest>.
    files = [p.relative_to(folder) for p in folder.rglob("*") if p.is_file()]
    assert files and all(_FILE.fullmatch(p.name) and _DIGEST.fullmatch(p.parent.name) for p in files)
    assert {p.parts[0] for p in files} == {world.host}
    assert {p.name for p in files} >= {"manifest.json", "signature-1.cosign.json", "attestation-1.dsse.json"}


def test_an_empty_folder_is_required_unless_forced(world: World, tmp_path: Path) -> None:
    workloads = _workloads(world, tmp_path)
    folder = tmp_path / "evidence"
    folder.mkdir()
    (folder / "stale.dsse.json").write_text("{}")
    status, _, err = run_cli("fetch-attestations", workloads, "-o", folder, "--registry-config", world.config)
    assert status == 2 and "the folder is not empty" in err
    status, _, err = run_cli(
        "fetch-attestations", workloads, "-o", folder, "--registry-config", world.config, "--force"
    )
    assert status == 0, err
    assert not (folder / "stale.dsse.json").exists()


def test_tags_are_fetched_and_named_for_pinning(world: World, tmp_path: Path) -> None:
    tagged = world.resources["signed"].image.split("@")[0]
    path = tmp_path / "tagged.yaml"
    path.write_text(yaml.safe_dump(pod(tagged, None)))
    status, out, err = run_cli(
        "fetch-attestations", path, "-o", tmp_path / "f", "--registry-config", world.config
    )
    assert status == 0, err
    assert "1 artifact(s), 1 signature(s)" in out
    assert f"{tagged} is named by tag" in err and f"trtguard digest {tagged}" in err
    status, out, err = run_cli("digest", tagged, "--registry-config", world.config)
    assert status == 0, err
    assert out.strip() == f"{tagged.rsplit(':', 1)[0]}@{world.resources['signed'].image.split('@')[1]}"

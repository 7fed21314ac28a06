"""trtguard/audit/package/verify/attestations.py: a build manifest swapped for another engine's, and an
approval signed by a key outside the included TrustedKeys, fail."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.trtguard.audit.package.world import (
    World,
    messages,
    reseal,
    rewrite,
    verify_package,
)
from verifier.dsse import Envelope
from verifier.intoto import sign_statement, statement_from_envelope
from verifier.keys import generate_private_key


def test_a_swapped_build_manifest_is_not_about_the_engine(
    world: World, resnet_package: Path, tmp_path: Path
) -> None:
    fp16 = f"engines/{world.engine_digests['fp16'].replace(':', '-')}/build-manifest-1.dsse.json"
    other = (world.attestations / "engine-int8-calibrated.build-manifest.dsse.json").read_bytes()

    def swap(files: dict[str, bytes], *_: Any) -> None:
        files[fp16] = other

    outsider = verify_package(world, rewrite(resnet_package, tmp_path / "outsider.tar.gz", swap))
    assert f"package: files changed (SHA-256 or size differ from the index): {fp16}" in messages(
        outsider, "fail"
    )
    insider = verify_package(world, reseal(resnet_package, tmp_path / "insider.tar.gz", world.exporter, swap))
    [failure] = messages(insider, "fail")
    assert f"{fp16} is about sha256:{world.engine_files['int8-calibrated'][7:]}" in failure
    assert failure.endswith("not this engine")


def test_an_approval_signed_by_an_unknown_key_fails(
    world: World, resnet_package: Path, tmp_path: Path
) -> None:
    path = f"engines/{world.engine_digests['fp16'].replace(':', '-')}/change-approval-1.dsse.json"

    def forge(files: dict[str, bytes], *_: Any) -> None:
        envelope = Envelope.from_json(files[path])
        files[path] = sign_statement(statement_from_envelope(envelope), generate_private_key()).to_json()

    report = verify_package(world, reseal(resnet_package, tmp_path / "t.tar.gz", world.exporter, forge))
    assert messages(report, "fail") == [
        f"engines: engine {world.engine_digests['fp16'][:19]}…: change-approval {path} is not signed by a "
        "key of the included TrustedKeys"
    ]

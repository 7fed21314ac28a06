"""trtguard/audit/package/verify/attestations.py: a build manifest swapped for another engine's, one that
admission would refuse, and an approval signed by a key outside the included TrustedKeys, fail."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.policies.conftest import manifest_data
from tests.trtguard.audit.package.world import (
    World,
    messages,
    reseal,
    rewrite,
    verify_package,
)
from trtguard.audit.package.contents import AttestationFile, EngineInfo
from trtguard.audit.package.verify.attestations import check_attestation
from trtguard.audit.package.verify.findings import Findings
from verifier.crypto._dsse import Envelope
from verifier.crypto._intoto import ResourceDescriptor, Statement, sign_statement, statement_from_envelope
from verifier.crypto._keys import PrivateKey, generate_private_key
from verifier.manifest import ENGINE_BUILD_PREDICATE_TYPE, EngineBuildManifest
from verifier.verification import StatementTrust


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


def _manifest_file(subjects: list[str], output_sha256: str, key: PrivateKey) -> bytes:
    """A signed build manifest whose statement is about ``subjects`` and whose predicate describes the engine
    file ``output_sha256``."""
    data = manifest_data(b"engine fp16")
    data["output_engine"]["sha256"] = output_sha256
    manifest = EngineBuildManifest.model_validate(data)
    statement = Statement(
        subject=[ResourceDescriptor(name="model.plan", digest={"sha256": s}) for s in subjects],
        predicate_type=ENGINE_BUILD_PREDICATE_TYPE,
        predicate=manifest.model_dump(mode="json"),
    )
    return sign_statement(statement, key).to_json()


def test_a_build_manifest_admission_would_refuse_fails_here_too() -> None:
    # The statement is about the engine file L and about Y, and the engine it describes (output_engine) is Y:
    # admission refuses it for an artifact whose engine layer is L, and since issue 26 so does the checker
    # (before, a statement subject among the engine's subjects sufficed).
    key = generate_private_key()
    artifact, engine_file, other = "ee" * 32, "ab" * 32, "cd" * 32
    entry = EngineInfo(
        digest=f"sha256:{artifact}",
        references=[],
        subjects=[f"sha256:{engine_file}", f"sha256:{artifact}"],
        attestations=[],
        signatures=[],
        problems=[],
    )
    trust = StatementTrust.with_keys({"platform/build-signer": key.public_key()})
    attestation = AttestationFile(path="build-manifest-1.dsse.json", kind="build-manifest", origin="folder")
    results = {}
    for case, output in (("describes it", engine_file), ("describes another", other)):
        findings = Findings()
        members = {attestation.path: _manifest_file([engine_file, other], output, key)}
        check_attestation(members, attestation, name="engine", entry=entry, trust=trust, findings=findings)
        results[case] = [(f.status, f.message) for f in findings.items]
    assert [status for status, _ in results["describes it"]] == ["pass"]
    [(status, message)] = results["describes another"]
    assert status == "fail"
    assert message == (
        "engine: build manifest build-manifest-1.dsse.json would not be admitted: the build manifest "
        f"describes the engine file sha256:{other}, not the engine layer sha256:{engine_file} of artifact "
        f"sha256:{artifact}"
    )

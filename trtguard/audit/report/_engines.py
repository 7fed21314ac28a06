"""The engines of a verified evidence package: build manifests, GPU verifications and approvals, read back.

The package verifier has already checked each attestation's signature against the included keys; this
module only reads their predicates into the models the report renders, in the order the engines were first
admitted (then by build time), and numbers them as versions for the chart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from pydantic import ValidationError

from trtguard.audit.package.contents import EngineInfo
from trtguard.audit.report._decisions import Admission, InForce
from verifier.attestations import ChangeApproval, EngineVerification
from verifier.base import TrtguardError
from verifier.crypto import Envelope, statement_from_envelope
from verifier.manifest import EngineBuildManifest, load_manifest, manifest_digest


@dataclass(frozen=True, slots=True)
class BuildRecord:
    """One signed build manifest of an engine and its manifest digest."""

    path: str
    digest: str
    manifest: EngineBuildManifest

    @property
    def precisions(self) -> list[str]:
        """The precisions the build allowed (weak typing) or the network carries (strong typing)."""
        config = self.manifest.builder_config
        return [str(p) for p in (config.precision_flags or config.network_precisions)]


@dataclass(frozen=True, slots=True)
class EngineView:
    """One engine of the package; ``version`` is its place in the order it was admitted (1 first)."""

    version: int
    digest: str
    references: tuple[str, ...]
    builds: tuple[BuildRecord, ...]
    verifications: tuple[EngineVerification, ...]
    approvals: tuple[ChangeApproval, ...]
    signatures: int
    problems: tuple[str, ...] = field(default=())
    first_admitted: int | None = None
    #: Model signatures of its inputs (the package verifier's findings say who signed them, what they cover).
    model_signatures: int = 0


def read_engines(
    engines: Sequence[EngineInfo], members: Mapping[str, bytes], admissions: Sequence[Admission]
) -> list[EngineView]:
    """The package's engines with their attestations read, in admission (then build) order."""
    first: dict[str, int] = {}
    for admission in admissions:
        for change in admission.changes:
            if change.artifact == "engine":
                first.setdefault(change.new.rsplit("@", 1)[-1], admission.seq)
    views = [_engine(info, members, first.get(info.digest)) for info in engines]
    views.sort(key=lambda view: (view.first_admitted is None, view.first_admitted or 0, _built(view)))
    # Numbered once sorted: the order of admission is the version.
    return [replace(view, version=number) for number, view in enumerate(views, start=1)]


def _engine(info: EngineInfo, members: Mapping[str, bytes], first_admitted: int | None) -> EngineView:
    builds: list[BuildRecord] = []
    verifications: list[EngineVerification] = []
    approvals: list[ChangeApproval] = []
    problems = list(info.problems)
    for attestation in info.attestations:
        data = members.get(attestation.path)
        if data is None:
            problems.append(f"{attestation.path} is not in the package")
            continue
        try:
            envelope = Envelope.from_json(data, location=attestation.path)
            statement = statement_from_envelope(envelope, location=attestation.path)
            if attestation.kind == "build-manifest":
                manifest = load_manifest(statement, attestation.path)
                builds.append(BuildRecord(attestation.path, manifest_digest(envelope), manifest))
            elif attestation.kind == "engine-verification":
                verifications.append(EngineVerification.model_validate(statement.predicate))
            else:
                approvals.append(ChangeApproval.model_validate(statement.predicate))
        except TrtguardError as error:
            problems.append(f"{attestation.path}: {error.message}")
        except ValidationError as error:
            problems.append(
                f"{attestation.path}: not a valid {attestation.kind} ({error.error_count()} errors)"
            )
    return EngineView(
        version=0,
        digest=info.digest,
        references=tuple(info.references),
        builds=tuple(builds),
        verifications=tuple(verifications),
        approvals=tuple(approvals),
        signatures=len(info.signatures),
        problems=tuple(problems),
        first_admitted=first_admitted,
        model_signatures=len(info.model_signatures),
    )


def _built(view: EngineView) -> tuple[bool, str]:
    return (not view.builds, view.builds[0].manifest.build_timestamp.isoformat() if view.builds else "")


@dataclass(frozen=True, slots=True)
class RunningEngine:
    """The first screen's card: an engine a workload runs now, with the facts an auditor asks for first.

    ``engine`` is None when the package holds nothing of the engine; ``build`` the build record whose
    engine file the artifact carries (its first, when the package holds several).
    """

    now: InForce
    engine: EngineView | None
    build: BuildRecord | None

    @property
    def engine_file(self) -> str | None:
        """``sha256:…`` of the engine file, the digest approvals name."""
        return f"sha256:{self.build.manifest.output_engine.sha256}" if self.build is not None else None


def running_now(in_force: Sequence[InForce], engines: Sequence[EngineView]) -> list[RunningEngine]:
    """A card for each engine in force, joined with the package's engine of that artifact digest."""
    by_digest = {engine.digest: engine for engine in engines}
    cards = []
    for now in in_force:
        engine = by_digest.get(now.reference.rsplit("@", 1)[-1])
        build = engine.builds[0] if engine is not None and engine.builds else None
        cards.append(RunningEngine(now, engine, build))
    return cards

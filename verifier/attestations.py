"""trtguard's predicate types and the models of the verification and approval predicates.

Three predicates travel in in-toto Statements (DSSE-signed) whose subject is an engine file:

* :data:`ENGINE_BUILD_PREDICATE_TYPE`: the build manifest (model in :mod:`verifier.manifest`);
* :data:`ENGINE_VERIFICATION_PREDICATE_TYPE`: what the GPU verifier observed when it loaded the engine
  (:class:`EngineVerification`);
* :data:`CHANGE_APPROVAL_PREDICATE_TYPE`: a release-committee member's approval of one engine digest for one
  audit ID and the change kinds it covers (:class:`ChangeApproval`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from verifier._predicate_statement import validate_predicate
from verifier.crypto import Statement
from verifier.predicates import (
    ChangeKind,
    Digest,
    Gpu,
    NonEmptyStr,
    OptimizationProfile,
    Sha256Hex,
    StrictModel,
    Timestamp,
)

ENGINE_BUILD_PREDICATE_TYPE = "https://trtguard.dev/attestations/engine-build/v1"
ENGINE_VERIFICATION_PREDICATE_TYPE = "https://trtguard.dev/attestations/engine-verification/v1"
CHANGE_APPROVAL_PREDICATE_TYPE = "https://trtguard.dev/attestations/change-approval/v1"

__all__ = [
    "CHANGE_APPROVAL_PREDICATE_TYPE",
    "ENGINE_BUILD_PREDICATE_TYPE",
    "ENGINE_VERIFICATION_PREDICATE_TYPE",
    "ChangeApproval",
    "ChangeKind",
    "EngineVerification",
    "FieldCheck",
    "Gpu",
    "IoTensor",
    "ObservedEngine",
    "Runtime",
    "VerifierInfo",
    "load_approval",
    "load_verification",
]


class VerifierInfo(StrictModel):
    """The program that made the observation."""

    name: NonEmptyStr = "trtguard"
    version: NonEmptyStr


class ObservedEngine(StrictModel):
    """The engine file that was checked (the Statement's subject)."""

    name: NonEmptyStr
    sha256: Sha256Hex
    size: Annotated[int, Field(ge=0)]


class Runtime(StrictModel):
    """The TensorRT runtime that deserialized the engine."""

    module: Literal["tensorrt", "tensorrt_lean", "tensorrt_rtx"]
    tensorrt_version: NonEmptyStr
    plan_tensorrt_version: str | None = Field(
        default=None, description="version read from the plan header (bytes 24-27); null when absent"
    )


class IoTensor(StrictModel):
    """One input or output tensor as the runtime reports it (-1 marks a dynamic dimension)."""

    name: NonEmptyStr
    mode: Literal["input", "output"]
    dtype: NonEmptyStr = Field(examples=["float32", "float16", "int8"])
    shape: list[Annotated[int, Field(ge=-1)]]
    format: str | None = Field(default=None, description="the runtime's format description string")


class FieldCheck(StrictModel):
    """The outcome for one manifest field: what it declared, what was observed."""

    field: NonEmptyStr = Field(examples=["builder_config.optimization_profiles"])
    status: Literal["pass", "fail", "not_checked"]
    declared: Any = None
    observed: Any = None
    detail: str | None = Field(default=None, description="why it failed, or why it could not be checked")


class EngineVerification(StrictModel):
    """What the GPU verifier observed when it loaded the engine, and the verdict per declared field."""

    verified_at: Timestamp
    verifier: VerifierInfo
    engine: ObservedEngine
    manifest_digest: Digest | None = Field(
        default=None,
        description="manifest_digest of the build manifest the engine was checked against: the SHA-256 of "
        "its DSSE payload (the in-toto statement)",
    )
    runtime: Runtime
    gpu: Gpu
    io_tensors: list[IoTensor]
    optimization_profiles: list[OptimizationProfile] = Field(default_factory=list)
    layer_precisions: dict[NonEmptyStr, Annotated[int, Field(ge=0)]] | None = Field(
        default=None,
        description="layer count per precision where the runtime exposes it (needs the full runtime and a "
        "DETAILED build); null where it could not be read",
    )
    checks: list[FieldCheck]
    result: Literal["pass", "fail"]

    @model_validator(mode="after")
    def _verdict(self) -> EngineVerification:
        failed = [check.field for check in self.checks if check.status == "fail"]
        if failed and self.result == "pass":
            raise PydanticCustomError(
                "verdict",
                "'fail' because these checks failed: {failed}",
                {"field": "result", "got": "pass", "failed": ", ".join(failed)},
            )
        if not failed and self.result == "fail":
            raise PydanticCustomError(
                "verdict",
                "'pass', or a check with status 'fail' that says why",
                {"field": "result", "got": "fail"},
            )
        return self


def _distinct_changes(changes: list[ChangeKind]) -> list[ChangeKind]:
    if len(set(changes)) != len(changes):
        raise PydanticCustomError("duplicate", "each change kind once")
    return changes


class ChangeApproval(StrictModel):
    """A signed approval of one engine digest, for one audit ID, covering the listed change kinds."""

    engine_digest: Digest
    audit_id: NonEmptyStr
    changes: Annotated[list[ChangeKind], Field(min_length=1), AfterValidator(_distinct_changes)]
    approver: NonEmptyStr = Field(description="the committee member, e.g. an e-mail address")
    approved_at: Timestamp
    expires_at: Timestamp | None = None
    manifest_digest: Digest | None = Field(
        default=None,
        description="manifest_digest of the build manifest the approver reviewed: the SHA-256 of its DSSE "
        "payload (the in-toto statement)",
    )
    reference: str | None = Field(default=None, description="change ticket or meeting minutes")
    comment: str | None = None

    @model_validator(mode="after")
    def _expiry(self) -> ChangeApproval:
        if self.expires_at is not None and self.expires_at <= self.approved_at:
            raise PydanticCustomError(
                "expiry",
                "a time after approved_at",
                {"field": "expires_at", "got": self.expires_at.isoformat()},
            )
        return self


def load_verification(data: Mapping[str, Any] | Statement, source: str) -> EngineVerification:
    """Validate an engine-verification predicate, bare or inside an in-toto Statement.

    A Statement must have the engine-verification predicate type and a subject with ``engine.sha256``.
    Raises :class:`~verifier.base.InputError` listing every problem with its field path.
    """
    return validate_predicate(
        EngineVerification,
        data,
        source,
        predicate_type=ENGINE_VERIFICATION_PREDICATE_TYPE,
        what="engine verification attestation",
        subject=("engine.sha256", lambda verification: verification.engine.sha256),
    )


def load_approval(data: Mapping[str, Any] | Statement, source: str) -> ChangeApproval:
    """Validate a change-approval predicate, bare or inside an in-toto Statement.

    A Statement must have the change-approval predicate type and a subject with ``engine_digest``.
    Raises :class:`~verifier.base.InputError` listing every problem with its field path.
    """
    return validate_predicate(
        ChangeApproval,
        data,
        source,
        predicate_type=CHANGE_APPROVAL_PREDICATE_TYPE,
        what="change approval",
        subject=("engine_digest", lambda approval: approval.engine_digest.removeprefix("sha256:")),
    )

"""The policy documents, as pydantic models: ``TrustedKeys`` and ``InferencePolicy`` (``WorkloadKind`` is in
:mod:`policies._kind_schema`).

The documents are Kubernetes-style YAML (``apiVersion``, ``kind``, ``metadata``, ``spec``) with camelCase
keys. Unknown keys are errors everywhere: a misspelt rule must never be silently ignored. Every field is
documented with an example in ``policies/README.md``; ``trtguard schema policy`` prints the JSON Schema.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, TypeAdapter, field_validator, model_validator

from policies._kind_schema import WorkloadKindDocument
from policies._scan_schema import (
    AllowedVulnerability,
    ComponentRule,
    DocumentKind,
    Severity,
    VulnerabilityRule,
    expiry_time,
    judged_document,
    scan_rule_problem,
)
from policies._strict import API_VERSION, KeyRef, Metadata, Name, StrictModel, parse_duration, refuse_repeats
from policies._trusted_keys import NotationSigner, TrustedKey, TrustedKeysDocument, trusted_keys_yaml
from policies.requesters import RequesterRule, RequesterSet
from policies.results import Action
from policies.workload_model import ImageField
from verifier.attestations import ChangeKind

__all__ = [
    "API_VERSION",
    "AllowedVulnerability",
    "ApprovalRule",
    "AttestationAnyOf",
    "AttestationCondition",
    "AttestationEntry",
    "AttestationRule",
    "BuildManifestRule",
    "ChangeControl",
    "ComponentRule",
    "Expression",
    "GpuCompatibilityRule",
    "ImageRule",
    "InferencePolicyDocument",
    "InferencePolicySpec",
    "KeyRef",
    "KindName",
    "LabelExpression",
    "LabelSelector",
    "Metadata",
    "ModelRulesSpec",
    "ModelsRule",
    "Name",
    "NotationSigner",
    "Precision",
    "ResourceFilter",
    "Severity",
    "SignatureRule",
    "SignersRule",
    "ToolchainRule",
    "TrustedKey",
    "TrustedKeysDocument",
    "VerificationRule",
    "VulnerabilityRule",
    "_Model",
    "expiry_time",
    "parse_duration",
    "policy_json_schema",
    "trusted_keys_yaml",
]

#: The base of every model here (named so since before it moved to policies._strict).
_Model = StrictModel


# --- InferencePolicy ---------------------------------------------------------------------------------------


class LabelExpression(_Model):
    """One Kubernetes label selector requirement."""

    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _values_fit(self) -> LabelExpression:
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"operator {self.operator} needs at least one value")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"operator {self.operator} takes no values")
        return self


class LabelSelector(_Model):
    """Kubernetes label selector: every ``matchLabels`` pair and every expression must hold."""

    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelExpression] = Field(default_factory=list)

    @model_validator(mode="after")
    def _not_empty(self) -> LabelSelector:
        # An empty selector selects every object: under `exclude` it would switch the whole policy off.
        if not self.match_labels and not self.match_expressions:
            raise ValueError("an empty selector selects every object; give matchLabels or matchExpressions")
        return self


KindName = Annotated[
    str,
    Field(
        pattern=r"^[A-Z][A-Za-z0-9]*(\.[a-z0-9]([a-z0-9.-]*[a-z0-9])?)?$",
        description="a built-in kind (Deployment) or Kind.group (RayCluster.ray.io, Job.batch.volcano.sh)",
    ),
]


class ResourceFilter(_Model):
    """Which resources a policy applies to (``match``) or skips (``exclude``)."""

    # An empty list would silently select nothing (match) or everything (exclude): absent says "any".
    namespaces: list[str] | None = Field(
        default=None, min_length=1, description="namespace globs; absent = any"
    )
    kinds: list[KindName] | None = Field(
        default=None, min_length=1, description="absent = every workload kind trtguard knows"
    )
    labels: LabelSelector | None = Field(default=None, description="selector on the object's own labels")
    requesters: RequesterSet | None = Field(default=None, description="who makes the request (userInfo)")


class SignersRule(_Model):
    """``threshold`` distinct signers out of the named ``keys`` (the threshold must be reachable)."""

    keys: list[KeyRef] = Field(min_length=1)
    threshold: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _threshold_reachable(self) -> SignersRule:
        if self.threshold > len(set(self.keys)):
            raise ValueError(f"threshold {self.threshold} is more than the {len(set(self.keys))} keys listed")
        return self


class SignatureRule(SignersRule):
    """Signatures required on the image (cosign classic or Sigstore bundle)."""


class AttestationCondition(_Model):
    """CEL over the verified attestation (``predicate``; ``scan`` for SBOMs and scans) that must hold."""

    name: Name | None = None
    cel: str = Field(min_length=1)
    message: str = Field(min_length=1, description="what is wrong when the expression is false")


class AttestationRule(SignatureRule):
    """An attestation of ``predicateType`` signed by ``threshold`` of ``keys`` whose subject is the image."""

    predicate_type: str = Field(min_length=1)
    document: DocumentKind | None = Field(
        default=None,
        description="which document the rule judges (an SBOM or a vulnerability scan): what maxAge measures "
        "and which attached documents count; needed with maxAge on a CycloneDX type",
    )
    max_age: str | None = Field(
        default=None,
        description="e.g. 7d; from the document's time (a scan's: the older of the scan and its "
        "vulnerability database)",
    )
    vulnerabilities: VulnerabilityRule | None = None
    components: ComponentRule | None = None
    conditions: list[AttestationCondition] = Field(default_factory=list)

    @model_validator(mode="after")
    def _readable(self) -> AttestationRule:
        if self.max_age is not None:
            parse_duration(self.max_age)
        scan_rule_problem(
            self.predicate_type, self.document, self.judges(), max_age=self.max_age is not None,
            vulnerabilities=self.vulnerabilities is not None, components=self.components is not None,
        )  # fmt: skip
        names = [c.name for c in self.conditions if c.name is not None]
        if len(names) != len(set(names)):
            raise ValueError(f"condition names must be unique (rule ids are built from them): {names}")
        return self

    def judges(self) -> DocumentKind | None:
        """The document the rule judges: ``document``, else what the predicate type or the rule's checks
        say (:func:`~policies._scan_schema.judged_document`)."""
        return judged_document(self.predicate_type, self.document, self.vulnerabilities, self.components)


class AttestationAnyOf(_Model):
    """Attestation entries of which one must hold (``anyOf``): for images that carry one of several
    formats. Each alternative has its own keys, threshold and checks; see policies/README.md."""

    any_of: list[AttestationRule] = Field(min_length=2)


def _attestation_entry(value: Any) -> str:
    if isinstance(value, AttestationAnyOf) or (isinstance(value, dict) and "anyOf" in value):
        return "anyOf"
    return "rule"


AttestationEntry = Annotated[
    Annotated[AttestationRule, Tag("rule")] | Annotated[AttestationAnyOf, Tag("anyOf")],
    Discriminator(_attestation_entry),
]


class ImageRule(_Model):
    """A class of images (by glob over normalised references) and what each of them must satisfy."""

    name: Name
    match: list[str] = Field(min_length=1, description="globs over normalised references")
    fields: list[ImageField] | None = Field(
        default=None,
        min_length=1,
        description="the image fields this rule judges (container, initContainer, ephemeralContainer, "
        "volume, modelcar: a KServe oci:// storage URI, which runs as a container and so is judged by "
        "container rules too); absent = every field",
    )
    exclude: list[str] = Field(default_factory=list, description="globs this rule does not apply to")
    require_digest: bool = Field(default=False, description="the workload must pin the image by digest")
    pin_digest: bool = Field(
        default=False,
        description="the mutating webhook (and `check --fix`) pins a tag to the digest this rule verified; "
        "a reference by tag that reaches the validating webhook unpinned is then denied",
    )
    digests: list[str] | None = Field(default=None, description="allow-list of sha256 digests")
    signatures: SignatureRule | None = None
    attestations: list[AttestationEntry] = Field(default_factory=list)
    tensorrt_version: str | None = Field(
        default=None,
        pattern=r"^[0-9]+(\.[0-9]+){2,3}$",
        description="the TensorRT runtime version in the images this rule selects (gpuCompatibility)",
    )

    def attestation_alternatives(self) -> list[tuple[AttestationRule, ...]]:
        """Each ``attestations`` entry as the alternatives of which one must hold (one for a plain entry)."""
        return [tuple(e.any_of) if isinstance(e, AttestationAnyOf) else (e,) for e in self.attestations]

    def attestation_rules(self) -> list[AttestationRule]:
        """Every attestation rule, those inside ``anyOf`` included, in order."""
        return [rule for alternatives in self.attestation_alternatives() for rule in alternatives]

    @field_validator("digests")
    @classmethod
    def _digest_form(cls, digests: list[str] | None) -> list[str] | None:
        for digest in digests or []:
            _check_digest(digest)
        return digests

    @field_validator("fields")
    @classmethod
    def _unique_fields(cls, fields: list[ImageField] | None) -> list[ImageField] | None:
        if fields is not None and len(set(fields)) != len(fields):
            raise ValueError(f"each field may be listed once: {fields}")
        return fields

    @model_validator(mode="after")
    def _pins_what_it_verifies(self) -> ImageRule:
        # A rule that checks nothing at the digest would pin whatever the tag named then, as if verified.
        if self.pin_digest and self.signatures is None and not self.attestations and self.digests is None:
            raise ValueError(
                "pinDigest pins the digest this rule verified: give the rule signatures, attestations or "
                "digests to verify it by"
            )
        return self


def _check_digest(digest: str) -> None:
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        raise ValueError(f"{digest!r} is not 'sha256:' followed by 64 lower-case hex characters")


class BuildManifestRule(SignersRule):
    """The engine's signed build manifest: who must have signed it and how old it may be."""

    max_age: str | None = Field(default=None, description="e.g. 180d; age is measured from build_timestamp")
    onnx_signed_by: SignersRule | None = Field(default=None, description="model-signing signers of its ONNX")
    calibration_signed_by: SignersRule | None = Field(default=None, description="signers of its dataset")

    @field_validator("max_age")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None:
            parse_duration(value)
        return value


class VerificationRule(SignersRule):
    """A passing GPU verification attestation for the engine, signed by the verifier's key."""


class ToolchainRule(_Model):
    """Which TensorRT builder image an engine may come from."""

    same_as_runtime_image: bool = Field(
        default=False,
        description="the builder image digest must equal the digest of a container using the engine",
    )
    # An empty list would read as "no builder allowed" but check nothing: absent says "no allow-list".
    allowed: list[str] | None = Field(
        default=None, min_length=1, description="globs over the builder image reference"
    )

    @model_validator(mode="after")
    def _something(self) -> ToolchainRule:
        if not self.same_as_runtime_image and not self.allowed:
            raise ValueError("set 'sameAsRuntimeImage: true' or list 'allowed' images")
        return self


class Expression(_Model):
    """A CEL expression over ``manifest``, ``workload`` and ``engine`` that must evaluate to true."""

    name: Name | None = None
    cel: str = Field(min_length=1)
    message: str = Field(min_length=1, description="what is wrong when the expression is false")


class GpuCompatibilityRule(_Model):
    """The engine fits the GPUs the Pod can be scheduled on, and the TensorRT runtime that loads it."""

    nodes: bool = Field(
        default=True, description="node selection confines the Pod to GPUs the engine runs on"
    )
    runtime: bool = Field(default=True, description="the runtime image's TensorRT can load the engine")

    @model_validator(mode="after")
    def _something(self) -> GpuCompatibilityRule:
        if not (self.nodes or self.runtime):
            raise ValueError("check 'nodes', 'runtime' or both")
        return self


Precision = Literal["fp32", "tf32", "fp16", "bf16", "int8", "fp8", "int4", "fp4"]


class ModelRulesSpec(_Model):
    """Rules over the verified build manifest of each engine."""

    precisions: list[Precision] | None = Field(default=None, min_length=1)
    int8_requires_calibration: bool = False
    min_accuracy: dict[str, Annotated[float, Field(allow_inf_nan=False)]] = Field(default_factory=dict)
    toolchain: ToolchainRule | None = None
    plugins_allowed: list[str] | None = Field(
        default=None, description="plugin library allow-list: 'sha256:<hex>' digests; [] allows no plugin"
    )
    expressions: list[Expression] = Field(default_factory=list)
    gpu_compatibility: GpuCompatibilityRule | None = None

    @field_validator("plugins_allowed")
    @classmethod
    def _plugin_digests(cls, digests: list[str] | None) -> list[str] | None:
        for digest in digests or []:
            _check_digest(digest)
        return digests

    @field_validator("expressions")
    @classmethod
    def _unique_names(cls, expressions: list[Expression]) -> list[Expression]:
        names = [e.name for e in expressions if e.name is not None]
        if len(names) != len(set(names)):
            raise ValueError(f"expression names must be unique (rule ids are built from them): {names}")
        return expressions


class ModelsRule(_Model):
    """What every engine the workload declares must satisfy."""

    required: bool = Field(default=False, description="a matched workload without an engine is a violation")
    # An empty list would make no image volume an engine: absent says "every image volume".
    engines: list[str] | None = Field(
        default=None,
        min_length=1,
        description="globs over normalised references: the image volumes (and model storage URIs) that are "
        "engines; one an annotation names, or that is an engine artifact, is one anyway; absent = every one",
    )
    build_manifest: BuildManifestRule | None = None
    verification: VerificationRule | None = None
    rules: ModelRulesSpec = Field(default_factory=ModelRulesSpec)

    @model_validator(mode="after")
    def _rules_need_manifest(self) -> ModelsRule:
        rules = self.rules
        needs_manifest = bool(
            rules.precisions is not None
            or rules.int8_requires_calibration
            or rules.min_accuracy
            or rules.toolchain
            or rules.plugins_allowed is not None
            or rules.expressions
            or rules.gpu_compatibility
        )
        if needs_manifest and self.build_manifest is None:
            raise ValueError(
                "model rules read the engine's build manifest, so 'buildManifest.keys' must say who signs it"
            )
        return self


class ApprovalRule(SignersRule):
    """Who approves gated changes and how many approvals are needed."""


class ChangeControl(_Model):
    """Gated engine changes need signed approvals for the engine digest and audit ID."""

    gated: list[ChangeKind] = Field(min_length=1, description="change kinds of `trtguard manifest diff`")
    approvals: ApprovalRule


class InferencePolicySpec(_Model):
    """``spec`` of an InferencePolicy."""

    match: ResourceFilter = Field(default_factory=ResourceFilter)
    exclude: ResourceFilter | None = None
    action: Action = Action.DENY
    on_error: Action = Field(
        default=Action.DENY,
        description="what a rule does whose evidence could not be fetched (never a silent allow)",
    )
    on_indeterminate: Action = Field(
        default=Action.DENY,
        description="what a rule does whose evidence was fetched but cannot tell (an unrated finding, a "
        "scan that skipped packages, an empty SBOM, a signed document that does not read)",
    )
    images: list[ImageRule] = Field(default_factory=list)
    models: ModelsRule | None = None
    change_control: ChangeControl | None = None
    requester: RequesterRule | None = None

    @field_validator("images")
    @classmethod
    def _unique_rules(cls, rules: list[ImageRule]) -> list[ImageRule]:
        refuse_repeats([r.name for r in rules], "image rule names must be unique")
        return rules

    @model_validator(mode="after")
    def _has_rules(self) -> InferencePolicySpec:
        if not self.images and self.models is None and self.requester is None:
            raise ValueError("a policy needs 'images', 'models' or 'requester' rules")
        if self.change_control is not None and (self.models is None or self.models.build_manifest is None):
            raise ValueError("changeControl compares build manifests, so 'models.buildManifest' must be set")
        return self


class InferencePolicyDocument(_Model):
    """A policy over the images and engines of inference workloads."""

    api_version: Literal["trtguard.dev/v1alpha1"]
    kind: Literal["InferencePolicy"]
    metadata: Metadata
    spec: InferencePolicySpec


def policy_json_schema() -> dict[str, Any]:
    """JSON Schema of the policy documents (one of TrustedKeys, InferencePolicy, WorkloadKind), by alias."""

    adapter: TypeAdapter[TrustedKeysDocument | InferencePolicyDocument | WorkloadKindDocument] = TypeAdapter(
        Annotated[
            TrustedKeysDocument | InferencePolicyDocument | WorkloadKindDocument, Field(discriminator="kind")
        ]
    )
    schema: dict[str, Any] = _without_null(adapter.json_schema(by_alias=True))
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "trtguard policy document"
    return schema


def _without_null(schema: Any) -> Any:
    """``schema`` without the ``null`` alternatives pydantic writes for optional fields (null is refused)."""
    if isinstance(schema, list):
        return [_without_null(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result = {
        key: _without_null(value) for key, value in schema.items() if not (key == "default" and value is None)
    }
    alternatives = result.get("anyOf")
    if not isinstance(alternatives, list):  # absent, or a property named anyOf (attestation entries)
        return result
    choices = [c for c in alternatives if c != {"type": "null"}]
    if len(choices) == 1:
        del result["anyOf"]
        result.update(choices[0])
    else:
        result["anyOf"] = choices
    return result

"""The policy documents, as pydantic models: ``TrustedKeys`` and ``InferencePolicy`` (``WorkloadKind`` is in
:mod:`policies.kind_schema`).

The documents are Kubernetes-style YAML (``apiVersion``, ``kind``, ``metadata``, ``spec``) with camelCase
keys. Unknown keys are errors everywhere: a misspelt rule must never be silently ignored.
``policies/README.md`` documents every field with an example; ``trtguard schema policy`` prints the
JSON Schema.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator
from pydantic.alias_generators import to_camel

from policies.podspec import ImageField
from policies.results import Action
from verifier.attestations import ChangeKind
from verifier.keys import PublicKey

API_VERSION = "trtguard.dev/v1alpha1"

_NAME = r"^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$"
_KEY_REF = r"^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?/[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$"
_DURATION = re.compile(r"^(\d+)(s|m|h|d|w)$")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}

Name = Annotated[str, Field(pattern=_NAME, description="lower-case DNS-1123 name")]
KeyRef = Annotated[
    str, Field(pattern=_KEY_REF, description="'<TrustedKeys name>/<key name>', e.g. 'platform/image-signer'")
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True)

    @field_validator("*")
    @classmethod
    def _not_null(cls, value: object) -> object:
        # `key:` with nothing after it is what a file cut off while being written leaves behind, and for most
        # optional rules null would mean "no such check" (`signatures:` → no signature check). An absent key
        # takes its default; an explicit null is never accepted. (After validation, not before: pydantic
        # allows no before-validator on the `kind` discriminator; non-optional types refuse null themselves.)
        if value is None:
            raise ValueError("null is not allowed: give a value, or leave the key out to get its default")
        return value


def parse_duration(text: str) -> timedelta:
    """``30s``, ``15m``, ``12h``, ``180d``, ``2w`` → timedelta."""
    found = _DURATION.fullmatch(text)
    if found is None:
        raise ValueError(
            f"{text!r} is not a duration; write a whole number and a unit s, m, h, d or w (180d)"
        )
    return timedelta(seconds=int(found.group(1)) * _DURATION_UNITS[found.group(2)])


class Metadata(_Model):
    """``metadata`` of a policy document."""

    name: Name
    annotations: dict[str, str] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)


# --- TrustedKeys -------------------------------------------------------------------------------------------


class FileRef(_Model):
    """A file, relative to the policy file that names it."""

    file: str


class KeylessSigner(_Model):
    """Keyless (Fulcio) signer: certificate identity and OIDC issuer, checked offline against a root."""

    issuer: str | None = Field(default=None, description="OIDC issuer URL, exact match")
    issuer_regexp: str | None = Field(default=None, description="OIDC issuer, full-match regexp")
    subject: str | None = Field(default=None, description="certificate identity (SAN), exact match")
    subject_regexp: str | None = Field(default=None, description="certificate identity, full-match regexp")
    trusted_root: FileRef = Field(
        description="Sigstore trusted_root.json (never fetched on the request path)"
    )

    @model_validator(mode="after")
    def _one_each(self) -> KeylessSigner:
        for exact, pattern, name in (
            (self.issuer, self.issuer_regexp, "issuer"),
            (self.subject, self.subject_regexp, "subject"),
        ):
            if (exact is None) == (pattern is None):
                raise ValueError(f"give exactly one of '{name}' and '{name}Regexp'")
            if pattern is not None:
                try:
                    re.compile(pattern)
                except re.error as error:
                    raise ValueError(f"{name}Regexp does not compile: {error}") from None
        return self


class OpenPGPKeySource(_Model):
    """An OpenPGP public key (certificate with its subkeys and revocations): armored inline, or a file."""

    armored: str | None = Field(default=None, description="ASCII-armored public key (`gpg --armor --export`)")
    file: str | None = Field(default=None, description="key file, relative to this policy file")

    @model_validator(mode="after")
    def _one(self) -> OpenPGPKeySource:
        if (self.armored is None) == (self.file is None):
            raise ValueError("give exactly one of 'armored' and 'file'")
        return self


class NotationTrustStores(_Model):
    """Notation trust stores by type: certificate files (PEM or DER), relative to this policy file."""

    ca: list[str] | None = Field(default=None, min_length=1, description="anchors notary.x509 signatures")
    signing_authority: list[str] | None = Field(default=None, min_length=1, description="signingAuthority")
    tsa: list[str] | None = Field(default=None, min_length=1, description="RFC 3161 timestamp authorities")


class NotationSigner(_Model):
    """A Notary Project signer, as a Notation trust policy statement says it (docs/signatures.md)."""

    trust_stores: NotationTrustStores
    trusted_identities: list[str] = Field(min_length=1, description="'x509.subject: <DN>' entries, or '*'")
    registry_scopes: list[str] = Field(min_length=1, description="'registry/repository' names, or '*'")
    verification_level: Literal["strict", "permissive", "audit", "skip"] = "strict"


class TrustedKey(_Model):
    """One named signer: a public key (PEM or file), a keyless identity, an OpenPGP key, a Notation signer."""

    name: Name
    public_key: str | None = Field(default=None, description="PEM public key (ECDSA, Ed25519 or RSA)")
    file: str | None = Field(default=None, description="PEM public key file, relative to this policy file")
    keyless: KeylessSigner | None = None
    openpgp: OpenPGPKeySource | None = Field(default=None, description="signs build manifests and approvals")
    notation: NotationSigner | None = Field(default=None, description="signs images (Notary Project)")
    rekor_public_key: FileRef | None = Field(
        default=None, description="when set, signatures must carry a Rekor inclusion promise by this log key"
    )

    @model_validator(mode="after")
    def _one_source(self) -> TrustedKey:
        sources = (self.public_key, self.file, self.keyless, self.openpgp, self.notation)
        if len([x for x in sources if x is not None]) != 1:
            raise ValueError("give exactly one of 'publicKey', 'file', 'keyless', 'openpgp' and 'notation'")
        if self.rekor_public_key is not None and (self.openpgp is not None or self.notation is not None):
            raise ValueError("'rekorPublicKey' goes with cosign keys and keyless identities only")
        return self


class TrustedKeysSpec(_Model):
    """``spec`` of a TrustedKeys document."""

    keys: list[TrustedKey] = Field(min_length=1)

    @field_validator("keys")
    @classmethod
    def _unique(cls, keys: list[TrustedKey]) -> list[TrustedKey]:
        names = [k.name for k in keys]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"key names must be unique; repeated: {', '.join(duplicates)}")
        return keys


class TrustedKeysDocument(_Model):
    """A set of named signers that policies refer to as ``<metadata.name>/<key name>``."""

    api_version: Literal["trtguard.dev/v1alpha1"]
    kind: Literal["TrustedKeys"]
    metadata: Metadata
    spec: TrustedKeysSpec


def trusted_keys_yaml(name: str, keys: Mapping[str, PublicKey], *, comment: str = "") -> str:
    """A TrustedKeys document named ``name`` (YAML text) with each of ``keys`` inline as PEM.

    ``comment`` (one or more lines) goes at the top, each line prefixed with ``# ``.
    """
    lines = [f"# {line}" for line in comment.splitlines()]
    lines += [
        f"apiVersion: {API_VERSION}",
        "kind: TrustedKeys",
        "metadata:",
        f"  name: {name}",
        "spec:",
        "  keys:",
    ]
    for key_name, key in keys.items():
        lines += [f"    - name: {key_name}", "      publicKey: |"]
        lines += [f"        {line}" for line in key.to_pem().decode().strip().splitlines()]
    return "\n".join(lines) + "\n"


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


class AttestationRule(SignatureRule):
    """An attestation of ``predicateType`` signed by ``threshold`` of ``keys`` whose subject is the image."""

    predicate_type: str = Field(min_length=1)


class ImageRule(_Model):
    """A class of images (by glob over normalised references) and what each of them must satisfy."""

    name: Name
    match: list[str] = Field(min_length=1, description="globs over normalised references")
    fields: list[ImageField] | None = Field(
        default=None,
        min_length=1,
        description="the image fields this rule judges (container, initContainer, ephemeralContainer, "
        "volume); absent = every field",
    )
    exclude: list[str] = Field(default_factory=list, description="globs this rule does not apply to")
    require_digest: bool = Field(default=False, description="the workload must pin the image by digest")
    digests: list[str] | None = Field(default=None, description="allow-list of sha256 digests")
    signatures: SignatureRule | None = None
    attestations: list[AttestationRule] = Field(default_factory=list)

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


def _check_digest(digest: str) -> None:
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        raise ValueError(f"{digest!r} is not 'sha256:' followed by 64 lower-case hex characters")


class BuildManifestRule(SignersRule):
    """The engine's signed build manifest: who must have signed it and how old it may be."""

    max_age: str | None = Field(default=None, description="e.g. 180d; age is measured from build_timestamp")

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
        default=Action.DENY, description="what an unchecked rule does (never a silent allow)"
    )
    images: list[ImageRule] = Field(default_factory=list)
    models: ModelsRule | None = None
    change_control: ChangeControl | None = None

    @field_validator("images")
    @classmethod
    def _unique_rules(cls, rules: list[ImageRule]) -> list[ImageRule]:
        names = [r.name for r in rules]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"image rule names must be unique; repeated: {', '.join(duplicates)}")
        return rules

    @model_validator(mode="after")
    def _has_rules(self) -> InferencePolicySpec:
        if not self.images and self.models is None:
            raise ValueError("a policy needs 'images' rules, 'models' rules or both")
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
    from policies.kind_schema import WorkloadKindDocument  # noqa: PLC0415 - it builds on this module

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
    choices = [c for c in result.get("anyOf", ()) if c != {"type": "null"}]
    if "anyOf" in result and len(choices) == 1:
        del result["anyOf"]
        result.update(choices[0])
    elif "anyOf" in result:
        result["anyOf"] = choices
    return result

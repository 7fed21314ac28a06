"""The ``TrustedKeys`` document, as pydantic models: named signers that policies refer to as
``<set>/<key>`` (public keys, keyless identities, OpenPGP keys, Notary Project trust stores), and a writer
of such documents. :mod:`policies.signers` turns them into signers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from pydantic import Field, field_validator, model_validator

from policies._strict import API_VERSION, Metadata, Name, refuse_repeats
from policies._strict import StrictModel as _Model
from verifier.verification import PublicKey

__all__ = [
    "FileRef",
    "KeylessSigner",
    "ModelSigningSigner",
    "NotationConfig",
    "NotationSigner",
    "NotationTrustStores",
    "OpenPGPKeySource",
    "TrustedKey",
    "TrustedKeysDocument",
    "TrustedKeysSpec",
    "trusted_keys_yaml",
]


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


class NotationConfig(_Model):
    """Notation's own configuration: the folder ``notation verify`` reads (trust policy and trust stores)."""

    directory: str = Field(
        description="folder with trustpolicy.oci.json or trustpolicy.json and truststore/x509/, relative to "
        "this policy file"
    )


class ModelSigningSigner(_Model):
    """An OpenSSF Model Signing publisher (``model_signing sign key|certificate|sigstore``): its public key,
    the certificates its signing certificate chains to, or its keyless identity. It signs models only
    (``buildManifest.onnxSignedBy``, ``calibrationSignedBy``)."""

    public_key: str | None = Field(default=None, description="PEM ECDSA public key (key method)")
    file: str | None = Field(default=None, description="PEM public key file, relative to this policy file")
    certificate_chain: list[str] | None = Field(
        default=None,
        min_length=1,
        description="PEM certificate files the signing certificate must chain to (certificate method)",
    )
    keyless: KeylessSigner | None = Field(
        default=None, description="Sigstore keyless: certificate identity, OIDC issuer and trusted root"
    )

    @model_validator(mode="after")
    def _one(self) -> ModelSigningSigner:
        given = (self.public_key, self.file, self.certificate_chain, self.keyless)
        if len([x for x in given if x is not None]) != 1:
            raise ValueError("give exactly one of 'publicKey', 'file', 'certificateChain' and 'keyless'")
        return self


class TrustedKey(_Model):
    """One named signer: a public key (PEM or file), a keyless identity, an OpenPGP key, a Notation signer."""

    name: Name
    public_key: str | None = Field(default=None, description="PEM public key (ECDSA, Ed25519 or RSA)")
    file: str | None = Field(default=None, description="PEM public key file, relative to this policy file")
    keyless: KeylessSigner | None = None
    openpgp: OpenPGPKeySource | None = Field(default=None, description="signs build manifests and approvals")
    notation: NotationSigner | None = Field(default=None, description="signs images (Notary Project)")
    notation_config: NotationConfig | None = Field(
        default=None, description="signs images (Notary Project), trusted as a Notation configuration says"
    )
    model_signing: ModelSigningSigner | None = Field(
        default=None, description="signs models (OpenSSF Model Signing), for buildManifest.onnxSignedBy"
    )
    rekor_public_key: FileRef | None = Field(
        default=None, description="when set, signatures must carry a Rekor inclusion promise by this log key"
    )

    @model_validator(mode="after")
    def _one_source(self) -> TrustedKey:
        sources = (
            self.public_key,
            self.file,
            self.keyless,
            self.openpgp,
            self.notation,
            self.notation_config,
            self.model_signing,
        )
        if len([x for x in sources if x is not None]) != 1:
            raise ValueError(
                "give exactly one of 'publicKey', 'file', 'keyless', 'openpgp', 'notation', "
                "'notationConfig' and 'modelSigning'"
            )
        notation = self.notation is not None or self.notation_config is not None
        others = self.openpgp is not None or notation or self.model_signing is not None
        if self.rekor_public_key is not None and others:
            raise ValueError("'rekorPublicKey' goes with cosign keys and keyless identities only")
        return self


class TrustedKeysSpec(_Model):
    """``spec`` of a TrustedKeys document."""

    keys: list[TrustedKey] = Field(min_length=1)

    @field_validator("keys")
    @classmethod
    def _unique(cls, keys: list[TrustedKey]) -> list[TrustedKey]:
        refuse_repeats([k.name for k in keys], "key names must be unique")
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

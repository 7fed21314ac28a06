"""Reading OCI registries: the distribution client, cosign's layouts, engine artifacts, registry evidence. See
``README.md`` here for the configuration file, the checks and the layouts; writing to registries is the
release tooling's (``trtguard.release``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verifier.registry._cosign_layout import (
        BUNDLE_CONTENT_ANNOTATION,
        BUNDLE_PREDICATE_ANNOTATION,
        DSSE_ENVELOPE,
        IN_TOTO_JSON,
        OPENPGP_STATEMENT,
        PGP_SIGNATURE,
        PREDICATE_TYPE_ANNOTATION,
        SIGNATURE_ANNOTATION,
        SIGSTORE_BUNDLE,
        SIMPLE_SIGNING,
        attestation_tag,
        list_referrers,
        read_referrer,
        read_tag_manifest,
        referrers_tag,
        signature_tag,
    )
    from verifier.registry._failures import refusal
    from verifier.registry._oci import (
        EMPTY_DESCRIPTOR,
        EMPTY_JSON,
        MANIFEST_TYPES,
        OCI_CONFIG,
        OCI_INDEX,
        OCI_MANIFEST,
        Descriptor,
        InvalidDocument,
        Manifest,
        image_index,
        image_manifest,
    )
    from verifier.registry._transport import repository_at, repository_scope
    from verifier.registry._wire import Call

#: Where each public name lives.
_HOMES: dict[str, str] = {
    **dict.fromkeys(
        (
            "BUNDLE_CONTENT_ANNOTATION",
            "BUNDLE_PREDICATE_ANNOTATION",
            "DSSE_ENVELOPE",
            "IN_TOTO_JSON",
            "OPENPGP_STATEMENT",
            "PGP_SIGNATURE",
            "PREDICATE_TYPE_ANNOTATION",
            "SIGNATURE_ANNOTATION",
            "SIGSTORE_BUNDLE",
            "SIMPLE_SIGNING",
            "attestation_tag",
            "list_referrers",
            "read_referrer",
            "read_tag_manifest",
            "referrers_tag",
            "signature_tag",
        ),
        "verifier.registry._cosign_layout",
    ),
    "refusal": "verifier.registry._failures",
    **dict.fromkeys(
        (
            "EMPTY_DESCRIPTOR",
            "EMPTY_JSON",
            "MANIFEST_TYPES",
            "OCI_CONFIG",
            "OCI_INDEX",
            "OCI_MANIFEST",
            "Descriptor",
            "InvalidDocument",
            "Manifest",
            "image_index",
            "image_manifest",
        ),
        "verifier.registry._oci",
    ),
    **dict.fromkeys(("repository_at", "repository_scope"), "verifier.registry._transport"),
    "Call": "verifier.registry._wire",
}

__all__ = [
    "BUNDLE_CONTENT_ANNOTATION",
    "BUNDLE_PREDICATE_ANNOTATION",
    "DSSE_ENVELOPE",
    "EMPTY_DESCRIPTOR",
    "EMPTY_JSON",
    "IN_TOTO_JSON",
    "MANIFEST_TYPES",
    "OCI_CONFIG",
    "OCI_INDEX",
    "OCI_MANIFEST",
    "OPENPGP_STATEMENT",
    "PGP_SIGNATURE",
    "PREDICATE_TYPE_ANNOTATION",
    "SIGNATURE_ANNOTATION",
    "SIGSTORE_BUNDLE",
    "SIMPLE_SIGNING",
    "Call",
    "Descriptor",
    "InvalidDocument",
    "Manifest",
    "attestation_tag",
    "image_index",
    "image_manifest",
    "list_referrers",
    "read_referrer",
    "read_tag_manifest",
    "referrers_tag",
    "refusal",
    "repository_at",
    "repository_scope",
    "signature_tag",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

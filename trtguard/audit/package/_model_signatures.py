"""Model signatures in an evidence package: the OpenSSF Model Signing signatures found beside an engine (about
the files it was built from, so among the statements about other digests), each written once, whole."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from trtguard.audit.package.archive import Member
from trtguard.audit.package.contents import ModelSignatureFile
from verifier.model_signing import MODEL_SIGNING_PREDICATE


class _Found(Protocol):
    """What is read of a statement found beside an engine (:class:`verifier.evidence.Attestation`)."""

    @property
    def predicate_type(self) -> str: ...
    @property
    def origin(self) -> str: ...
    @property
    def bundle(self) -> bytes | None: ...


_F = TypeVar("_F", bound=_Found)


def model_signatures_in(elsewhere: Sequence[_F]) -> tuple[_F, ...]:
    """The model signatures, in their bundles, among the statements found beside an artifact about other
    digests."""
    return tuple(a for a in elsewhere if a.predicate_type == MODEL_SIGNING_PREDICATE and a.bundle is not None)


def model_signature_files(
    folder: str, signatures: Sequence[_Found], files: dict[str, Member]
) -> list[ModelSignatureFile]:
    """Add each bundle to ``files`` once, under ``folder`` (however many places it was found in: the first
    one is named); their entries in the predicate."""
    unique: dict[bytes, str] = {}
    for signature in signatures:
        if signature.bundle is not None:
            unique.setdefault(signature.bundle, signature.origin)
    entries = []
    for number, (bundle, origin) in enumerate(sorted(unique.items()), start=1):
        path = f"{folder}/model-signature-{number}.sigstore.json"
        files[path] = bundle
        entries.append(ModelSignatureFile(path=path, origin=origin))
    return entries

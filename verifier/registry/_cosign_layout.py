"""Where cosign keeps signatures and attestations in a registry, and reading them from there.

Classic layout (cosign ``specs/SIGNATURE_SPEC.md``): the signatures of the image ``repo@sha256:abc…`` are the
layers of an OCI manifest tagged ``sha256-abc….sig`` in the same repository; attestations use ``.att``. A
signature layer is the simple-signing payload blob, with the base64 signature in the layer annotation
``dev.cosignproject.cosign/signature`` (and certificate, chain, Rekor bundle and RFC 3161 timestamp in
``dev.sigstore.cosign/*`` annotations); an attestation layer is a whole DSSE envelope.

OCI 1.1 referrers (cosign v3 bundles, and trtguard's attestations): a manifest whose ``subject`` is the
image, found with ``GET /v2/<repo>/referrers/<digest>``; where a registry has no referrers API, writers
keep an OCI index of the referrers under the tag ``sha256-abc…`` (the "referrers tag schema").

Two more referrer layouts share the referrers machinery (the API or the fallback index):

* Notary Project signatures: artifact type ``application/vnd.cncf.notary.signature``, one layer holding the
  envelope (``application/jose+json`` or ``application/cose``), as ``notation sign`` writes them;
* statements signed with OpenPGP (trtguard's layout): artifact type :data:`OPENPGP_STATEMENT`, first layer
  the in-toto statement exactly as signed (:data:`IN_TOTO_JSON`), then one layer per detached signature over
  those bytes (:data:`PGP_SIGNATURE`, armored). A second signer pushes another referrer with the same first
  layer; readers count the signers of one statement together.

Writing these layouts (signing, attaching) is the release tooling's: ``trtguard.release.cosign_layout``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TypeVar

from verifier.base import Deadline, EvidenceUnavailable, ImageReference, parse_sha256
from verifier.registry._oci import Descriptor, Manifest
from verifier.registry._tasks import task_group
from verifier.signatures import (
    BUNDLE_MEDIA_TYPE,
    CERTIFICATE_ANNOTATION,
    CHAIN_ANNOTATION,
    SIGNATURE_ANNOTATION,
    SIMPLE_SIGNING_MEDIA_TYPE,
)

if TYPE_CHECKING:  # annotations only: importing the client (httpx) here would slow offline commands
    from verifier.registry.client import RegistryClient

__all__ = [
    "BUNDLE_CONTENT_ANNOTATION",
    "BUNDLE_PREDICATE_ANNOTATION",
    "CERTIFICATE_ANNOTATION",
    "CHAIN_ANNOTATION",
    "DSSE_ENVELOPE",
    "IN_TOTO_JSON",
    "OPENPGP_STATEMENT",
    "PGP_SIGNATURE",
    "PREDICATE_TYPE_ANNOTATION",
    "SIGNATURE_ANNOTATION",
    "SIGSTORE_BUNDLE",
    "SIMPLE_SIGNING",
    "ReferrerArtifact",
    "SignatureLayer",
    "attestation_tag",
    "list_referrers",
    "read_attestations",
    "read_referrer",
    "read_signatures",
    "read_tag_manifest",
    "referrers_tag",
    "signature_tag",
]

_log = logging.getLogger(__name__)
T = TypeVar("T")
#: A statement and its signatures: more layers than signers a rule could list is not a trtguard referrer.
_MAX_REFERRER_LAYERS: Final = 17

SIMPLE_SIGNING: Final = SIMPLE_SIGNING_MEDIA_TYPE
DSSE_ENVELOPE: Final = "application/vnd.dsse.envelope.v1+json"
SIGSTORE_BUNDLE: Final = BUNDLE_MEDIA_TYPE
#: cosign's annotation on ``.att`` layers.
PREDICATE_TYPE_ANNOTATION: Final = "predicateType"
#: cosign v3's annotations on bundle referrer manifests.
BUNDLE_CONTENT_ANNOTATION: Final = "dev.sigstore.bundle.content"
BUNDLE_PREDICATE_ANNOTATION: Final = "dev.sigstore.bundle.predicateType"
#: Artifact type of a referrer holding an in-toto statement and detached OpenPGP signatures over it.
OPENPGP_STATEMENT: Final = "application/vnd.trtguard.statement.openpgp.v1"
#: Media type of a bare in-toto statement layer (the bytes an OpenPGP signature covers).
IN_TOTO_JSON: Final = "application/vnd.in-toto+json"
#: Media type of an armored detached OpenPGP signature layer (RFC 3156).
PGP_SIGNATURE: Final = "application/pgp-signature"


def signature_tag(digest: str) -> str:
    """``sha256-<hex>.sig``: the tag of the classic signatures of ``digest``."""
    return f"sha256-{parse_sha256(digest)}.sig"


def attestation_tag(digest: str) -> str:
    """``sha256-<hex>.att``: the tag of the classic attestations of ``digest``."""
    return f"sha256-{parse_sha256(digest)}.att"


def referrers_tag(digest: str) -> str:
    """``sha256-<hex>``: the referrers tag schema's index of manifests whose subject is ``digest``."""
    return f"sha256-{parse_sha256(digest)}"


@dataclass(frozen=True, slots=True)
class SignatureLayer:
    """One layer of a ``.sig`` or ``.att`` manifest with its blob, fetched and digest-checked, unverified."""

    media_type: str
    #: The blob: a simple-signing payload (``.sig``) or a DSSE envelope (``.att``), exactly as stored.
    payload: bytes
    digest: str
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReferrerArtifact:
    """A referrer manifest and the blob of its first layer (a bundle or an envelope), digest-checked;
    ``rest`` holds the other layers' blobs when they were asked for (``all_layers`` of :func:`read_referrer`).
    """

    manifest: Manifest
    layer: Descriptor
    blob: bytes
    rest: tuple[bytes, ...] = ()


async def read_signatures(
    client: RegistryClient,
    ref: ImageReference,
    digest: str,
    deadline: Deadline,
    *,
    max_bytes: int | None = None,
) -> tuple[SignatureLayer, ...]:
    """The simple-signing layers under ``sha256-<hex>.sig`` (empty when the tag does not exist).

    A layer whose blob cannot be had for good (missing, corrupt, above ``max_bytes``) is left out and
    logged, so that one bad layer does not hide the others; a transient failure is raised.
    """
    return await _read_tag_layers(client, ref, signature_tag(digest), SIMPLE_SIGNING, deadline, max_bytes)


async def read_attestations(
    client: RegistryClient,
    ref: ImageReference,
    digest: str,
    deadline: Deadline,
    *,
    max_bytes: int | None = None,
) -> tuple[SignatureLayer, ...]:
    """The DSSE envelope layers under ``sha256-<hex>.att`` (empty when the tag does not exist).

    Bad layers are left out as in :func:`read_signatures`.
    """
    return await _read_tag_layers(client, ref, attestation_tag(digest), DSSE_ENVELOPE, deadline, max_bytes)


async def read_tag_manifest(
    client: RegistryClient, ref: ImageReference, tag: str, deadline: Deadline
) -> Manifest | None:
    """The manifest at a ``.sig`` or ``.att`` tag, or None when the tag does not exist: what the signatures
    are read from and what a new layer is added to. An index there is a definitive
    :class:`~verifier.base.EvidenceUnavailable`: cosign writes a manifest at these tags.
    """
    manifest = await client.get_manifest(ref, deadline, reference=tag, missing_ok=True)
    if manifest is not None and manifest.is_index:
        raise EvidenceUnavailable(
            f"{ref.registry}/{ref.repository}:{tag} is an index, not a cosign manifest",
            transient=False,
            location=f"image {ref.registry}/{ref.repository}:{tag}",
            hint="something other than cosign wrote this tag; remove it and sign again",
        )
    return manifest


async def _read_tag_layers(
    client: RegistryClient,
    ref: ImageReference,
    tag: str,
    media_type: str,
    deadline: Deadline,
    max_bytes: int | None,
) -> tuple[SignatureLayer, ...]:
    manifest = await read_tag_manifest(client, ref, tag, deadline)
    if manifest is None:
        return ()
    # Layers of other media types (other attachments) are not signatures and are left out.
    wanted = [layer for layer in manifest.layers if layer.media_type == media_type]
    unique = {layer.digest: layer for layer in wanted}
    where = f"{ref.name}:{tag}"
    async with task_group() as group:
        fetches = {
            digest: group.create_task(
                _unless_definitive(
                    client.get_blob(ref, layer, deadline, max_bytes=max_bytes), f"layer {digest} of {where}"
                )
            )
            for digest, layer in unique.items()
        }
    found = []
    for layer in wanted:
        blob = fetches[layer.digest].result()
        if blob is not None:
            found.append(SignatureLayer(layer.media_type, blob, layer.digest, dict(layer.annotations)))
    return tuple(found)


async def _unless_definitive(fetch: Awaitable[T], what: str) -> T | None:
    """``await fetch``, or None (logged) when it failed for good: one bad attachment hides no other.

    Leaving evidence out can only lead to a violation, never to an allow; a transient failure still
    raises, since the attachment may well be good.
    """
    try:
        return await fetch
    except EvidenceUnavailable as error:
        if error.transient:
            raise
        _log.warning("skipping %s: %s", what, error.message)
        return None


async def list_referrers(
    client: RegistryClient,
    ref: ImageReference,
    digest: str,
    deadline: Deadline,
    *,
    artifact_types: Sequence[str] | None = None,
) -> tuple[Descriptor, ...]:
    """Referrers of ``digest``: from the referrers API, or the ``sha256-<hex>`` index where it is absent.

    ``artifact_types`` keeps only those types (the filter is applied here whatever the registry does).
    """
    found = await client.referrers(ref, digest, deadline)
    if found is None:
        found = await fallback_referrers(
            client,
            ref,
            digest,
            deadline,
            hint="something other than an OCI client wrote this tag; remove it and push referrers again",
        )
    if artifact_types is None:
        return found
    return tuple(d for d in found if d.artifact_type in artifact_types)


async def fallback_referrers(
    client: RegistryClient, ref: ImageReference, digest: str, deadline: Deadline, *, hint: str
) -> tuple[Descriptor, ...]:
    """The referrers of ``digest`` listed in its ``sha256-<hex>`` index (the referrers tag schema, for
    registries without the referrers API); none where the tag does not exist.

    A tag that holds something other than an index is a definitive :class:`EvidenceUnavailable` saying
    ``hint``.
    """
    index = await client.get_manifest(ref, deadline, reference=referrers_tag(digest), missing_ok=True)
    if index is None:
        return ()
    if not index.is_index:
        raise EvidenceUnavailable(
            f"the referrers tag {referrers_tag(digest)} of {ref.name} is not an index",
            transient=False,
            location=f"image {ref.name}",
            hint=hint,
        )
    return index.manifests


async def read_referrer(
    client: RegistryClient,
    ref: ImageReference,
    descriptor: Descriptor,
    subject: str,
    deadline: Deadline,
    *,
    max_bytes: int | None = None,
    all_layers: bool = False,
) -> ReferrerArtifact | None:
    """Fetch a referrer manifest and its first layer's blob (every layer's with ``all_layers``); None when it
    does not refer to ``subject``.

    A fallback index is a mutable tag anyone with push access can edit, so the manifest's own ``subject``
    is checked: an entry pointing at a manifest about another artifact is ignored. So is a referrer that
    cannot be had for good (manifest or blob missing or corrupt, blob above ``max_bytes``), logged: anyone
    who may push a referrer could otherwise hide every other one. A transient failure is raised.
    """
    what = f"referrer {ref.name}@{descriptor.digest}"
    manifest = await _unless_definitive(client.get_manifest(ref, deadline, reference=descriptor.digest), what)
    if manifest is None or manifest.is_index or not manifest.layers:
        return None
    subject_descriptor = manifest.subject
    if subject_descriptor is None or subject_descriptor.digest != subject:
        return None
    layers = manifest.layers if all_layers else manifest.layers[:1]
    if len(layers) > _MAX_REFERRER_LAYERS:
        _log.warning("skipping %s: %d layers", what, len(layers))
        return None
    blobs = []
    for layer in layers:
        blob = await _unless_definitive(client.get_blob(ref, layer, deadline, max_bytes=max_bytes), what)
        if blob is None:
            return None
        blobs.append(blob)
    return ReferrerArtifact(manifest, layers[0], blobs[0], tuple(blobs[1:]))

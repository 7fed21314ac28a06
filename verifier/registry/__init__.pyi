from ._cosign_layout import (
    BUNDLE_CONTENT_ANNOTATION as BUNDLE_CONTENT_ANNOTATION,
    BUNDLE_PREDICATE_ANNOTATION as BUNDLE_PREDICATE_ANNOTATION,
    DSSE_ENVELOPE as DSSE_ENVELOPE,
    IN_TOTO_JSON as IN_TOTO_JSON,
    OPENPGP_STATEMENT as OPENPGP_STATEMENT,
    PGP_SIGNATURE as PGP_SIGNATURE,
    PREDICATE_TYPE_ANNOTATION as PREDICATE_TYPE_ANNOTATION,
    SIGNATURE_ANNOTATION as SIGNATURE_ANNOTATION,
    SIGSTORE_BUNDLE as SIGSTORE_BUNDLE,
    SIMPLE_SIGNING as SIMPLE_SIGNING,
    attestation_tag as attestation_tag,
    fallback_referrers as fallback_referrers,
    list_referrers as list_referrers,
    read_referrer as read_referrer,
    read_tag_manifest as read_tag_manifest,
    referrers_tag as referrers_tag,
    signature_tag as signature_tag,
)
from ._failures import refusal as refusal
from ._oci import (
    EMPTY_DESCRIPTOR as EMPTY_DESCRIPTOR,
    EMPTY_JSON as EMPTY_JSON,
    MANIFEST_TYPES as MANIFEST_TYPES,
    OCI_CONFIG as OCI_CONFIG,
    OCI_INDEX as OCI_INDEX,
    OCI_MANIFEST as OCI_MANIFEST,
    Descriptor as Descriptor,
    InvalidDocument as InvalidDocument,
    Manifest as Manifest,
    image_index as image_index,
    image_manifest as image_manifest,
)
from ._transport import repository_at as repository_at, repository_scope as repository_scope
from ._wire import Call as Call

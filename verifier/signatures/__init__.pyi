from ._from_crypto_dsse import MAX_SIGNATURES as MAX_SIGNATURES
from ._openpgp import (
    MAX_SIGNATURE_BYTES as MAX_SIGNATURE_BYTES,
    OpenPGPKey as OpenPGPKey,
    SignatureCheck as SignatureCheck,
    check_signatures as check_signatures,
    keyring_of as keyring_of,
    not_verified as not_verified,
    read_keyring as read_keyring,
    read_signatures as read_signatures,
    verify_detached as verify_detached,
)
from ._policy import (
    KeylessIdentity as KeylessIdentity,
    SignerMatch as SignerMatch,
    TrustPolicy as TrustPolicy,
)
from ._results import (
    BUNDLE_ANNOTATION as BUNDLE_ANNOTATION,
    BUNDLE_MEDIA_TYPE as BUNDLE_MEDIA_TYPE,
    CERTIFICATE_ANNOTATION as CERTIFICATE_ANNOTATION,
    CHAIN_ANNOTATION as CHAIN_ANNOTATION,
    COSIGN_SIGN_PREDICATE as COSIGN_SIGN_PREDICATE,
    SIGNATURE_ANNOTATION as SIGNATURE_ANNOTATION,
    SIMPLE_SIGNING_MEDIA_TYPE as SIMPLE_SIGNING_MEDIA_TYPE,
    CosignSignature as CosignSignature,
    CountedSignature as CountedSignature,
    LoggedCheck as LoggedCheck,
    NoSignatures as NoSignatures,
    VerificationResult as VerificationResult,
)
from ._trust import TrustRoot as TrustRoot
from ._verify import (
    verify_attestation as verify_attestation,
    verify_blob_signature as verify_blob_signature,
    verify_bundle as verify_bundle,
    verify_image_signatures as verify_image_signatures,
)
from .notation import NotationSignature as NotationSignature

from ._facts import (
    VerifiedApproval as VerifiedApproval,
    VerifiedAttestation as VerifiedAttestation,
    VerifiedManifest as VerifiedManifest,
    VerifiedModelStatement as VerifiedModelStatement,
    VerifiedPredicate as VerifiedPredicate,
    VerifiedVerification as VerifiedVerification,
    by_statement as by_statement,
    dsse_trust as dsse_trust,
    manifest_of as manifest_of,
    verify_approval as verify_approval,
    verify_attestation as verify_attestation,
    verify_manifest as verify_manifest,
    verify_model_statement as verify_model_statement,
    verify_predicate as verify_predicate,
    verify_verification as verify_verification,
)
from ._from_crypto_keys import PublicKey as PublicKey
from ._from_model_signing_signature import MODEL_SIGNING_PREDICATE as MODEL_SIGNING_PREDICATE
from ._from_model_signing_trust import (
    ModelSigningCertificates as ModelSigningCertificates,
    ModelSigningKey as ModelSigningKey,
    ModelSigningKeyless as ModelSigningKeyless,
    ModelSigningTrust as ModelSigningTrust,
)
from ._from_signatures_notation import (
    NotationPolicy as NotationPolicy,
    NotationTrust as NotationTrust,
    StoreType as StoreType,
    load_certificates as load_certificates,
    load_notation_config as load_notation_config,
    parse_identities as parse_identities,
)
from ._from_signatures_openpgp import OpenPGPKey as OpenPGPKey
from ._from_signatures_policy import (
    KeylessIdentity as KeylessIdentity,
    SignerMatch as SignerMatch,
    TrustPolicy as TrustPolicy,
)
from ._from_signatures_results import (
    CountedSignature as CountedSignature,
    LoggedCheck as LoggedCheck,
    NoSignatures as NoSignatures,
    VerificationResult as VerificationResult,
)
from ._from_signatures_trust import TrustRoot as TrustRoot
from ._images import image_trust as image_trust, verify_image as verify_image
from ._statement import (
    StatementRefused as StatementRefused,
    StatementTrust as StatementTrust,
    UnreadableEvidence as UnreadableEvidence,
    signers_of as signers_of,
    statement_digest as statement_digest,
    verify_statement as verify_statement,
)

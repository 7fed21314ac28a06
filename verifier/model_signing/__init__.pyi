from ._files import GIT_PATHS as GIT_PATHS
from ._format import MODEL_SIGNING as MODEL_SIGNING
from ._model import VerifiedModel as VerifiedModel, verify_model as verify_model
from ._signature import (
    MODEL_SIGNING_PREDICATE as MODEL_SIGNING_PREDICATE,
    PREDICATE_TYPE as PREDICATE_TYPE,
    ModelSignature as ModelSignature,
    read_signature as read_signature,
)
from ._trust import (
    ModelSigningCertificates as ModelSigningCertificates,
    ModelSigningKey as ModelSigningKey,
    ModelSigningKeyless as ModelSigningKeyless,
    ModelSigningTrust as ModelSigningTrust,
    signing_key as signing_key,
)

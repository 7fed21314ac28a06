from ._der import der_header as der_header
from ._dsse import (
    MAX_SIGNATURES as MAX_SIGNATURES,
    Envelope as Envelope,
    EnvelopeSignature as EnvelopeSignature,
    pae as pae,
    sign_envelope as sign_envelope,
    verify_envelope as verify_envelope,
)
from ._intoto import (
    PAYLOAD_TYPE as PAYLOAD_TYPE,
    ResourceDescriptor as ResourceDescriptor,
    Statement as Statement,
    StatementTooDeep as StatementTooDeep,
    claimed_by_envelope as claimed_by_envelope,
    claimed_by_statement as claimed_by_statement,
    sign_statement as sign_statement,
    statement_for_file as statement_for_file,
    statement_from_envelope as statement_from_envelope,
)
from ._keys import (
    InvalidKey as InvalidKey,
    PrivateKey as PrivateKey,
    PublicKey as PublicKey,
    encrypt_private_key as encrypt_private_key,
    generate_private_key as generate_private_key,
    load_private_key as load_private_key,
)

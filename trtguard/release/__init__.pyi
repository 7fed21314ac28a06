from ._attach import (
    Attached as Attached,
    attach_attestation as attach_attestation,
    attach_model_signature as attach_model_signature,
    attach_notation_signature as attach_notation_signature,
    attach_openpgp_statement as attach_openpgp_statement,
)
from ._push_engine import (
    CarriedEngine as CarriedEngine,
    carried_engine as carried_engine,
    push_engine as push_engine,
)

"""Cryptography's base: public and private keys (ECDSA, Ed25519, RSA; cosign's encrypted key files; key
generation), DSSE envelopes (PAE, sign, verify) and in-toto Statement v1. Signature formats are
verifier.signatures'; verification in one place is verifier.verification's.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verifier.crypto._der import der_header
    from verifier.crypto._dsse import (
        MAX_SIGNATURES,
        Envelope,
        EnvelopeSignature,
        pae,
        sign_envelope,
        verify_envelope,
    )
    from verifier.crypto._intoto import (
        PAYLOAD_TYPE,
        ResourceDescriptor,
        Statement,
        StatementTooDeep,
        claimed_by_envelope,
        claimed_by_statement,
        sign_statement,
        statement_for_file,
        statement_from_envelope,
    )
    from verifier.crypto._keys import (
        InvalidKey,
        PrivateKey,
        PublicKey,
        encrypt_private_key,
        generate_private_key,
        load_private_key,
    )

#: Where each public name lives.
_HOMES: dict[str, str] = {
    "der_header": "verifier.crypto._der",
    **dict.fromkeys(
        ("MAX_SIGNATURES", "Envelope", "EnvelopeSignature", "pae", "sign_envelope", "verify_envelope"),
        "verifier.crypto._dsse",
    ),
    **dict.fromkeys(
        (
            "PAYLOAD_TYPE",
            "ResourceDescriptor",
            "Statement",
            "StatementTooDeep",
            "claimed_by_envelope",
            "claimed_by_statement",
            "sign_statement",
            "statement_for_file",
            "statement_from_envelope",
        ),
        "verifier.crypto._intoto",
    ),
    **dict.fromkeys(
        (
            "InvalidKey",
            "PrivateKey",
            "PublicKey",
            "encrypt_private_key",
            "generate_private_key",
            "load_private_key",
        ),
        "verifier.crypto._keys",
    ),
}

__all__ = [
    "MAX_SIGNATURES",
    "PAYLOAD_TYPE",
    "Envelope",
    "EnvelopeSignature",
    "InvalidKey",
    "PrivateKey",
    "PublicKey",
    "ResourceDescriptor",
    "Statement",
    "StatementTooDeep",
    "claimed_by_envelope",
    "claimed_by_statement",
    "der_header",
    "encrypt_private_key",
    "generate_private_key",
    "load_private_key",
    "pae",
    "sign_envelope",
    "sign_statement",
    "statement_for_file",
    "statement_from_envelope",
    "verify_envelope",
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

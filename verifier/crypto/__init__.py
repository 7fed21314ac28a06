"""Cryptography's base: public and private keys (ECDSA, Ed25519, RSA; cosign's encrypted key files; key
generation), DSSE envelopes (PAE, sign, verify) and in-toto Statement v1. Signature formats are
verifier.signatures'; verification in one place is verifier.verification's.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

"""The statement signature formats: one line each registers a format (see the front door's docstring)."""

from __future__ import annotations

from verifier.model_signing import MODEL_SIGNING
from verifier.verification._contract import StatementFormat
from verifier.verification._dsse import DSSE
from verifier.verification._openpgp import OPENPGP

#: Every statement signature format, in the order their signers and problems are reported.
FORMATS: tuple[StatementFormat, ...] = (
    DSSE,
    OPENPGP,
    MODEL_SIGNING,
)

"""OpenSSF Model Signing (``model_signing`` 1.x, sigstore/model-transparency): signatures of model files.

* :func:`read_signature` parses a signature (``model.sig``, a Sigstore bundle) into a
  :class:`ModelSignature`: the files it lists and their SHA-256 digests (``files`` serialization only);
* :func:`signing_key` verifies it with a :class:`ModelSigningKey` (key method),
  :class:`ModelSigningCertificates` (certificate method) or :class:`ModelSigningKeyless` (Sigstore keyless:
  identity, OIDC issuer and trusted root);
* :func:`verify_model` checks both, and that a file or folder on disk is the one signed;
* :data:`MODEL_SIGNING` is the format registered in ``verifier/verification/_table.py``, through which
  policies verify model signatures found as evidence (``models.buildManifest.onnxSignedBy``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # cryptography's x509 loads with the first model signature checked (start-up time)
    from verifier.model_signing._files import GIT_PATHS
    from verifier.model_signing._format import MODEL_SIGNING
    from verifier.model_signing._model import (
        VerifiedModel,
        verify_model,
    )
    from verifier.model_signing._signature import (
        MODEL_SIGNING_PREDICATE,
        PREDICATE_TYPE,
        ModelSignature,
        read_signature,
    )
    from verifier.model_signing._trust import (
        ModelSigningCertificates,
        ModelSigningKey,
        ModelSigningKeyless,
        ModelSigningTrust,
        signing_key,
    )

_HOMES: dict[str, str] = {
    "GIT_PATHS": "_files",
    "VerifiedModel": "_model",
    "verify_model": "_model",
    "MODEL_SIGNING": "_format",
    "PREDICATE_TYPE": "_signature",
    "MODEL_SIGNING_PREDICATE": "_signature",
    "ModelSignature": "_signature",
    "read_signature": "_signature",
    "ModelSigningCertificates": "_trust",
    "ModelSigningKey": "_trust",
    "ModelSigningKeyless": "_trust",
    "ModelSigningTrust": "_trust",
    "signing_key": "_trust",
}

__all__ = [
    "GIT_PATHS",
    "MODEL_SIGNING",
    "MODEL_SIGNING_PREDICATE",
    "PREDICATE_TYPE",
    "ModelSignature",
    "ModelSigningCertificates",
    "ModelSigningKey",
    "ModelSigningKeyless",
    "ModelSigningTrust",
    "VerifiedModel",
    "read_signature",
    "signing_key",
    "verify_model",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

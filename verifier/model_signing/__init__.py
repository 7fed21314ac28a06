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

import lazy_loader

# cryptography's x509 loads with the first model signature checked (start-up time)
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

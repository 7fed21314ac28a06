"""Everything that checks an artifact against a claim.

OCI references and registries, cosign-compatible keys and signatures, DSSE/in-toto attestations, engine
build manifests and TensorRT engine files. This package knows nothing about admission.

The front door of the modules directly in ``verifier/`` (lazy: a name loads its module on first use), so far
the choice of evidence a command line makes (:func:`evidence_source`).
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

"""Building and publishing: registry writing on the verifier's transport, push-engine, attach-attestation, and
build manifests (``manifest/``).
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

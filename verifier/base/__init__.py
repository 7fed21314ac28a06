"""The base every package stands on: typed errors, deadlines, digests, image references, bounded reads,
pydantic errors a person can act on, the one YAML reader, the result cache, text made visible for people, and
a cheaper ``__init__`` for the frozen dataclasses built on every admission.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

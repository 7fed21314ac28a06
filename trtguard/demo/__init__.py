"""``make demo`` and ``trtguard demo``: the demo's material, its run against a local webhook, and ``demo
engine``.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

"""``trtguard manifest create`` and ``manifest import``: from the files to a signed engine build manifest, and
a flat legacy record read into one.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

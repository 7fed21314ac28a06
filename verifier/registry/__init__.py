"""Reading OCI registries: the distribution client, cosign's layouts, engine artifacts, registry evidence. See
``README.md`` here for the configuration file, the checks and the layouts; writing to registries is the
release tooling's (``trtguard.release``).
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

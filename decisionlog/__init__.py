"""The append-only, hash-chained decision log: SQLite by default, PostgreSQL for several replicas.

Every admission decision is written here before the answer leaves the webhook. ``open_store(url)`` gives a
:class:`DecisionStore`; ``trtguard audit`` reads and verifies it.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

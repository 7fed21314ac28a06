"""The auditor's tools: a workload's history, the chain check of what is printed, evidence packages
(``package/``) and their HTML report (``report/``).
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

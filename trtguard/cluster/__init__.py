"""``trtguard audit-cluster``: judge what already runs in a cluster; publish the verdicts as PolicyReports.

:func:`connect` reaches the API server through the official ``kubernetes`` client (kubeconfig or in-cluster
configuration, timeouts, retries on 429 and 5xx); the audit lists every workload kind the policies cover,
page by page, judges each object as ``trtguard check`` does and writes ``wgpolicyk8s.io`` reports.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

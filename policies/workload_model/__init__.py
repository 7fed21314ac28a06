"""The workload model: a Kubernetes object → its images and engines, each with its JSON path, through the
kinds trtguard knows (built in, operators', WorkloadKind documents), their pod templates and pod specs, which
nodes a Pod may run on and which containers can read an engine; and the CPU budget that reading, and the
evaluation, may spend.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

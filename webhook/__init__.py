"""The admission server: one AdmissionReview in, one answer out (the codec, the admission flow, the FastAPI
routes, the uvicorn assembly, TLS, the policy set in force, observability). The command line imports the serve
settings, the server, its logging and change control's view of the decision log from here.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

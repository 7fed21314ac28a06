"""The state of one evaluation, shared by the evaluator and every rule family: what is judged, what an UPDATE
changed, what each rule counted, and each evidence question asked once; and the subjects the rules judge.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

"""The policy rules, one module per rule family, each exposing one rule of the rule contract
(:mod:`policies.rules._findings`); :mod:`policies.evaluator` applies them from one ordered table.

- :mod:`~policies.rules._requester`: ``spec.requester`` (who may deploy), a workload rule;
- :mod:`~policies.rules._images`: ``spec.images`` (allowed images, ``requireDigest``, ``digests``,
  ``signatures``, ``attestations`` with :mod:`~policies.rules._attestations`), an image rule;
- :mod:`~policies.rules._manifest`: ``models.buildManifest`` (the signed build manifest, ``maxAge``, signed
  inputs), the first engine rule: the ones over the manifest read the manifest it verified;
- :mod:`~policies.rules._model`: ``models.rules`` ``precisions``, ``int8RequiresCalibration``,
  ``minAccuracy``, ``pluginsAllowed``;
- :mod:`~policies.rules._expressions`: ``models.rules.expressions`` (CEL);
- :mod:`~policies.rules._toolchain`: ``models.rules.toolchain`` (``allowed``, ``sameAsRuntimeImage``);
- :mod:`~policies.rules._gpu`: ``models.rules.gpuCompatibility``;
- :mod:`~policies.rules._change_control`: ``spec.changeControl`` (baselines, gated changes, approvals), and
  the
  confirmation of the engines an UPDATE kept, a workload rule run once the engines are judged;
- :mod:`~policies.rules._verification`: ``models.verification`` (GPU verification attestations).

:mod:`~policies.rules._findings` says how violations are worded and what a rule is; the state of one
evaluation, and the subjects rules judge, are :mod:`policies.evaluation`'s.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

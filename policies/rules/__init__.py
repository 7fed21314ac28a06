"""The policy rules, one module per rule family; :mod:`policies.evaluator` runs them in order.

- :mod:`~policies.rules.images`: ``spec.images`` (allowed images, ``requireDigest``, ``digests``,
  ``signatures``, ``attestations``);
- :mod:`~policies.rules.manifest`: ``models.buildManifest`` (the signed build manifest) and its ``maxAge``;
- :mod:`~policies.rules.model`: ``models.rules`` ``precisions``, ``int8RequiresCalibration``,
  ``minAccuracy``, ``pluginsAllowed``;
- :mod:`~policies.rules.expressions`: ``models.rules.expressions`` (CEL);
- :mod:`~policies.rules.toolchain`: ``models.rules.toolchain`` (``allowed``, ``sameAsRuntimeImage``);
- :mod:`~policies.rules.change_control`: ``spec.changeControl`` (baselines, gated changes, approvals);
- :mod:`~policies.rules.verification`: ``models.verification`` (GPU verification attestations).

Beside them, :mod:`~policies.evaluation._state` holds the state of one evaluation (parsed references,
evidence questions asked once) and :mod:`~policies.rules.findings` how violations are worded.
"""

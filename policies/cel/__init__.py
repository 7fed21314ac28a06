"""CEL expressions in policies: compiled once at load time within static bounds, evaluated on guarded data.

Built on ``cel-expr-python``, Google's binding of cel-cpp (see docs/cel.md for why). What bounds the cost
of one evaluation:

- at compile time, :class:`CelLimits`: source length, AST nodes and depth after macro expansion, and how
  deeply comprehensions (``all``, ``exists``, ``exists_one``, ``map``, ``filter``) nest in one another;
- at evaluation time, cel-cpp stops an evaluation after 10,000 comprehension iterations in total (its
  default, which the binding does not let us change), and the data handed in is checked first: lists and
  maps no longer than ``max_list_length``, strings no longer than ``max_string_length`` and
  ``max_total_length`` together, no more than ``max_values`` values in all, nesting no deeper than
  ``max_value_depth`` (cel-cpp converts nested data recursively and crashes on very deep input);
- and in between, :mod:`policies.cel._cost` bounds the work and memory of one evaluation from the
  AST and those data limits (:attr:`CelProgram.cost`). Neither the binding nor cel-cpp can stop an
  evaluation that runs long or allocates much, so an expression whose bound is above
  ``inline_work``/``inline_memory`` must be evaluated where it can be stopped
  (:mod:`policies.cel.sandbox`); :attr:`CelProgram.inline` says which.

Only the declared variables may appear in an expression; each is dynamically typed. Times are handed in as
RFC 3339 strings and compared through ``timestamp()``::

    timestamp(manifest.build_timestamp) > timestamp("2026-01-01T00:00:00Z")

The modules: :mod:`~policies.cel._limits` (the bounds), :mod:`~policies.cel._compiler` (compiling within the
static bounds), :mod:`~policies.cel._cost` (the worst case), :mod:`~policies.cel._activation` (the data,
checked against the data bounds), :mod:`~policies.cel._program` (evaluating), :mod:`~policies.cel._errors`,
and :mod:`~policies.cel.sandbox` with :mod:`~policies.cel.worker` (where costly expressions run).
"""

from policies.cel._activation import CelActivation, prepare_activation
from policies.cel._compiler import compile_expression
from policies.cel._cost import CelCost
from policies.cel._errors import MISSING_KEY_HINT, RESOURCE_HINT, CelCompileError, CelEvaluationError
from policies.cel._limits import COMPREHENSION_ITERATION_BUDGET, CelLimits
from policies.cel._program import CelProgram

__all__ = [
    "COMPREHENSION_ITERATION_BUDGET",
    "MISSING_KEY_HINT",
    "RESOURCE_HINT",
    "CelActivation",
    "CelCompileError",
    "CelCost",
    "CelEvaluationError",
    "CelLimits",
    "CelProgram",
    "compile_expression",
    "prepare_activation",
]

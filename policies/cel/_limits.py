"""The bounds on one CEL expression and on the data it is evaluated against (docs/cel.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["COMPREHENSION_ITERATION_BUDGET", "DEFAULT_LIMITS", "CelLimits"]

#: Comprehension iterations cel-cpp allows one evaluation (RuntimeOptions.comprehension_max_iterations).
COMPREHENSION_ITERATION_BUDGET: Final = 10_000


@dataclass(frozen=True, slots=True)
class CelLimits:
    """Bounds on one expression (checked when it is compiled) and on the data it is evaluated against.

    The defaults are far above what a policy rule needs (the five rules in bench/cel_candidates.py have
    6 to 19 AST nodes) and above the size of ordinary Pod-bearing objects; docs/cel.md gives the worst
    evaluation time they allow.
    """

    #: code points of source text
    max_length: int = 4096
    #: AST nodes after macro expansion (``exists`` alone expands to about ten)
    max_nodes: int = 500
    #: AST nesting depth after macro expansion (the CEL spec asks parsers for at least 32 levels)
    max_depth: int = 64
    #: comprehensions inside comprehensions: 2 allows ``containers.all(c, c.ports.all(p, ...))``
    max_comprehension_nesting: int = 2
    #: items in any one list or map handed in
    max_list_length: int = 1000
    #: code points (bytes for bytes values) of any one string handed in; kubectl's last-applied-configuration
    #: annotation can be longer on large objects: drop it before evaluating
    max_string_length: int = 65_536
    #: values (scalars, lists and maps) handed in, all variables together
    max_values: int = 20_000
    #: nesting of lists and maps handed in
    max_value_depth: int = 64
    #: code points of all strings handed in, all variables together (the API server refuses requests over
    #: 3 MiB, etcd objects over 1.5 MiB)
    max_total_length: int = 4 * 1024 * 1024
    #: worst-case work (about ns, see policies.cel._cost) up to which an expression may run inline
    inline_work: float = 20_000_000
    #: worst-case memory (bytes) up to which an expression may run inline
    inline_memory: float = 16 * 1024 * 1024


#: The limits a caller gets without naming any.
DEFAULT_LIMITS: Final = CelLimits()

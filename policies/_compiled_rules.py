"""Attestation rules and CEL expressions of a policy, compiled: what :mod:`policies.loader` builds for each
``images[].attestations[]`` entry (its conditions, maxAge and allow-list) and each expression.

Split from the loader, which reads and checks the documents; problems are appended, with file, line and
field, to the loader's list.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from policies._allow_lists import AllowList, allow_entries
from policies.cel import CelCompileError, CelProgram, compile_expression
from policies.schema import AttestationRule, parse_duration
from verifier.base import Document
from verifier.scans import is_scan_predicate_type

__all__ = [
    "CONDITION_VARIABLES",
    "CompiledAttestation",
    "CompiledExpression",
    "compile_attestation",
    "compile_condition",
    "field_path",
]

#: Names that attestation conditions may refer to (``scan`` only for the SBOM and scan predicate types;
#: ``now``, the evaluation clock as an RFC 3339 UTC time: ``timestamp(now)``).
CONDITION_VARIABLES = ("predicate", "scan", "now")


@dataclass(frozen=True, slots=True)
class CompiledExpression:
    """A CEL expression of a policy, compiled, with its message."""

    name: str
    program: CelProgram
    message: str


@dataclass(frozen=True, slots=True)
class CompiledAttestation:
    """One attestation rule (an entry, or an alternative of an ``anyOf``) ready to judge."""

    rule: AttestationRule
    conditions: tuple[CompiledExpression, ...] = ()
    max_age: timedelta | None = None
    #: ``vulnerabilities.allow`` and the entries of its ``allowFrom`` file.
    allowed: AllowList = field(default_factory=AllowList)
    #: The ``allowFrom`` file read, with the SHA-256 of its bytes (``serve`` watches it with the policies).
    allow_files: tuple[tuple[Path, str], ...] = ()

    @property
    def reads_documents(self) -> bool:
        """Whether the rule reads what the attested documents say (not only that one is signed). A rule on
        an SBOM or scan type always does: its documents are judged as documents (one from the future, one
        signed but unreadable, is refused or cannot tell), never counted by their signature alone."""
        rule = self.rule
        return bool(
            is_scan_predicate_type(rule.predicate_type)
            or self.conditions
            or self.max_age is not None
            or rule.vulnerabilities is not None
            or rule.components is not None
            or rule.document is not None
        )


def field_path(loc: Sequence[str | int]) -> str:
    """``("spec", "images", 0, "match")`` → ``spec.images[0].match``."""
    return ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in loc).replace(".[", "[")


def compile_condition(
    cel: str,
    variables: Sequence[str],
    where: tuple[str | int, ...],
    document: Document,
    path: Path,
    problems: list[str],
    *,
    hint: str | None = None,
) -> CelProgram | None:
    """The boolean CEL expression at ``where`` of the policy document read from ``path``, compiled; None when
    it does not compile, its problem (file, line, field, and ``hint`` in place of the compiler's) appended to
    ``problems``."""
    try:
        return compile_expression(
            cel,
            variables=variables,
            location=f"{path}:{document.text_line_of(where)} {field_path(where)}",
            expect_bool=True,
        )
    except CelCompileError as error:
        hint = hint or error.hint
        problems.append(str(error) + (f" ({hint})" if hint else ""))
        return None


def compile_attestation(
    rule: AttestationRule,
    loc: tuple[str | int, ...],
    document: Document,
    path: Path,
    problems: list[str],
    digest: Any,
) -> CompiledAttestation:
    """One attestation rule compiled: its conditions, its maxAge and its allow-list."""
    allowed: AllowList = AllowList()
    files: tuple[tuple[Path, str], ...] = ()
    if rule.vulnerabilities is not None:
        where = (
            f"{path}:{document.line_of((*loc, 'vulnerabilities'))}: {field_path((*loc, 'vulnerabilities'))}"
        )
        read = allow_entries(rule.vulnerabilities, where, path.parent, problems, digest)
        allowed, files = read.allow_list, read.files
    return CompiledAttestation(
        rule=rule,
        conditions=_compile_conditions(rule, loc, document, path, problems),
        max_age=parse_duration(rule.max_age) if rule.max_age is not None else None,
        allowed=allowed,
        allow_files=files,
    )


def _compile_conditions(
    rule: AttestationRule,
    loc: tuple[str | int, ...],
    document: Document,
    path: Path,
    problems: list[str],
) -> tuple[CompiledExpression, ...]:
    """The CEL conditions of one image attestation rule; ``scan`` only where the predicate is read as one."""
    variables = CONDITION_VARIABLES if is_scan_predicate_type(rule.predicate_type) else ("predicate", "now")
    compiled = []
    for k, condition in enumerate(rule.conditions):
        hint = None
        if "scan" not in variables and re.search(r"\bscan\b", condition.cel):
            hint = f"`scan` is set only for SBOMs and scans; read `predicate` for {rule.predicate_type}"
        where = (*loc, "conditions", k, "cel")
        program = compile_condition(condition.cel, variables, where, document, path, problems, hint=hint)
        if program is None:
            continue
        compiled.append(
            CompiledExpression(
                name=condition.name or f"conditions[{k}]", program=program, message=condition.message
            )
        )
    return tuple(compiled)

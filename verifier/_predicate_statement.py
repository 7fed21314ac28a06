"""Reading a trtguard predicate out of whatever form it arrives in: bare, or inside an in-toto Statement."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from verifier.base import InputError, input_error_from_validation
from verifier.crypto import Statement

_Model = TypeVar("_Model", bound=BaseModel)


def validate_predicate(
    model: type[_Model],
    data: Mapping[str, Any] | Statement,
    source: str,
    *,
    predicate_type: str,
    what: str,
    subject: tuple[str, Callable[[_Model], str]],
) -> _Model:
    """Validate ``data`` (a bare predicate, a Statement mapping or a :class:`Statement`) against ``model``.

    A Statement must carry ``predicate_type`` and a subject with the SHA-256 (bare hex) that ``subject``
    names: the predicate's field path and how to read it from the validated predicate. Raises
    :class:`InputError` listing every problem with its field path.
    """
    statement: Statement | None = None
    predicate: Mapping[str, Any]
    if isinstance(data, Statement):
        statement = data
        predicate = data.predicate
    elif not isinstance(data, Mapping):
        raise InputError(
            f"{what} must be a JSON object, not {type(data).__name__}",
            location=source,
            hint="give a bare predicate or an in-toto Statement",
        )
    elif "_type" in data:
        try:
            statement = Statement.model_validate(data)
        except ValidationError as error:
            raise input_error_from_validation(error, source, what="in-toto Statement") from None
        predicate = statement.predicate
    else:
        predicate = data
    if statement is not None and statement.predicate_type != predicate_type:
        raise InputError(
            f"predicateType is {statement.predicate_type!r}, not {predicate_type} ({what})",
            location=source,
            hint=f"give the Statement whose predicateType is {predicate_type}",
        )
    prefix = ("predicate",) if statement is not None else ()
    try:
        validated = model.model_validate(predicate)
    except ValidationError as error:
        raise input_error_from_validation(error, source, what=what, prefix=prefix, model=model) from None
    if statement is not None:
        field, sha256_of = subject
        _require_subject(statement, sha256_of(validated), field, source)
    return validated


def _require_subject(statement: Statement, sha256: str, field: str, source: str) -> None:
    """Raise :class:`InputError` unless a subject of ``statement`` has SHA-256 ``sha256`` (bare hex)."""
    digests = sorted(statement.subject_digests())
    if f"sha256:{sha256}" not in digests:
        raise InputError(
            f"no subject of the Statement has the digest in {field} (sha256:{sha256}); "
            f"its subjects: {', '.join(digests) or 'no sha256 digest'}",
            location=source,
            hint="the Statement's subject must be the engine file its predicate describes",
        )

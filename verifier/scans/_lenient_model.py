"""The base of the scan readers' document models: what a scanner writes beyond them is ignored."""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict, ValidationError

from verifier.base import input_error_from_validation

__all__ = ["LenientModel"]


class LenientModel(BaseModel):
    """A part of a scanner's document: unknown fields ignored, frozen, read by field name or alias, built
    on first use (a reader's models cost nothing until a document of its format is read)."""

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True, defer_build=True)

    @classmethod
    def read(cls, data: Any, source: str, what: str) -> Self:
        """``data`` validated as this model; :class:`~verifier.base.InputError` listing every problem of
        ``what`` (the document, as messages name it) else."""
        try:
            return cls.model_validate(data)
        except ValidationError as error:
            raise input_error_from_validation(error, source, what=what) from None

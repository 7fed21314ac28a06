"""The base of every policy document model: camelCase keys, unknown keys refused, null refused."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, field_validator
from pydantic.alias_generators import to_camel

__all__ = ["StrictModel"]


class StrictModel(BaseModel):
    """A part of a policy document: an unknown key or an explicit null is an error, never ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True)

    @field_validator("*")
    @classmethod
    def _not_null(cls, value: object) -> object:
        # `key:` with nothing after it is what a file cut off while being written leaves behind, and for most
        # optional rules null would mean "no such check" (`signatures:` → no signature check). An absent key
        # takes its default; an explicit null is never accepted. (After validation, not before: pydantic
        # allows no before-validator on the `kind` discriminator; non-optional types refuse null themselves.)
        if value is None:
            raise ValueError("null is not allowed: give a value, or leave the key out to get its default")
        return value

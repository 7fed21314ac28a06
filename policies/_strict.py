"""The base of every policy document model (camelCase keys, unknown keys and null refused), and the field
types the documents share: names, key references, durations, ``metadata``."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import timedelta
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

__all__ = ["API_VERSION", "KeyRef", "Metadata", "Name", "StrictModel", "parse_duration", "refuse_repeats"]


class StrictModel(BaseModel):
    """A part of a policy document: an unknown key or an explicit null is an error, never ignored."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True, defer_build=True
    )

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


API_VERSION = "trtguard.dev/v1alpha1"

_NAME = r"^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$"
_KEY_REF = r"^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?/[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$"
_DURATION = re.compile(r"^(\d+)(s|m|h|d|w)$")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}

Name = Annotated[str, Field(pattern=_NAME, description="lower-case DNS-1123 name")]
KeyRef = Annotated[
    str, Field(pattern=_KEY_REF, description="'<TrustedKeys name>/<key name>', e.g. 'platform/image-signer'")
]


def parse_duration(text: str) -> timedelta:
    """``30s``, ``15m``, ``12h``, ``180d``, ``2w`` → timedelta."""
    found = _DURATION.fullmatch(text)
    if found is None:
        raise ValueError(
            f"{text!r} is not a duration; write a whole number and a unit s, m, h, d or w (180d)"
        )
    return timedelta(seconds=int(found.group(1)) * _DURATION_UNITS[found.group(2)])


def refuse_repeats(values: Sequence[str], problem: str) -> None:
    """Raise ``ValueError("<problem>; repeated: a, b")`` when ``values`` hold any value more than once (each
    repeated value named once, sorted)."""
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:
        raise ValueError(f"{problem}; repeated: {', '.join(repeated)}")


class Metadata(StrictModel):
    """``metadata`` of a policy document."""

    name: Name
    annotations: dict[str, str] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)

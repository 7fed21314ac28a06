"""Reading Sigstore documents (bundles, trusted roots) by the protobuf JSON mapping, field by field.

Fields are looked up under their JSON name (``tlogEntries``) or their proto name (``tlog_entries``), a
``null`` counts as absent (proto3), ``bytes`` are standard or URL-safe base64 with or without padding,
``int64`` a number or a decimal string, ``Timestamp`` RFC 3339. Unknown fields are ignored (as the
sigstore-go and sigstore-python readers do), so what a newer schema adds does not break a reader; what is
read is read strictly, and :class:`MalformedField` names the field by its path. Strings must be valid Unicode
(JSON's ``\ud800`` escape yields an unpaired surrogate, which no UTF-8 encoder, PAE or note signature can
take), and a decimal ``int64`` has at most 19 digits (Python refuses to convert a string of thousands).
"""

from __future__ import annotations

import base64
import binascii
import re
from datetime import UTC, datetime, timedelta
from typing import Any

_INT64 = re.compile(r"-?[0-9]{1,19}")
_INT64_RANGE = range(-(2**63), 2**63)
_TIMESTAMP = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[Tt](?P<time>\d{2}:\d{2}:\d{2})(?:\.(?P<fraction>\d{1,9}))?"
    r"(?P<zone>[Zz]|[+-]\d{2}:\d{2})"
)


class MalformedField(ValueError):
    """A missing or malformed field, named by its ``path`` (``verificationMaterial.tlogEntries[0]``)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


class Fields:
    """One JSON object of a protobuf message, read by field name with its path kept for errors."""

    __slots__ = ("_document", "path")

    def __init__(self, document: Any, path: str) -> None:
        if not isinstance(document, dict):
            raise MalformedField(path, "expected a JSON object")
        self._document: dict[str, Any] = document
        self.path = path

    def _child(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def raw(self, name: str) -> Any:
        """The value under the JSON or the proto name of ``name``; None when absent or null."""
        snake = _snake(name)
        values = [self._document[key] for key in dict.fromkeys((name, snake)) if key in self._document]
        if len(values) > 1:
            raise MalformedField(self._child(name), f"given twice (as {name} and {snake})")
        return values[0] if values else None

    def has(self, name: str) -> bool:
        """True when ``name`` is present and not null."""
        return self.raw(name) is not None

    def message(self, name: str) -> Fields | None:
        """A nested message, or None when absent."""
        value = self.raw(name)
        return None if value is None else Fields(value, self._child(name))

    def required_message(self, name: str) -> Fields:
        """A nested message that must be present."""
        found = self.message(name)
        if found is None:
            raise MalformedField(self._child(name), "missing")
        return found

    def messages(self, name: str) -> list[Fields]:
        """A repeated message field (absent: empty)."""
        value = self.raw(name)
        if value is None:
            return []
        if not isinstance(value, list):
            raise MalformedField(self._child(name), "expected a JSON array")
        return [Fields(item, f"{self._child(name)}[{index}]") for index, item in enumerate(value)]

    def string(self, name: str, *, required: bool = False) -> str:
        """A string field (absent: ``""`` unless ``required``)."""
        value = self.raw(name)
        if value is None:
            if required:
                raise MalformedField(self._child(name), "missing")
            return ""
        if not isinstance(value, str):
            raise MalformedField(self._child(name), "expected a string")
        try:
            value.encode()
        except UnicodeEncodeError as error:
            raise MalformedField(
                self._child(name), "is not valid Unicode text (an unpaired surrogate)"
            ) from error
        if required and not value:
            raise MalformedField(self._child(name), "is empty")
        return value

    def binary(self, name: str, *, required: bool = False) -> bytes:
        """A ``bytes`` field: base64, standard or URL-safe, padding optional."""
        return decode_base64(self.string(name, required=required), self._child(name))

    def byte_list(self, name: str) -> list[bytes]:
        """A repeated ``bytes`` field."""
        value = self.raw(name)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise MalformedField(self._child(name), "expected an array of base64 strings")
        return [decode_base64(item, f"{self._child(name)}[{index}]") for index, item in enumerate(value)]

    def int64(self, name: str, *, required: bool = False) -> int:
        """An ``int64`` field: a JSON integer or a decimal string (absent: 0 unless ``required``)."""
        value = self.raw(name)
        if value is None:
            if required:
                raise MalformedField(self._child(name), "missing")
            return 0
        if isinstance(value, bool) or not (
            isinstance(value, int) or (isinstance(value, str) and _INT64.fullmatch(value))
        ):
            raise MalformedField(self._child(name), "expected an integer")
        number = int(value)
        if number not in _INT64_RANGE:
            raise MalformedField(self._child(name), "out of the int64 range")
        return number

    def timestamp(self, name: str) -> datetime | None:
        """A ``google.protobuf.Timestamp`` (RFC 3339), or None when absent."""
        value = self.raw(name)
        if value is None:
            return None
        if not isinstance(value, str) or (match := _TIMESTAMP.fullmatch(value)) is None:
            raise MalformedField(self._child(name), "expected an RFC 3339 time such as 2025-01-31T12:00:00Z")
        zone = match["zone"].upper().replace("Z", "+00:00")
        try:
            moment = datetime.fromisoformat(f"{match['date']}T{match['time']}{zone}")
        except ValueError as error:
            raise MalformedField(self._child(name), f"not a valid time ({error})") from error
        # Nanoseconds are cut to microseconds, the resolution of datetime.
        fraction = int((match["fraction"] or "0").ljust(9, "0")[:6])
        return moment.astimezone(UTC) + timedelta(microseconds=fraction)


def decode_base64(text: str, path: str) -> bytes:
    """Standard or URL-safe base64, with or without padding (the protobuf JSON mapping accepts all four);
    line breaks are skipped, as Go's decoder (protojson) skips them."""
    cleaned = text.strip().replace("\r", "").replace("\n", "").replace("-", "+").replace("_", "/")
    cleaned += "=" * (-len(cleaned) % 4)
    try:
        return base64.b64decode(cleaned, validate=True)
    except (binascii.Error, ValueError) as error:
        raise MalformedField(path, "not valid base64") from error

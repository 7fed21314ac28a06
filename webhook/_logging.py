"""Structured JSON logs: one object per line on stderr, one line per admission decision.

Fields beside the message go in ``extra={"fields": {...}}`` (any other ``extra`` key works too); keeping them
in one mapping avoids clashes with ``LogRecord``'s own attribute names such as ``name``.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
import traceback
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final, TextIO

from webhook._json import json_encoder

#: Attributes every LogRecord has; anything else came from ``extra``.
_STANDARD: Final = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
# One encoder for every line: json.dumps with options builds a new one per call (a line per admission), and
# JSONEncoder.encode a C encoder per call (webhook._json).
_ENCODER: Final = json_encoder(json.JSONEncoder(default=str, ensure_ascii=False, separators=(",", ":")))
_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


#: The whole second last written by :func:`utc_time`, and its text up to the microseconds.
_second: tuple[int, str] = (-1, "")
#: 9999-12-31T23:59:59Z: the last second that ``strftime``'s four-digit year can write.
_LAST_SECOND: Final = 253_402_300_799


def utc_time(created: float) -> str:
    """``datetime.fromtimestamp(created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")``, the text of its second
    made once a second (``strftime`` costs a fifth of a decision line).

    The microseconds are rounded as ``fromtimestamp`` rounds them: half to even, carrying into the second.
    """
    global _second  # noqa: PLW0603 - one cached second for the process; replaced whole, never changed
    if not 0 <= created < _LAST_SECOND:
        return datetime.fromtimestamp(created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    fraction, whole = math.modf(created)
    second, micro = int(whole), round(fraction * 1e6)
    if micro >= 1_000_000:
        second, micro = second + 1, micro - 1_000_000
    cached = _second
    if cached[0] != second:
        cached = _second = (second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S."))
    return f"{cached[1]}{micro:06d}Z"


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object: time, level, logger, message, then the extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        """One line of JSON, never raising on odd values (they are written with ``str``)."""
        data: dict[str, Any] = {
            "time": utc_time(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key == "fields" and isinstance(value, dict):
                data.update(value)
            elif key not in _STANDARD and key != "color_message":
                data[key] = value
        if record.exc_info and record.exc_info[0] is not None:
            data["exception"] = "".join(traceback.format_exception(*record.exc_info)).rstrip()
        return _ENCODER(data)


def log_fields(logger: logging.Logger, level: int, message: str, fields: Mapping[str, Any]) -> None:
    """Log ``message`` with ``fields`` as top-level JSON keys, without the caller lookup.

    For hot paths (one line per admission): ``Logger.findCaller`` walks the stack on every call, for a file
    and line number that a decision line does not need. Where every handler the record would reach is a plain
    ``StreamHandler`` with a :class:`JsonFormatter` (what :func:`configure_logging` installs) and nothing on
    the way filters or rebuilds records, the line is written directly: the same text, to the same handlers,
    under their locks, without a ``LogRecord`` (about 60 % of a decision line's instructions: issue 31).
    Anything else (a test's capture handler, a filter, another record factory) takes ``Logger.handle``.
    """
    if not logger.isEnabledFor(level):
        return
    handlers = _direct_handlers(logger, level)
    if handlers is None:
        logger.handle(
            logger.makeRecord(logger.name, level, "", 0, message, (), None, extra={"fields": fields})
        )
        return
    created = time.time()
    data: dict[str, Any] = {
        "time": utc_time(created),
        "level": logging.getLevelName(level).lower(),
        "logger": logger.name,
        "message": message,
    }
    if isinstance(fields, dict):  # as JsonFormatter merges ``extra={"fields": ...}``
        data.update(fields)
    else:
        data["fields"] = fields
    for handler in handlers:
        handler.acquire()
        try:
            handler.stream.write(_ENCODER(data) + handler.terminator)
            handler.flush()
        except RecursionError:  # as StreamHandler.emit
            raise
        except Exception:  # StreamHandler.emit reports it through handleError
            handler.handleError(_record(logger, level, message, fields, created))
        finally:
            handler.release()


def _direct_handlers(logger: logging.Logger, level: int) -> list[logging.StreamHandler[Any]] | None:
    """The handlers ``Logger.handle`` would pass a record of ``level`` to, if each of them formats it as
    :func:`log_fields` writes it directly; else None."""
    if (
        logger.disabled
        or logger.filters
        or type(logger) is not logging.Logger  # a Logger subclass may make or handle records its own way
        or logging.getLogRecordFactory() is not logging.LogRecord
    ):
        return None
    found: list[logging.StreamHandler[Any]] = []
    current: logging.Logger | None = logger
    while current is not None:
        for handler in current.handlers:
            if level < handler.level:
                continue
            if (
                type(handler) is not logging.StreamHandler
                or type(handler.formatter) is not JsonFormatter
                or handler.filters
            ):
                return None
            found.append(handler)
        current = current.parent if current.propagate else None
    # No handler at all: ``logging.lastResort`` writes the bare message; that is Logger.handle's to do.
    return found or None


def _record(
    logger: logging.Logger, level: int, message: str, fields: Mapping[str, Any], created: float
) -> logging.LogRecord:
    """The record ``Logger.handle`` would have made, for a handler's ``handleError``."""
    record = logger.makeRecord(logger.name, level, "", 0, message, (), None, extra={"fields": fields})
    record.created = created
    return record


def configure_logging(level: str = "info", stream: TextIO | None = None) -> logging.Handler:
    """Send every log record (uvicorn's included) as JSON lines to ``stream`` (stderr by default).

    Returns the installed handler, so that a caller can remove it again.
    """
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(_LEVELS.get(level.lower(), logging.INFO))
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        uvicorn_logger = logging.getLogger(name)
        uvicorn_logger.handlers.clear()
        uvicorn_logger.propagate = True
    # Each decision is logged once by the webhook with its uid; uvicorn's access line would only repeat it.
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
    # The pool logs every reconnection attempt at INFO while a database is down; the store reports it once.
    logging.getLogger("psycopg.pool").setLevel(max(logging.WARNING, root.level))
    return handler

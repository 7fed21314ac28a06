"""Structured JSON logs: one object per line on stderr, one line per admission decision.

Fields beside the message go in ``extra={"fields": {...}}`` (any other ``extra`` key works too); keeping them
in one mapping avoids clashes with ``LogRecord``'s own attribute names such as ``name``.
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final, TextIO

#: Attributes every LogRecord has; anything else came from ``extra``.
_STANDARD: Final = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
# One encoder for every line: json.dumps with options builds a new one per call (a line per admission).
_ENCODER: Final = json.JSONEncoder(default=str, ensure_ascii=False, separators=(",", ":"))
_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object: time, level, logger, message, then the extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        """One line of JSON, never raising on odd values (they are written with ``str``)."""
        data: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
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
        return _ENCODER.encode(data)


def log_fields(logger: logging.Logger, level: int, message: str, fields: Mapping[str, Any]) -> None:
    """Log ``message`` with ``fields`` as top-level JSON keys, without the caller lookup.

    For hot paths (one line per admission): ``Logger.findCaller`` walks the stack on every call, for a file
    and line number that a decision line does not need.
    """
    if logger.isEnabledFor(level):
        logger.handle(
            logger.makeRecord(logger.name, level, "", 0, message, (), None, extra={"fields": fields})
        )


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

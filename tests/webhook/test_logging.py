"""webhook/_logging.py: one JSON object per line, fields flattened, uvicorn's loggers routed through it."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from webhook._logging import JsonFormatter, configure_logging, log_fields


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    buffer = io.StringIO()
    handler = configure_logging("debug", buffer)
    yield buffer
    root.removeHandler(handler)
    for existing in saved[0]:
        root.addHandler(existing)
    root.setLevel(saved[1])


def _lines(buffer: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def test_fields_become_top_level_keys(stream: io.StringIO) -> None:
    logging.getLogger("webhook._admission").info(
        "admission decision", extra={"fields": {"uid": "u-1", "name": "pod-a", "allowed": False}}
    )
    [line] = _lines(stream)
    assert line["message"] == "admission decision"
    assert line["level"] == "info"
    assert line["logger"] == "webhook._admission"
    assert (line["uid"], line["name"], line["allowed"]) == ("u-1", "pod-a", False)
    assert line["time"].endswith("Z")


def test_exceptions_are_one_line_of_json(stream: io.StringIO) -> None:
    try:
        raise ValueError("bad\nthing")
    except ValueError:
        logging.getLogger("x").exception("failed")
    text = stream.getvalue()
    assert text.count("\n") == 1
    assert _lines(stream)[0]["exception"].endswith("ValueError: bad\nthing")


def test_odd_values_do_not_break_a_line(stream: io.StringIO) -> None:
    logging.getLogger("x").warning("odd", extra={"fields": {"path": object(), "when": {1, 2}}})
    assert _lines(stream)[0]["message"] == "odd"


def test_uvicorn_logs_go_through_it_and_access_lines_are_quiet(stream: io.StringIO) -> None:
    logging.getLogger("uvicorn.error").info("Uvicorn running")
    logging.getLogger("uvicorn.access").info("GET /validate 200")
    assert [line["message"] for line in _lines(stream)] == ["Uvicorn running"]


def test_level_filters(stream: io.StringIO) -> None:
    configure_logging("error", stream)
    logging.getLogger("x").warning("hidden")
    logging.getLogger("x").error("shown")
    assert [line["message"] for line in _lines(stream)] == ["shown"]


def test_formatter_alone() -> None:
    record = logging.LogRecord("n", logging.INFO, __file__, 1, "hello %s", ("world",), None)
    record.extra_key = "v"
    assert json.loads(JsonFormatter().format(record))["extra_key"] == "v"
    assert json.loads(JsonFormatter().format(record))["message"] == "hello world"


def test_log_fields_writes_one_line_and_honours_the_level(stream: io.StringIO) -> None:
    log_fields(logging.getLogger("webhook._admission"), logging.INFO, "admission decision", {"uid": "u-9"})
    log_fields(logging.getLogger("webhook._admission"), logging.DEBUG - 1, "too low", {"uid": "u-10"})
    [line] = _lines(stream)
    assert (line["message"], line["uid"], line["logger"]) == (
        "admission decision",
        "u-9",
        "webhook._admission",
    )

"""webhook/_logging.py: the decision line written directly is the line ``Logger.handle`` writes."""

from __future__ import annotations

import io
import json
import logging
import math
import random
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.conftest import DATA
from webhook import _logging
from webhook._logging import JsonFormatter, log_fields, utc_time

HOSTILE = list(json.loads((DATA / "760-hostile-strings.json").read_text())["strings"].values())
FIELDS: list[Mapping[str, Any]] = [
    {},
    {
        "uid": "6f1c1b0e-4a55-4bd2-9d3c-5b1fa1e27a7c",
        "operation": "CREATE",
        "kind": "v1/Pod",
        "sub_resource": None,
        "namespace": "prod",
        "name": "server",
        "user": "system:serviceaccount:prod:deployer",
        "dry_run": False,
        "allowed": True,
        "reason": "Allowed",
        "status_message": None,
        "warnings": [],
        "policy_revision": "sha256:57d0",
        "latency_ms": 1.234,
    },
    {text: [text, {"nested": text}] for text in HOSTILE},
    {"time": "overridden", "message": "overridden too", "level": 5, "logger": None},
    {"odd": object(), "set": {1, 2}, "bytes": b"\xff", "nan": float("nan"), "lone": "\ud800"},
]


@pytest.fixture
def root() -> Iterator[logging.Logger]:
    logger = logging.getLogger()
    saved = (list(logger.handlers), logger.level)
    yield logger
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    for handler in saved[0]:
        logger.addHandler(handler)
    logger.setLevel(saved[1])


def _both(
    logger: logging.Logger, fields: Mapping[str, Any], monkeypatch: pytest.MonkeyPatch, buffer: io.StringIO
) -> tuple[str, str]:
    """The text written by log_fields, and by Logger.handle with the record log_fields made before."""
    monkeypatch.setattr(time, "time", lambda: 1_764_870_123.4567895)
    log_fields(logger, logging.INFO, "admission decision", fields)
    direct = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    logger.handle(
        logger.makeRecord(
            logger.name, logging.INFO, "", 0, "admission decision", (), None, extra={"fields": fields}
        )
    )
    return direct, buffer.getvalue()


@pytest.mark.parametrize("fields", FIELDS, ids=range(len(FIELDS)))
def test_the_direct_line_is_the_line_of_logger_handle(
    fields: Mapping[str, Any], root: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    buffer = io.StringIO()
    _logging.configure_logging("info", buffer)
    logger = logging.getLogger("webhook._admission")
    assert _logging._direct_handlers(logger, logging.INFO) is not None  # the direct path is taken
    direct, handled = _both(logger, fields, monkeypatch, buffer)
    assert direct == handled
    assert direct.endswith("\n") and direct.count("\n") == 1


def test_every_handler_on_the_way_gets_the_line_once(
    root: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    buffer, own, quiet = io.StringIO(), io.StringIO(), io.StringIO()
    _logging.configure_logging("debug", buffer)
    logger = logging.getLogger("tests.direct.every")
    for stream, level in ((own, logging.DEBUG), (quiet, logging.ERROR)):
        handler = logging.StreamHandler(stream)
        handler.setFormatter(JsonFormatter())
        handler.setLevel(level)
        logger.addHandler(handler)
    try:
        direct, handled = _both(logger, FIELDS[1], monkeypatch, buffer)
        assert direct == handled
        assert own.getvalue() == direct * 2 and quiet.getvalue() == ""
        logger.propagate = False
        buffer.seek(0)
        buffer.truncate()
        log_fields(logger, logging.INFO, "not propagated", {})
        assert buffer.getvalue() == "" and own.getvalue().count("\n") == 3
    finally:
        logger.propagate = True
        logger.handlers.clear()


class _Drop(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return False


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_anything_else_takes_logger_handle(root: logging.Logger) -> None:
    buffer = io.StringIO()
    _logging.configure_logging("info", buffer)
    logger = logging.getLogger("tests.direct.other")
    collect = _Collect()
    logger.addHandler(collect)  # another kind of handler on the way: records for every handler
    try:
        assert _logging._direct_handlers(logger, logging.INFO) is None
        log_fields(logger, logging.INFO, "collected", {"uid": "u-1"})
        assert [r.fields for r in collect.records] == [{"uid": "u-1"}]  # type: ignore[attr-defined]
        logger.removeHandler(collect)
        logger.addFilter(_Drop())
        assert _logging._direct_handlers(logger, logging.INFO) is None
        log_fields(logger, logging.INFO, "filtered", {})
        logger.filters.clear()
        root.handlers[0].addFilter(_Drop())
        assert _logging._direct_handlers(logger, logging.INFO) is None
        log_fields(logger, logging.INFO, "filtered by the handler", {})
        root.handlers[0].filters.clear()
        logger.disabled = True
        log_fields(logger, logging.INFO, "disabled", {})
        assert "filtered" not in buffer.getvalue() and "disabled" not in buffer.getvalue()
        assert "collected" in buffer.getvalue()
    finally:
        logger.removeHandler(collect)
        logger.filters.clear()
        logger.disabled = False


def test_another_record_factory_takes_logger_handle(root: logging.Logger) -> None:
    buffer = io.StringIO()
    _logging.configure_logging("info", buffer)
    original = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = original(*args, **kwargs)
        record.added = "by the factory"
        return record

    logging.setLogRecordFactory(factory)
    try:
        log_fields(logging.getLogger("webhook._admission"), logging.INFO, "made", {"uid": "u-3"})
    finally:
        logging.setLogRecordFactory(original)
    assert json.loads(buffer.getvalue())["added"] == "by the factory"


def test_a_failing_stream_is_reported_as_emit_reports_it(
    root: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Broken(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError("disk full")

    handler = _logging.configure_logging("info", Broken())
    reported: list[logging.LogRecord] = []
    monkeypatch.setattr(handler, "handleError", reported.append)
    monkeypatch.setattr(time, "time", lambda: 1_764_870_000.25)
    log_fields(logging.getLogger("webhook._admission"), logging.INFO, "lost", {"uid": "u-2"})
    [record] = reported
    assert (record.getMessage(), record.fields, record.created) == ("lost", {"uid": "u-2"}, 1_764_870_000.25)  # type: ignore[attr-defined]


def _outcome(format_time: Any, created: float) -> str:
    try:
        return str(format_time(created))
    except (ValueError, OverflowError, OSError) as error:  # beyond the years datetime can write
        return repr(error)


def _strftime(created: float) -> str:
    return datetime.fromtimestamp(created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_utc_time_is_strftime_of_fromtimestamp() -> None:
    rng = random.Random(31)
    values = [0.0, 5e-7, 1.5e-6, 0.9999995, 1.9999995, 1_764_870_000.9999996, 253_402_300_798.9999997]
    values += [253_402_300_799.0, 253_402_300_799.9999996, 253_402_300_800.5, -0.5, -1_000.0000005, 1e20]
    for _ in range(20_000):
        second = rng.randrange(0, 4_000_000_000)
        values.append(second + rng.random())
        values.append(second + (rng.randrange(2_000_000) + 1) / 2_000_000)  # halves of a microsecond
        values.append(math.nextafter(second + rng.randrange(1_000_000) / 1e6 + 5e-7, -math.inf))
        values.append(1_764_870_000 + rng.randrange(10**6) / 1e6)
    for created in values:
        assert _outcome(utc_time, created) == _outcome(_strftime, created), created

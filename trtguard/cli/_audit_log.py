"""What the ``trtguard audit`` commands share: the decision log's URL, a read of the log, times and warnings.

Apart from :mod:`trtguard.cli.audit` so that its subcommands' modules (``_audit_verify``, ``_audit_segments``,
``_audit_history``) import it without importing the command module that registers them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from verifier.base import InputError
from webhook import DEFAULT_DECISION_LOG

if TYPE_CHECKING:
    from decisionlog import ChainReport, DecisionStore
    from trtguard.audit import ChainCheck

_T = TypeVar("_T")
_RELATIVE = re.compile(r"(\d+)([smhd])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def add_decision_log_argument(parser: argparse.ArgumentParser) -> None:
    """``--decision-log URL``: the log a command reads (see :func:`log_url`)."""
    parser.add_argument(
        "--decision-log",
        metavar="URL",
        help=f"sqlite:///path or postgresql://… (default: $TRTGUARD_DECISION_LOG or {DEFAULT_DECISION_LOG})",
    )


def log_url(args: argparse.Namespace) -> str:
    """The ``--decision-log`` URL, else ``$TRTGUARD_DECISION_LOG``, else the default."""
    value: str = args.decision_log or os.environ.get("TRTGUARD_DECISION_LOG") or DEFAULT_DECISION_LOG
    return value


def read_log(args: argparse.Namespace, work: Callable[[DecisionStore], Awaitable[_T]]) -> _T:
    """``work`` on the log opened read-only; a SQLite file that does not exist is a usage error."""
    from decisionlog import open_store  # noqa: PLC0415 - keep `trtguard --help` light

    url = log_url(args)
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///").partition("?")[0]).is_file():
        # A wrong path is a usage error (exit 2), as for `check --decision-log`; reading never creates a log.
        raise InputError(
            "the decision log file does not exist",
            location=url.removeprefix("sqlite:///").partition("?")[0],
            hint="pass the --decision-log URL that `trtguard serve` writes to "
            "(sqlite:///relative/file.db, sqlite:////absolute/file.db)",
        )

    async def main() -> _T:
        store = open_store(url, read_only=True)
        await store.open()
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(main())


def warn(text: str) -> None:
    """A warning on stderr."""
    print(f"trtguard: WARNING: {text}", file=sys.stderr)


def chain_status(chain: ChainCheck, unverified: int) -> int:
    """The exit status of a command that printed records, ``unverified`` of them not vouched for by
    ``chain``: 1 for any, or for a broken chain, else 0; what the chain does not vouch for is warned about."""
    warning = chain.warning(unverified)
    if warning is not None:
        warn(warning)
    broken = chain.report is not None and not chain.report.ok
    return 1 if unverified or broken else 0


def chain_json(report: ChainReport) -> dict[str, Any]:
    """A recomputed chain in ``--format json`` (``audit verify``, ``audit history``)."""
    brk = report.first_break
    return {
        "ok": report.ok,
        "records": report.records,
        "head_seq": report.head_seq,
        "head_hash": report.head_hash,
        "first_break": {"seq": brk.seq, "uid": brk.uid, "problem": brk.problem} if brk else None,
    }


def parse_time(text: str | None, flag: str) -> datetime | None:
    """A ``--since``/``--until`` value: an RFC 3339 time (UTC when it names no zone) or an age (``6h``)."""
    if text is None:
        return None
    if match := _RELATIVE.fullmatch(text.strip()):
        return datetime.now(UTC) - timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(
            f"{text!r} is neither an RFC 3339 time nor an age",
            location=flag,
            hint="e.g. 2026-11-29T12:00:00Z or 6h",
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)

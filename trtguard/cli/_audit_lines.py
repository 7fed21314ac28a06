"""How ``trtguard audit`` prints for people: one line at a time, with what records quote made visible.

Records quote names, requesters and messages from admission requests: :func:`say` writes every invisible or
line-breaking character in a line out (:mod:`verifier.base._visible`), so that a newline or a right-to-left
override in a name cannot forge or hide a line of ``tail``, ``query`` or ``history``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from verifier.base import visible

if TYPE_CHECKING:
    from decisionlog import StoredRecord

__all__ = ["print_record", "say", "stamp"]


def print_record(stored: StoredRecord, fmt: str, out: TextIO, intact: bool | None) -> None:
    """One record; ``intact`` says whether the chain vouches for it (None: not checked)."""
    record = stored.record
    if fmt == "json":
        data: dict[str, Any] = {"seq": stored.seq, "hash": stored.hash, "prev_hash": stored.prev_hash}
        data["record"] = record.to_json()
        data["verified"] = intact
        print(json.dumps(data, ensure_ascii=False), file=out)
        return
    if intact is False:
        say(out, f"UNVERIFIED (not vouched for by the hash chain): #{stored.seq}")
    verdict = "ALLOW" if record.allowed else "DENY "
    from policies.identity import kind_name  # noqa: PLC0415 - keep `trtguard --help` light

    kind = kind_name(record.api_group, record.kind)
    where = "/".join(part for part in (record.namespace, kind, record.name) if part)
    sub = f"/{record.sub_resource}" if record.sub_resource else ""
    dry = " (dry run)" if record.dry_run else ""
    user = f" by {record.user}" if record.user else ""
    line = f"{stamp(record.time)}  #{stored.seq:<6} {verdict} {record.operation:<7} {where}{sub}{dry}{user}"
    line += f"  [{record.reason}, {record.latency_us / 1000:.1f} ms, uid {record.uid}]"
    say(out, line)
    if record.message:
        say(out, f"    {record.message}")
    for warning in record.warnings:
        say(out, f"    warning: {warning}")


def say(out: TextIO, line: str) -> None:
    """Print ``line`` (after the blank line it starts with, if it does) with what it quotes made visible."""
    blank, text = ("\n", line[1:]) if line.startswith("\n") else ("", line)
    print(blank + visible(text), file=out)


def stamp(moment: datetime) -> str:
    """A time in UTC to the second, RFC 3339."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

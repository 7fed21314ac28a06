"""CPU of matching a scan's findings against an allow-list: each finding scanning every entry (as before
issue 27's fix S1) beside :class:`policies._allow_lists.AllowList` (one lookup per id), in the same run.

Findings carry 3 ids each (an id and two aliases) and none is allow-listed but the last, the worst case for
a scan of the list. Printed: the best of --runs, in milliseconds of this thread's CPU.

Usage:  .venv/bin/python bench/allow_lists.py [--entries 1000 10000] [--findings 1000] [--runs 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from policies._allow_lists import AllowEntry, AllowList

NOW = datetime(2026, 12, 2, tzinfo=UTC)


def _best(call: Callable[[], object], runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.thread_time()
        call()
        best = min(best, (time.thread_time() - started) * 1e3)
    return best


def _scanning(entries: Sequence[AllowEntry], findings: Sequence[tuple[str, ...]]) -> int:
    """The matching before the fix: a set of active ids, then a scan of the list per finding."""
    active = {entry.id for entry in entries if entry.active(NOW)}
    admitted = 0
    for ids in findings:
        if any(i in active for i in ids):
            admitted += 1
            continue
        _expired = [e for e in entries if e.id in ids and not e.active(NOW)]
    return admitted


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entries", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--findings", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"{'entries':>8} {'findings':>8} {'scanning ms':>12} {'indexed ms':>11}")
    for count in args.entries:
        entries = [AllowEntry(f"CVE-2099-{n:05d}", "filler", None, "x.allow.yaml:1") for n in range(count)]
        findings = [(f"GHSA-{n}", f"PYSEC-{n}", f"CVE-3-{n}") for n in range(args.findings - 1)]
        findings.append(("GHSA-last", "PYSEC-last", f"CVE-2099-{count - 1:05d}"))
        listed = AllowList.of(entries)
        assert _scanning(entries, findings) == 1
        assert sum(listed.match(ids, NOW)[0] is not None for ids in findings) == 1
        scanning = _best(lambda e=entries, f=findings: _scanning(e, f), args.runs)  # type: ignore[misc]
        indexed = _best(lambda a=listed, f=findings: [a.match(i, NOW) for i in f], args.runs)  # type: ignore[misc]
        print(f"{count:>8} {args.findings:>8} {scanning:>12.1f} {indexed:>11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

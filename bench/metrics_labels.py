"""CPU of the metrics one answered review updates: the labelled children looked up on every call (as before
issue 31) beside the children bound once (``Metrics.count_review`` and ``count_write``), in the same run.

Printed: the best of --runs of the mean over --calls, in microseconds of this thread's CPU.

Usage:  .venv/bin/python bench/metrics_labels.py [--calls 200000] [--runs 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from webhook._metrics import Metrics


def _best(call: Callable[[], object], calls: int, runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.thread_time()
        for _ in range(calls):
            call()
        best = min(best, (time.thread_time() - started) / calls * 1e6)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    metrics = Metrics()

    def looked_up() -> None:
        metrics.reviews.labels("allow", "CREATE", "Pod", "false").inc()
        metrics.review_seconds.labels("allow").observe(0.003)
        metrics.decision_log_writes.labels("written").inc()

    def bound() -> None:
        metrics.count_review("allow", "CREATE", "Pod", False, 0.003)
        metrics.count_write("written")

    before, after = _best(looked_up, args.calls, args.runs), _best(bound, args.calls, args.runs)
    print(
        f"metrics of one review: labels() on every call {before:.2f} us, children bound once {after:.2f} us"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

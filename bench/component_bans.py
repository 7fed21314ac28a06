"""CPU of the built-in ``components`` check (policies/rules/_components.py) on an SBOM listing one package
many times, each copy at a version of its own (attack 27, F7: versioned bans re-parsed every copy's purl per
ban, 59.8 s for 50 bans against 20,000 copies), beside reading the same SBOM (``read_cyclonedx``), which an
admission pays whatever the policy says, in the same run.

Printed: the best of --runs, in milliseconds of this thread's CPU; "no ban" checks one required name (the
check's baseline: the index built, no version asked), "N bans" as many versioned purls of the package.

Usage:  .venv/bin/python bench/component_bans.py [--components 20000 60000] [--bans 0 1 50] [--runs 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from policies.rules._components import component_findings
from verifier.scans import Component
from verifier.scans._cyclonedx import read_cyclonedx


def _best(call: Callable[[], object], runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.thread_time()
        call()
        best = min(best, (time.thread_time() - started) * 1e3)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--components", type=int, nargs="+", default=[20_000, 60_000])
    parser.add_argument("--bans", type=int, nargs="+", default=[0, 1, 50])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"{'components':>10} {'read ms':>8} " + " ".join(f"{f'{b} bans ms':>11}" for b in args.bans))
    for count in args.components:
        bom = {
            "bomFormat": "CycloneDX",
            "specVersion": "1.5",
            "metadata": {"timestamp": "2026-12-01T00:00:00Z"},
            "components": [
                {"type": "library", "name": "PyYAML", "version": f"9.{n}", "purl": f"pkg:pypi/pyyaml@9.{n}"}
                for n in range(count)
            ],
        }
        listed = read_cyclonedx(bom, "bench").components
        read = _best(lambda b=bom: read_cyclonedx(b, "bench"), args.runs)  # type: ignore[misc]
        figures = []
        for bans in args.bans:
            banned = [f"pkg:pypi/pyyaml@5.{n}" for n in range(bans)]
            required = [] if bans else ["pyyaml"]

            def check(
                r: list[str] = required, b: list[str] = banned, c: Sequence[Component] = listed
            ) -> object:
                return component_findings("r", required=r, banned=b, listed=c, origin="bench")

            figures.append(_best(check, args.runs))
        print(f"{count:>10} {read:>8.0f} " + " ".join(f"{f:>11.0f}" for f in figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Notary Project conformance (issue 25): per suite, the cases and how many trtguard agrees on, falsely
accepts, falsely refuses, or crashes on (the cases: tests/verifier/signatures/notation/conformance.py).

Run from the repository root::

    .venv/bin/python bench/notation_conformance.py                    # this checkout's code
    .venv/bin/python bench/notation_conformance.py --code /work/main  # another checkout's code (before)
    .venv/bin/python bench/notation_conformance.py --list             # every case and its verdict

``--code DIR`` imports trtguard (``verifier``, ``policies``) from DIR; the cases, the envelope builder and the
test data always come from this checkout, so both runs judge the same material.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def _load(name: str, path: Path) -> object:
    """Import ``name`` from ``path`` of this checkout, whatever checkout its package comes from."""
    importlib.import_module(name.rpartition(".")[0])
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", type=Path, default=HERE, help="the checkout whose code is judged")
    parser.add_argument("--list", action="store_true", help="print every case")
    args = parser.parse_args()
    sys.path.insert(0, str(args.code.resolve()))
    _load("tests.support.notation_envelopes", HERE / "tests/support/notation_envelopes.py")
    harness = _load(
        "tests.verifier.signatures.notation.conformance",
        HERE / "tests/verifier/signatures/notation/conformance.py",
    )
    outcomes = [harness.run_case(case) for case in harness.cases(HERE / "tests/data/notation-go")]  # type: ignore[attr-defined]
    if args.list:
        for outcome in outcomes:
            print(f"{outcome.verdict:13} {outcome.case.suite:12} {outcome.case.name}  {outcome.detail[:120]}")
    print(f"code: {args.code.resolve()}")
    print("| suite | cases | agree | false accept | false reject | crash |")
    print("|---|---|---|---|---|---|")
    for row in harness.table(outcomes):  # type: ignore[attr-defined]
        print(
            f"| {row['suite']} | {row['cases']} | {row['agree']} | {row['false accept']} | "
            f"{row['false reject']} | {row['crash']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

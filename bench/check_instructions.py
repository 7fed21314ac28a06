"""Instructions of ``trtguard check`` per resource, counted by ``valgrind --tool=callgrind`` (issue 31's
figure: a count the machine's load does not move), beside PyYAML's C ``load_all`` of the same file.

The whole command runs under callgrind on 1 and on 1 + --n resources of the file ``bench/check_10k.py``
makes (``--format json``, the library policies, their test keys and attestations), every thread counted,
``PYTHONHASHSEED=0``; (Ir(1 + N) - Ir(1)) / N is a resource past the first, start-up, the policies' load and
shutdown cancelled out. The parse is counted alike: a process that reads the file and loads every document
with ``yaml.CSafeLoader``. ``--before DIR`` also counts an earlier source tree (``git archive REV | tar -x
-C DIR``), run with this interpreter, and says whether its reports are the same bytes.

Usage: ``.venv/bin/python bench/check_instructions.py [--n 200] [--before DIR]``
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
LIBRARY = HERE.parent / "policies" / "library"
PARSE = "import sys, yaml; sum(1 for _ in yaml.load_all(open(sys.argv[1]).read(), Loader=yaml.CSafeLoader))"


def _resources(count: int, path: Path) -> Path:
    spec = importlib.util.spec_from_file_location("check_10k_bench", HERE / "check_10k.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path.write_text(yaml.safe_dump_all((module.resource(i) for i in range(count)), sort_keys=False))
    return path


def _counted(command: list[str], cwd: Path, out: Path) -> tuple[int, bytes]:
    """Ir of every thread of ``command`` under callgrind, and what it printed."""
    valgrind = ["valgrind", "--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={out}"]
    valgrind += [f"--log-file={out}.log"]
    env = {**os.environ, "PYTHONPATH": str(cwd), "PYTHONHASHSEED": "0"}
    done = subprocess.run([*valgrind, *command], capture_output=True, cwd=cwd, env=env, check=False)
    total = 0
    for path in out.parent.glob(out.name + "*"):
        if path.suffix != ".log":
            found = re.findall(r"^(?:summary|totals):\s+(\d+)", path.read_text(), re.M)
            total += int(found[0]) if found else 0
    return total, done.stdout


def _check(inputs: Path) -> list[str]:
    policies = ["--policies", str(LIBRARY), "--policies", str(LIBRARY / "tests" / "keys.yaml")]
    attestations = ["--attestations", str(LIBRARY / "tests" / "attestations")]
    return [
        sys.executable,
        "-m",
        "trtguard",
        "check",
        *policies,
        *attestations,
        "--format",
        "json",
        str(inputs),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=200, help="resources past the first (200)")
    parser.add_argument("--before", type=Path, help="an earlier source tree, counted in the same run")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("valgrind not found: instruction counts skipped")
        return 0
    trees = {"this tree": HERE.parent} | ({"before": args.before.resolve()} if args.before else {})
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        small, large = _resources(1, folder / "one.yaml"), _resources(1 + args.n, folder / "many.yaml")
        figures: dict[str, float] = {}
        reports: set[bytes] = set()
        for label, tree in trees.items():
            key = label.replace(" ", "-")
            one, _ = _counted(_check(small), tree, folder / f"{key}-one.out")
            many, report = _counted(_check(large), tree, folder / f"{key}-many.out")
            figures[label] = (many - one) / args.n
            reports.add(report)
        one, _ = _counted([sys.executable, "-c", PARSE, str(small)], HERE.parent, folder / "parse-one.out")
        many, _ = _counted([sys.executable, "-c", PARSE, str(large)], HERE.parent, folder / "parse-many.out")
        parse = (many - one) / args.n
    print(
        f"Instructions (callgrind Ir) per resource past the first, {args.n} resources of check_10k.py's file"
    )
    print(f"  PyYAML C load_all    {parse:>12,.0f}")
    for label, figure in figures.items():
        print(f"  check, {label:<13} {figure:>12,.0f} ({figure / parse:.2f}x the parse)")
    if len(trees) > 1:
        print("  reports: " + ("the same bytes" if len(reports) == 1 else "DIFFERENT"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""OpenPGP conformance: trtguard's verdicts beside gpgv's, sqv's, sq's and PGPy's on signatures made by gpg.

Run from the repository root (needs ``gpg``; ``gpgv``, ``sqv`` and ``sq`` are Debian's packages, PGPy is in
the dev lock)::

    .venv/bin/python bench/openpgp_conformance.py
    .venv/bin/python bench/openpgp_conformance.py --root /path/to/another/checkout   # e.g. main, before

The cases are ``tests/support/openpgp_conformance.py``'s. trtguard's verdict is ``trtguard verify-openpgp``'s
where the checkout has that command, else ``verify_detached`` with each certificate of the keyring as a
key (how such a checkout checks a keyring). For each reference the table counts the cases, those where
trtguard agrees, and where it verified what the reference did not (false accept) or the reverse (false
reject); the ``expected`` row compares with the verdicts the cases carry (OpenPGP's rules, RFC 9580, and
trtguard's documented refusals). Then each disagreement, and who is right.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import openpgp_conformance as conformance
from tests.support.gpg import GnuPG


def _trtguard(root: Path | None) -> tuple[str, conformance.Verifier]:
    if root is not None:
        sys.path.insert(0, str(root.resolve()))
        for name in [m for m in sys.modules if m.split(".")[0] in {"verifier", "trtguard", "policies"}]:
            del sys.modules[name]
    base = root or Path(__file__).resolve().parent.parent
    if (base / "trtguard" / "cli" / "verify_openpgp.py").exists():

        def quiet_cli(case: conformance.Case, folder: Path) -> bool:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                return conformance.trtguard_cli(case, folder)

        return "trtguard verify-openpgp", quiet_cli
    return "trtguard verify_detached", conformance.trtguard_library


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--root", type=Path, help="the checkout whose trtguard is compared (default: this one)"
    )
    args = parser.parse_args()
    label, trtguard = _trtguard(args.root)
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        home = scratch / "gnupg"
        home.mkdir(mode=0o700)
        start = time.perf_counter()
        cases = conformance.make_cases(GnuPG(home), scratch)
        made = time.perf_counter() - start
        mine = conformance.run_all(cases, trtguard, scratch / "trtguard")
        verdicts = {"expected": {case.name: case.valid for case in cases}}
        for name, (verify, available) in conformance.REFERENCES.items():
            if available():
                verdicts[name] = conformance.run_all(cases, verify, scratch / name)
            else:
                print(f"{name}: not installed")
    print(f"{len(cases)} cases made by gpg in {made:.1f} s; trtguard is {label} from {args.root or 'here'}")
    print(f"{'suite':<10}{'cases':>6}{'agree':>7}{'false accept':>14}{'false reject':>14}")
    tallies = {name: conformance.tally(cases, mine, other) for name, other in verdicts.items()}
    for name, result in tallies.items():
        print(
            f"{name:<10}{result.cases:>6}{result.agree:>7}"
            f"{len(result.false_accepts):>14}{len(result.false_rejects):>14}"
        )
    print("\nwhere trtguard and a suite differ (expected: the verdict the case carries):")
    expected = verdicts["expected"]
    for case in cases:
        differ = [n for n in verdicts if n != "expected" and verdicts[n][case.name] != mine[case.name]]
        if differ or mine[case.name] != expected[case.name]:
            verdict = "valid" if mine[case.name] else "invalid"
            wrong = "trtguard WRONG" if mine[case.name] != expected[case.name] else "trtguard right"
            others = ", ".join(differ)
            print(f"  {case.area}: {case.name}: trtguard {verdict} ({wrong}); differs from {others}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The layout contracts (issue 26, plan §6), checked over the AST of every shipped module.

Every import counts: top level, inside functions, under ``TYPE_CHECKING``, and the names of a front door's
``_HOMES`` table. Strict contracts allow no violation; ratchet contracts allow exactly the violations listed
in ``tests/contracts_known.py`` and fail both on a new one and on a listed one that no longer occurs.

Module names are written as dotted strings, so ``scripts/relocate.py`` rewrites them with every move.
Contracts not here yet: 2 (tiers inside a package: a :class:`~tests.support.contracts.Tiers` entry, added
by the stage that makes a package's rooms, S1 for the decision log), 11 (signature format folders, S10);
``tests/test_layout.py`` keeps the start-up probes (12) until the two files are folded. Contract 10 (the CLI
table) reads the table itself: each command's module is the front door of that command (contract 5).

Maintenance, from the repository root:

* ``.venv/bin/python -m tests.test_contracts --prune``: delete the known entries that no longer occur (what a
  stage does after it fixed them);
* ``.venv/bin/python -m tests.test_contracts --regenerate``: write the lists from the tree as it is (once
  after merging branches that added modules: read the diff, every added line is a new violation).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from scripts.layout_facts import PACKAGES, Project
from tests.contracts_known import KNOWN
from tests.support.contracts import (
    CommandTable,
    Contract,
    FrontDoors,
    LazyFrontDoors,
    Names,
    NoCycles,
    OnePublicModule,
    PackageOrder,
    Sizes,
    Wall,
    known_file,
    prune,
    ratchet,
)
from trtguard.cli._commands import COMMANDS

REPO = Path(__file__).resolve().parent.parent
KNOWN_FILE = REPO / "tests" / "contracts_known.py"

#: The base modules (plan §2.1 ``verifier.base``) and cryptography (``verifier.crypto``): today's modules, and
#: the front doors the stages give them (named before they exist, so that a wall holds through the move).
BASE = (
    "verifier.base",
    "verifier.base._cache",
    "verifier.base._deadline",
    "verifier.base._digests",
    "verifier.base._errors",
    "verifier.base._files",
    "verifier.base._references",
    "verifier.base._validation",
    "verifier.base._yamldoc",
)
CRYPTO = (
    "verifier.crypto",
    "verifier.crypto._der",
    "verifier.crypto._keyfile",
    "verifier.crypto._dsse",
    "verifier.crypto._intoto",
    "verifier.crypto._keys",
)

#: The contracts by key (a ratchet contract's key is also its key in ``KNOWN``).
CONTRACTS: dict[str, Contract] = {
    "package-order": PackageOrder(order=PACKAGES),
    "wall-policies-no-crypto": Wall(sources=("policies",), targets=(*CRYPTO, "verifier.signatures")),
    "wall-webhook-no-verification": Wall(
        sources=("webhook", "decisionlog"),
        targets=("verifier.verification", "verifier.signatures", "verifier.engine"),
    ),
    "wall-decisionlog-base-and-crypto": Wall(
        sources=("decisionlog", "decisionlog"), targets=("verifier",), unless_targets=(*BASE, *CRYPTO)
    ),
    "wall-engine-only-from-trtguard": Wall(
        sources=("verifier", "policies", "decisionlog", "webhook"),
        unless_sources=("verifier.engine",),
        targets=("verifier.engine",),
    ),
    "front-doors": FrontDoors(ratchet=True),
    "one-public-module": OnePublicModule(ratchet=True, commands=tuple(c.module for c in COMMANDS.values())),
    "no-cycles": NoCycles(ratchet=True),
    "lazy-front-doors": LazyFrontDoors(ratchet=True),
    "sizes": Sizes(),
    "names": Names(ratchet=True),
    "cli-table": CommandTable(room="trtguard.cli", commands={n: c.module for n, c in COMMANDS.items()}),
}


@pytest.fixture(scope="module")
def project() -> Project:
    return Project(REPO)


@pytest.mark.parametrize("key", sorted(CONTRACTS))
def test_contract(key: str, project: Project) -> None:
    contract = CONTRACTS[key]
    violations = contract.violations(project)
    label = f"contract {contract.number} ({contract.title}, {key})"
    if not contract.ratchet:
        assert not violations, f"{label}:\n" + "\n".join(sorted(violations))
        return
    verdict = ratchet(contract, violations, KNOWN.get(key, ()))
    assert not verdict.new, f"{label}: new violations (fix them; never add them to the list):\n" + "\n".join(
        verdict.new
    )
    assert not verdict.stale, (
        f"{label}: fixed, so delete their lines (python -m tests.test_contracts --prune):\n"
        + "\n".join(verdict.stale)
    )


def test_every_known_list_belongs_to_a_ratchet_contract() -> None:
    assert set(KNOWN) <= {key for key, contract in CONTRACTS.items() if contract.ratchet}


def main(argv: list[str] | None = None) -> int:
    """``--prune`` or ``--regenerate`` the known lists (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m tests.test_contracts")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--prune", action="store_true", help="delete the entries that no longer occur")
    action.add_argument("--regenerate", action="store_true", help="write the lists from the tree as it is")
    args = parser.parse_args(argv)
    project = Project(REPO)
    ratchets = {key: contract for key, contract in CONTRACTS.items() if contract.ratchet}
    current = {key: contract.violations(project) for key, contract in ratchets.items()}
    if args.regenerate:
        KNOWN_FILE.write_text(known_file(current))
        print(f"wrote {sum(map(len, current.values()))} entries to {KNOWN_FILE}")
        return 0
    stale = {
        entry
        for key, contract in ratchets.items()
        for entry in ratchet(contract, current[key], KNOWN.get(key, ())).stale
    }
    KNOWN_FILE.write_text(prune(KNOWN_FILE.read_text(), stale))
    print(f"deleted {len(stale)} entries from {KNOWN_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The rule contract (issue 26, step 3): one table holds every rule family once, and only it runs them.

The table is data (``policies._judging.RULES``); these tests read it, the rule modules and the evaluator's
source (its AST, as ``tests/test_contracts.py`` reads the tree), so a rule added beside the table, or called
by hand again, fails here rather than in a verdict.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import policies.rules
from policies._judging import RULES
from policies.rules import EngineFamily, ImageFamily, WorkloadFamily

REPO = Path(__file__).resolve().parents[2]
#: The modules that run the policies: the evaluator, and the one module that applies the rule table.
EVALUATOR = ("policies/evaluator.py", "policies/_judging.py")
RULE_KINDS = (WorkloadFamily, ImageFamily, EngineFamily)


def _rule_objects() -> dict[str, object]:
    """Every rule the modules of ``policies.rules`` define, by ``module.NAME``."""
    found: dict[str, object] = {}
    for info in pkgutil.iter_modules(policies.rules.__path__, "policies.rules."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, RULE_KINDS) and getattr(value.check, "__module__", None) == info.name:
                found[f"{info.name}.{name}"] = value
    return found


def _registered() -> list[object]:
    return [*RULES.workload, *RULES.images, *RULES.engines, *RULES.afterwards]


def test_every_rule_is_registered_exactly_once() -> None:
    defined = _rule_objects()
    registered = _registered()
    assert len({id(rule) for rule in registered}) == len(registered), "a rule registered twice"
    missing = sorted(name for name, rule in defined.items() if not any(rule is r for r in registered))
    assert not missing, f"rules defined but not in the table: {missing}"
    assert len(registered) == len(defined), "the table holds a rule no rule module defines"


def test_families_are_unique() -> None:
    families = RULES.families()
    assert len(set(families)) == len(families), families


def test_each_part_of_the_table_holds_its_kind_of_rule() -> None:
    assert all(isinstance(rule, WorkloadFamily) for rule in (*RULES.workload, *RULES.afterwards))
    assert all(isinstance(rule, ImageFamily) for rule in RULES.images)
    assert all(isinstance(rule, EngineFamily) for rule in RULES.engines)


def test_the_build_manifest_comes_first_among_engine_rules() -> None:
    # The rules over a manifest read the one it verified: before it, they would have none to judge.
    assert RULES.engines[0].name == "models.buildManifest"


def _imports(tree: ast.Module) -> list[str]:
    """Every module an import names, and for ``from a import b`` also ``a.b`` (``b`` may be a module)."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            names += [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    return names


@pytest.mark.parametrize("path", EVALUATOR)
def test_the_evaluator_imports_no_rule_module(path: str) -> None:
    modules = {info.name for info in pkgutil.iter_modules(policies.rules.__path__, "policies.rules.")}
    inside = [name for name in _imports(ast.parse((REPO / path).read_text())) if name in modules]
    assert not inside, f"{path} imports rule modules (the front door policies.rules only): {inside}"


def _rule_names() -> set[str]:
    """The names under which the front door ``policies.rules`` gives a rule."""
    # dir() of a lazy front door is its stub's names (mypy reads the stub, which has no __all__)
    return {name for name in dir(policies.rules) if isinstance(getattr(policies.rules, name), RULE_KINDS)}


def test_the_evaluator_names_no_rule() -> None:
    tree = ast.parse((REPO / EVALUATOR[0]).read_text())
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    used |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert not used & _rule_names(), "the evaluator names a rule: register it in policies._judging.RULES"
    assert "policies.rules" not in _imports(tree), "the evaluator applies rules through policies._judging"


def test_rules_are_named_only_in_the_table() -> None:
    """In ``policies._judging`` each rule is named once, inside the ``RULES`` assignment: it is run through
    the table, never called by hand."""
    tree = ast.parse((REPO / EVALUATOR[1]).read_text())
    names = _rule_names()
    [table] = [
        node
        for node in tree.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "RULES"
    ]
    in_table = [n.attr for n in ast.walk(table) if isinstance(n, ast.Attribute) and n.attr in names]
    assert sorted(in_table) == sorted(names), "each rule of policies.rules is named once in RULES"
    elsewhere = [
        n.attr if isinstance(n, ast.Attribute) else n.id
        for statement in tree.body
        if statement is not table
        for n in ast.walk(statement)
        if (isinstance(n, ast.Attribute) and n.attr in names) or (isinstance(n, ast.Name) and n.id in names)
    ]
    assert not elsewhere, f"rules named outside the table: {elsewhere}"


def test_the_architecture_page_lists_the_table_in_order() -> None:
    """docs/ARCHITECTURE.md's "rule contract" table names each family in the order the evaluator applies
    them."""
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    section = text.split("### The rule contract", 1)[1].split("\n#", 1)[0]
    listed = re.findall(r"^\| `([\w.]+)` \|", section, flags=re.M)
    assert tuple(listed) == RULES.families()

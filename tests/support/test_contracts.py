"""tests/support/contracts.py: each kind of contract on a small layout, the ratchet, the known file."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from scripts.layout_facts import Project
from tests.scripts.test_layout_facts import write_tree
from tests.support.contracts import (
    CommandTable,
    FrontDoors,
    LazyFrontDoors,
    Names,
    NoCycles,
    OnePublicModule,
    PackageOrder,
    Sizes,
    Tiers,
    Wall,
    known_file,
    prune,
    ratchet,
)

TREE = {
    "verifier/__init__.py": '"""Docstring only: a complete front door."""\n',
    "verifier/base/__init__.py": """\
        import importlib
        from typing import TYPE_CHECKING, Any

        if TYPE_CHECKING:
            from verifier.base._errors import Oops

        _HOMES: dict[str, str] = {"Oops": "verifier.base._errors", "Gone": "verifier.base._errors"}
        __all__ = ["Gone", "Oops"]


        def __getattr__(name: str) -> Any:
            return getattr(importlib.import_module(_HOMES[name]), name)
        """,
    "verifier/base/_errors.py": "class Oops(Exception):\n    pass\n",
    "verifier/crypto/__init__.py": "from verifier.crypto.keys import Key\n__all__ = ['Key']\n",
    "verifier/crypto/keys.py": "from verifier.base._errors import Oops\n\n\nclass Key:\n    pass\n",
    "verifier/verify.py": "from verifier.crypto import Key\nfrom verifier import crypto\n",
    "policies/__init__.py": "",
    "policies/toy_rules.py": "from verifier.crypto.keys import Key\nimport trtguard\n",
    "policies/_language.py": "from verifier.crypto import Key\n\n\nclass Oops:\n    pass\n",
    "trtguard/__init__.py": "",
    "trtguard/long.py": "x = 1\n" * 501,
    "trtguard/long_ok.py": '"""One module on purpose: a table."""\n' + "x = 1\n" * 501,
}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return Project(write_tree(tmp_path_factory.mktemp("layout"), TREE), ("trtguard", "policies", "verifier"))


def test_package_order(project: Project) -> None:
    assert PackageOrder(order=("trtguard", "policies", "verifier")).violations(project) == {
        "policies.toy_rules -> trtguard"
    }


def test_tiers(project: Project) -> None:
    tiers = Tiers(room="verifier", tiers=(("base",), ("crypto",)))
    assert tiers.violations(project) == set()
    upside_down = Tiers(room="verifier", tiers=(("crypto",), ("base",)))
    assert upside_down.violations(project) == {"verifier.crypto.keys -> verifier.base._errors"}


def test_walls_and_their_exceptions(project: Project) -> None:
    wall = Wall(sources=("policies",), targets=("verifier.crypto",), unless_sources=("policies._language",))
    assert wall.violations(project) == {"policies.toy_rules -> verifier.crypto.keys"}
    only = Wall(sources=("verifier.crypto",), targets=("verifier",), unless_targets=("verifier.crypto",))
    assert only.violations(project) == {"verifier.crypto.keys -> verifier.base._errors"}


def test_front_doors(project: Project) -> None:
    assert FrontDoors().violations(project) == {
        "policies.toy_rules -> verifier.crypto.keys",
        "verifier.crypto.keys -> verifier.base._errors",
    }


def test_one_public_module(project: Project) -> None:
    assert OnePublicModule().violations(project) == {
        "policies.toy_rules",
        "trtguard.long",
        "trtguard.long_ok",
        "verifier.crypto.keys",
        "verifier.verify",
    }


def test_a_command_module_is_the_front_door_of_its_command(project: Project) -> None:
    found = OnePublicModule(commands=("trtguard.long",)).violations(project)
    assert "trtguard.long" not in found and "trtguard.long_ok" in found


def test_the_command_table(project: Project) -> None:
    assert CommandTable(room="trtguard", commands={"long": "trtguard.long"}).violations(project) == {
        "trtguard.long_ok: public, and no command's module",
    }
    table = {"long-ok": "trtguard.long", "gone": "trtguard.gone"}
    assert CommandTable(room="trtguard", commands=table).violations(project) == {
        "long-ok: in trtguard.long, not trtguard.long_ok",
        "gone: no module trtguard.gone",
        "trtguard.long_ok: public, and no command's module",
    }


def test_no_cycles_and_no_import_of_the_own_front_door(tmp_path: Path) -> None:
    cyclic = Project(
        write_tree(
            tmp_path,
            {
                "verifier/__init__.py": "",
                "verifier/a.py": "from verifier.b import x\n",
                "verifier/b.py": "def f():\n    from verifier.a import y\n",
                "verifier/c.py": "from verifier import a, name\n",
                "verifier/d.py": "from verifier import a\n",  # a submodule only: not the front door
            },
        ),
        ("verifier",),
    )
    contract = NoCycles()
    assert contract.violations(cyclic) == {
        "verifier.a <-> verifier.b",
        "verifier.c -> verifier (its own package)",
    }
    # a move that renames a member changes the sort order: a listed cycle still matches
    assert contract.normalize("verifier.b <-> verifier.a") == "verifier.a <-> verifier.b"


def test_lazy_front_doors(project: Project) -> None:
    assert LazyFrontDoors().violations(project) == {
        "verifier.crypto: loads project modules at import",
        "verifier.crypto: __all__ is not its _HOMES names",
        "verifier.base.Gone does not resolve",
    }


#: Front doors of the stub form (lazy_loader.attach_stub beside an ``__init__.pyi``), each breaking a rule.
ATTACH = "import lazy_loader\n\n__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)\n"
STUBS = {
    "verifier/__init__.py": '"""Docstring only."""\n',
    "verifier/base/__init__.py": '"""Lazy, as it should be."""\n\n' + ATTACH,
    "verifier/base/__init__.pyi": "from ._errors import Gone as Gone, Oops as Oops\n",
    "verifier/base/_errors.py": "class Oops(Exception):\n    pass\n",
    "verifier/crypto/__init__.py": ATTACH + "EXTRA = 1\n",
    "verifier/crypto/__init__.pyi": "from verifier.crypto._keys import Key\nfrom ._keys import Key as K\n",
    "verifier/crypto/_keys.py": "class Key:\n    pass\n",
    "verifier/scans/__init__.py": ATTACH,
    "verifier/order/__init__.py": ATTACH,
    "verifier/order/__init__.pyi": "from ._b import b as b\nfrom ._a import zeta as zeta, Alpha as Alpha\n",
    "verifier/order/_a.py": "zeta = 1\n\n\nclass Alpha:\n    pass\n",
    "verifier/order/_b.py": "b = 2\n",
}


def test_lazy_front_doors_with_a_stub(tmp_path: Path) -> None:
    project = Project(write_tree(tmp_path, STUBS), ("verifier",))
    errors = "verifier.base._errors"
    assert project.homes("verifier.base") == {"Gone": errors, "Oops": errors}
    # the stub's modules are edges as _HOMES's were: lazy ones, and what mypy reads (TYPE_CHECKING)
    edges = {(e.target, e.type_checking, e.lazy) for e in project.edges if e.source == "verifier.base"}
    assert edges == {(errors, True, False), (errors, False, True)}
    assert LazyFrontDoors().violations(project) == {
        "verifier.base.Gone does not resolve",
        "verifier.crypto: stub line 1 is not `from .m import A as A, …`",
        "verifier.crypto: stub line 2 is not `from .m import A as A, …`",
        "verifier.crypto: its __init__.py does more than lazy_loader.attach_stub",
        "verifier.crypto does not import",
        "verifier.scans: lazy_loader.attach_stub without a stub beside it",
        "verifier.order: stub line 2: the names are not in ruff's order, or repeat",
        "verifier.order: stub: the modules are not in order, or one repeats",
    }


def test_sizes(project: Project) -> None:
    assert Sizes().violations(project) == {"trtguard.long: 501 lines"}


def test_names(project: Project) -> None:
    contract = Names()
    assert contract.violations(project) == {
        "verifier.verify: a module named 'verify'",
        "class Oops in policies._language, verifier.base._errors",
    }
    moved = "class Oops in verifier.base._errors, policies._language"
    assert contract.normalize(moved) == "class Oops in policies._language, verifier.base._errors"


def test_the_ratchet_fails_on_a_new_violation_and_on_a_fixed_one_still_listed() -> None:
    contract = NoCycles()
    verdict = ratchet(contract, {"a <-> b", "c -> d (its own package)"}, ["b <-> a", "e <-> f"])
    assert verdict.new == ["c -> d (its own package)"]
    assert verdict.stale == ["e <-> f"]
    assert ratchet(contract, {"a <-> b"}, ["b <-> a"]) == ratchet(contract, set(), [])


def test_the_known_file_is_python_and_prunes_line_by_line() -> None:
    text = known_file({"front-doors": ["b -> c", "a -> b"], "names": []})
    tree = ast.parse(text)
    namespace: dict[str, object] = {}
    exec(compile(tree, "contracts_known.py", "exec"), namespace)  # noqa: S102 - the file just written
    assert namespace["KNOWN"] == {"front-doors": ("a -> b", "b -> c"), "names": ()}
    pruned = prune(text, {"a -> b"})
    assert pruned == text.replace('        "a -> b",\n', "")
    exec(compile(pruned, "contracts_known.py", "exec"), namespace)  # noqa: S102
    assert namespace["KNOWN"] == {"front-doors": ("b -> c",), "names": ()}

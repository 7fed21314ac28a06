"""scripts/layout_facts.py: modules public and private, the import graph in its three forms, cycles."""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scripts.layout_facts import Project, is_private, main, module_counts, strongly_connected, unused_outside

REPO = Path(__file__).resolve().parents[2]


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(textwrap.dedent(text))
    return root


#: A small layout with one cycle of each kind: through a function, at import time, under TYPE_CHECKING.
TREE = {
    "verifier/__init__.py": '"""The verifier."""\n',
    "verifier/a.py": "from verifier.b import x\n",
    "verifier/b.py": "x = 1\n\n\ndef f():\n    from verifier import a\n",
    "verifier/_c.py": "import verifier.sub\n",
    "verifier/sub/__init__.py": """\
        from typing import TYPE_CHECKING

        if TYPE_CHECKING:
            from verifier.sub.impl import Y

        _HOMES: dict[str, str] = {**dict.fromkeys(("Y", "Z"), "verifier.sub.impl"), "W": "verifier.sub._w"}
        """,
    "verifier/sub/impl.py": """\
        from typing import TYPE_CHECKING

        if TYPE_CHECKING:
            from verifier.sub import Y
        else:
            import verifier.a
        """,
    "verifier/sub/_w.py": "",
    "policies/__init__.py": "",
    "policies/x.py": "from . import y\n",
    "policies/y.py": "from policies.x import z\nimport verifier.sub\n",
    "not-a-module/skip.py": "",
}


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(write_tree(tmp_path, TREE))


def test_modules_and_privacy(project: Project) -> None:
    assert sorted(project.modules) == [
        "policies",
        "policies.x",
        "policies.y",
        "verifier",
        "verifier._c",
        "verifier.a",
        "verifier.b",
        "verifier.sub",
        "verifier.sub._w",
        "verifier.sub.impl",
    ]
    assert is_private("verifier._c") and is_private("verifier.sub._w")
    assert not is_private("trtguard.__main__") and not is_private("verifier.sub")
    assert module_counts(project) == {
        "policies": (3, 0),
        "verifier": (5, 2),
        "verifier.sub": (2, 1),
    }
    # policies.y imports verifier.sub (and verifier.a only through it)
    assert unused_outside(project) == {"policies": (3, 3), "verifier": (5, 4)}


def test_edges_resolve_relative_imports_and_name_submodules(project: Project) -> None:
    graph = project.graph()
    # `from package import submodule` runs the submodule only: no edge to the package, which any import
    # below it loads first
    assert graph["policies.x"] == {"policies.y"}  # `from . import y`
    assert graph["verifier.b"] == {"verifier.a"}  # `from verifier import a`, in a function
    assert graph["verifier.sub.impl"] == {"verifier.a"}  # the else of TYPE_CHECKING runs
    assert project.graph(type_checking=True)["verifier.sub.impl"] == {"verifier.a", "verifier.sub"}
    assert project.graph(homes=True)["verifier.sub"] == {"verifier.sub._w", "verifier.sub.impl"}
    assert project.graph(homes=True, top_only=True)["verifier.sub"] == set()


def test_the_three_graphs_have_their_own_cycles(project: Project) -> None:
    assert strongly_connected(project.graph()) == [["policies.x", "policies.y"], ["verifier.a", "verifier.b"]]
    assert strongly_connected(project.graph(top_only=True)) == [["policies.x", "policies.y"]]
    assert strongly_connected(project.graph(type_checking=True)) == [
        ["policies.x", "policies.y"],
        ["verifier.a", "verifier.b"],
        ["verifier.sub", "verifier.sub.impl"],
    ]


def test_the_report_prints_every_figure(project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--root", str(project.root)]) == 0
    out = capsys.readouterr().out
    assert "modules 10: public 8, private 2 (20 % private)" in out
    assert "cycles (every import): 2\n    policies.x <-> policies.y\n    verifier.a <-> verifier.b" in out
    assert "cycles (import time only): 1" in out
    assert "cycles (with TYPE_CHECKING): 3" in out
    assert "folder tangles: 1\n    verifier <-> verifier.sub" in out
    assert "policies: 3 public modules, 3 used by no shipped module outside policies" in out


def test_no_package_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--root", str(tmp_path)]) == 2
    assert "no package" in capsys.readouterr().err


def test_the_real_tree_reads_and_every_edge_is_between_its_modules() -> None:
    project = Project(REPO)
    assert {"verifier", "policies", "webhook", "trtguard"} <= set(project.packages)
    assert all(e.source in project.modules and e.target in project.modules for e in project.edges)


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=30))
def test_cycles_are_the_groups_of_mutually_reachable_nodes(pairs: list[tuple[int, int]]) -> None:
    graph: dict[str, set[str]] = {str(n): set() for n in range(8)}
    for a, b in pairs:
        graph[str(a)].add(str(b))
    reach = {node: _reachable(graph, node) for node in graph}
    groups = {frozenset(m for m in graph if m == n or (m in reach[n] and n in reach[m])) for n in graph}
    expected = sorted(sorted(g) for g in groups if len(g) > 1)
    assert strongly_connected(graph) == expected


def test_a_long_chain_needs_no_recursion() -> None:
    graph = {str(n): {str(n + 1)} for n in range(20_000)} | {"20000": {"0"}}
    (cycle,) = strongly_connected(graph)
    assert len(cycle) == 20_001
    assert list(itertools.islice(cycle, 2)) == ["0", "1"]

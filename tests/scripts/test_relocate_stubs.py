"""scripts/relocate.py over front doors of the stub form (``__init__.pyi`` read by lazy_loader.attach_stub).

A small project with two stub doors, one re-exporting a name of the other through a ``_from_*`` module: a
move behind a door rewrites its stub, a move to another package moves the name to the door the mapping
names (and the imports through the old door follow), a rename reaches the stubs, an old-form door becomes a
stub door, and ``--check`` finds stale stub lines. Each project then passes its tests and ruff.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from scripts.relocate import main
from tests.scripts.test_relocate import REPO, check_project, git, run

DOOR = (
    '"""{doc}"""\n\nimport lazy_loader\n\n'
    "__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)\n"
)

FILES = {
    "pkg/__init__.py": '"""A small package."""\n',
    "pkg/crypto/__init__.py": DOOR.format(doc="Keys and DER."),
    "pkg/crypto/__init__.pyi": (
        "from ._der import der_header as der_header\n"
        "from ._keys import KeyRing as KeyRing, PublicKey as PublicKey\n"
    ),
    "pkg/crypto/_der.py": (
        '"""DER."""\n\n\ndef der_header() -> bytes:\n    """A header."""\n    return b"0"\n'
    ),
    "pkg/crypto/_keys.py": (
        '"""Keys."""\n\n\nclass KeyRing:\n    """Keys."""\n\n\nclass PublicKey:\n    """A key."""\n'
    ),
    "pkg/sig/__init__.py": DOOR.format(doc="Signatures."),
    "pkg/sig/__init__.pyi": (
        "from ._from_crypto_keys import PublicKey as PublicKey\nfrom ._trust import TrustRoot as TrustRoot\n"
    ),
    "pkg/sig/_from_crypto_keys.py": (
        '"""Names of ``pkg.crypto`` (its ``_keys``) for this room\'s stub."""\n\n'
        'from pkg.crypto import PublicKey\n\n__all__ = [\n    "PublicKey",\n]\n'
    ),
    "pkg/sig/_trust.py": '"""Trust."""\n\n\nclass TrustRoot:\n    """A root."""\n',
    "app/__init__.py": "",
    "app/main.py": '''\
        """The app."""

        from __future__ import annotations

        from pkg.crypto import PublicKey, der_header
        from pkg.sig import PublicKey as SignedKey
        from pkg.sig import TrustRoot


        def use() -> tuple[object, ...]:
            """Everything the doors give."""
            return PublicKey, der_header(), SignedKey, TrustRoot
        ''',
    "tests/__init__.py": "",
    "tests/test_app.py": '''\
        """app/main.py."""

        from __future__ import annotations

        from app.main import use


        def test_use() -> None:
            assert len(use()) == 4
        ''',
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    for path, text in FILES.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(textwrap.dedent(text))
    (tmp_path / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text())
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "before")
    return tmp_path


def relocate(repo: Path, capsys: pytest.CaptureFixture[str], mapping: str, *args: str) -> tuple[int, str]:
    (repo / "moves.toml").write_text(mapping)
    status = main([str(repo / "moves.toml"), "--root", str(repo), *args])
    return status, capsys.readouterr().out


def read(repo: Path, path: str) -> str:
    return (repo / path).read_text()


def test_the_small_project_is_clean_before(repo: Path) -> None:
    check_project(repo)


def test_a_module_moved_behind_a_door_is_a_line_of_its_stub(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mapping = '[[move]]\nold = "pkg.crypto._der"\nnew = "pkg.crypto._der_header"\nfront = "pkg.crypto"\n'
    status, out = relocate(repo, capsys, mapping)
    assert status == 0, out
    assert read(repo, "pkg/crypto/__init__.pyi") == (
        "from ._der_header import der_header as der_header\n"
        "from ._keys import KeyRing as KeyRing, PublicKey as PublicKey\n"
    )
    assert read(repo, "pkg/crypto/__init__.py") == DOOR.format(doc="Keys and DER.")
    assert "from pkg.crypto import PublicKey, der_header\n" in read(repo, "app/main.py")  # still the door
    check_project(repo)
    assert relocate(repo, capsys, mapping, "--check") == (0, "")


def test_a_module_moved_to_another_package_takes_its_names_to_the_door_the_mapping_names(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mapping = '[[move]]\nold = "pkg.sig._trust"\nnew = "pkg.crypto._trust"\nfront = "pkg.crypto"\n'
    status, out = relocate(repo, capsys, mapping)
    assert status == 1, out  # the door that lost a name says so
    assert "pkg/sig/__init__.pyi: no longer exports TrustRoot" in out
    assert read(repo, "pkg/sig/__init__.pyi") == "from ._from_crypto_keys import PublicKey as PublicKey\n"
    assert read(repo, "pkg/crypto/__init__.pyi") == (
        "from ._der import der_header as der_header\n"
        "from ._keys import KeyRing as KeyRing, PublicKey as PublicKey\n"
        "from ._trust import TrustRoot as TrustRoot\n"
    )
    main_py = read(repo, "app/main.py")
    assert "from pkg.crypto import PublicKey, TrustRoot, der_header\n" in main_py
    assert "from pkg.sig import PublicKey as SignedKey\n" in main_py
    check_project(repo)


def test_a_module_moved_to_a_new_door_takes_its_names_there(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mapping = (
        '[[front]]\nmodule = "pkg.trust"\ndoc = "Trust."\n\n'
        '[[move]]\nold = "pkg.sig._trust"\nnew = "pkg.trust._root"\nfront = "pkg.trust"\n'
    )
    relocate(repo, capsys, mapping)
    assert read(repo, "pkg/trust/__init__.py") == DOOR.format(doc="Trust.")
    assert read(repo, "pkg/trust/__init__.pyi") == "from ._root import TrustRoot as TrustRoot\n"
    assert "from pkg.trust import TrustRoot\n" in read(repo, "app/main.py")
    check_project(repo)


def test_a_module_moved_to_another_package_without_a_door_is_imported_itself(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mapping = '[[move]]\nold = "pkg.sig._trust"\nnew = "pkg.crypto._trust"\n'
    relocate(repo, capsys, mapping)
    assert "TrustRoot" not in read(repo, "pkg/sig/__init__.pyi")
    assert "TrustRoot" not in read(repo, "pkg/crypto/__init__.pyi")
    assert "from pkg.crypto._trust import TrustRoot\n" in read(repo, "app/main.py")
    check_project(repo)


def test_a_rename_behind_doors_reaches_every_stub_and_re_export(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mapping = '[[rename]]\nmodule = "pkg.crypto._keys"\nold = "PublicKey"\nnew = "AnyKey"\n'
    status, out = relocate(repo, capsys, mapping)
    assert status == 0, out
    assert read(repo, "pkg/crypto/__init__.pyi") == (  # and in ruff's order
        "from ._der import der_header as der_header\n"
        "from ._keys import AnyKey as AnyKey, KeyRing as KeyRing\n"
    )
    assert read(repo, "pkg/sig/__init__.pyi").startswith("from ._from_crypto_keys import AnyKey as AnyKey\n")
    assert "from pkg.crypto import AnyKey\n" in read(repo, "pkg/sig/_from_crypto_keys.py")
    main_py = read(repo, "app/main.py")
    assert "from pkg.crypto import AnyKey, der_header\n" in main_py
    assert "from pkg.sig import AnyKey as SignedKey\n" in main_py
    check_project(repo)


def test_an_old_form_door_becomes_a_stub_door_with_a_from_module_for_another_room(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "pkg" / "old").mkdir()
    (repo / "pkg" / "old" / "__init__.py").write_text(
        '"""An old door."""\n\nfrom __future__ import annotations\n\nimport importlib\n'
        "from typing import TYPE_CHECKING, Any\n\nif TYPE_CHECKING:\n"
        "    from pkg.crypto._der import der_header\n    from pkg.old._impl import helper\n\n"
        '_HOMES: dict[str, str] = {"der_header": "pkg.crypto._der", "helper": "pkg.old._impl"}\n'
        '__all__ = ["der_header", "helper"]\n\n\ndef __getattr__(name: str) -> Any:\n'
        "    return getattr(importlib.import_module(_HOMES[name]), name)\n"
    )
    (repo / "pkg" / "old" / "_impl.py").write_text(
        '"""Help."""\n\n\ndef helper() -> int:\n    """One."""\n    return 1\n'
    )
    (repo / "app" / "old.py").write_text(
        '"""Uses the old door."""\n\nfrom pkg.old import der_header, helper\n\nBOTH = (der_header, helper)\n'
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "old door")
    status, out = relocate(repo, capsys, '[[front]]\nmodule = "pkg.old"\ndoc = "An old door."\n')
    assert status == 0, out
    assert read(repo, "pkg/old/__init__.py") == DOOR.format(doc="An old door.")
    assert read(repo, "pkg/old/__init__.pyi") == (
        "from ._from_crypto_der import der_header as der_header\nfrom ._impl import helper as helper\n"
    )
    assert "from pkg.crypto import der_header\n" in read(repo, "pkg/old/_from_crypto_der.py")
    probe = "import sys, pkg.old; assert 'pkg.crypto._der' not in sys.modules; print(pkg.old.der_header())"
    assert run(repo, sys.executable, "-c", probe).stdout == "b'0'\n"
    check_project(repo)


def test_a_docstring_only_door_that_names_nothing_stays_as_it_is(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert relocate(repo, capsys, '[[front]]\nmodule = "pkg"\ndoc = "A small package."\n')[0] == 0
    assert git(repo, "status", "--porcelain") == "?? moves.toml\n"


def test_the_check_finds_stale_stub_lines(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    git(repo, "mv", "pkg/crypto/_der.py", "pkg/crypto/_der_header.py")  # moved by hand: the stub is stale
    (repo / "pkg" / "sig" / "__init__.pyi").write_text(
        "from ._from_crypto_keys import PublicKey as PublicKey\nfrom ._trust import Gone as Gone\n"
    )
    mapping = '[[move]]\nold = "pkg.crypto._der"\nnew = "pkg.crypto._der_header"\n'
    status, out = relocate(repo, capsys, mapping, "--check")
    assert status == 1
    assert "  pkg/crypto/__init__.pyi:1: ._der (no module pkg.crypto._der)" in out
    assert "  pkg/sig/__init__.pyi:2: Gone (not in pkg.sig._trust)" in out

"""The layout of docs/ARCHITECTURE.md, enforced: import directions, private modules, lazy commands, sizes.

``trtguard → webhook → decisionlog → policies → verifier``: a package imports only packages to its right.
A module whose name starts with ``_`` is private to the package that holds it. The command line loads only
the command being run. A module longer than :data:`MAX_LINES` says at its top why it is one module.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
#: Each package and the packages it may import.
ALLOWED = {
    "verifier": {"verifier"},
    "policies": {"policies", "verifier"},
    "decisionlog": {"decisionlog", "policies", "verifier"},
    "webhook": {"webhook", "decisionlog", "policies", "verifier"},
    "trtguard": {"trtguard", "webhook", "decisionlog", "policies", "verifier"},
}
MAX_LINES = 500
#: What a module over MAX_LINES must carry near its top, followed by the reason.
SIZE_NOTE = "One module on purpose:"


def _modules() -> dict[str, Path]:
    found = {}
    for package in ALLOWED:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """Every project module ``path`` imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name in MODULES}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_one_way(module: str) -> None:
    package = module.split(".", maxsplit=1)[0]
    wrong = sorted(name for name in _imports(MODULES[module]) if name.split(".")[0] not in ALLOWED[package])
    assert not wrong, f"{module} ({package}) may import only {sorted(ALLOWED[package])}, not {wrong}"


#: The cryptography: what verifies a signature. Only verifier.verification (and the formats below it) may use
#: it on behalf of policies, which keeps the caches and asks (issue 26).
CRYPTO = (
    "verifier.crypto._dsse",
    "verifier.crypto._intoto",
    "verifier.crypto._keys",
    "verifier.crypto._der",
    "verifier.crypto._keyfile",
)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.split(".")[0] == "policies"))
def test_policies_import_no_cryptography(module: str) -> None:
    crypto = sorted(
        name
        for name in _imports(MODULES[module])
        if name in CRYPTO or name == "verifier.signatures" or name.startswith("verifier.signatures.")
    )
    assert not crypto, f"{module} imports {crypto}: ask verifier.verification for verified facts"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_private_modules_stay_in_their_package(module: str) -> None:
    for name in _imports(MODULES[module]):
        parts = name.split(".")
        for depth, part in enumerate(parts):
            if part.startswith("_") and not part.startswith("__"):
                owner = ".".join(parts[:depth])
                assert module == owner or module.startswith(owner + "."), (
                    f"{module} imports {name}, which is private to {owner}"
                )
                break


@pytest.mark.parametrize("module", sorted(MODULES))
def test_long_modules_say_why(module: str) -> None:
    text = MODULES[module].read_text()
    lines = text.count("\n")
    if lines > MAX_LINES:
        head = "\n".join(text.splitlines()[:40])
        assert SIZE_NOTE in head, f"{module} has {lines} lines: split it, or say why near its top"


def test_help_and_a_small_command_load_only_what_they_use() -> None:
    probe = (
        "import sys\n"
        "from trtguard.cli import build_parser\n"
        "build_parser(None)\n"
        "help_only = {m for m in sys.modules if m.split('.')[0] in ('policies', 'webhook', 'verifier')}\n"
        "build_parser('schema')\n"
        "print(sorted(help_only))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'webhook' or m.startswith('httpx')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO
    )
    help_modules, schema_modules = result.stdout.splitlines()
    assert help_modules == "['verifier', 'verifier.base', 'verifier.base._errors']"
    assert schema_modules == "[]", "`trtguard schema` needs neither the server nor the registry client"


@pytest.mark.parametrize("command", ["keygen", "attest", "verify-attestation"])
def test_key_commands_parse_without_cryptography(command: str) -> None:
    # `trtguard keygen --help` builds this parser: it stays as light as `trtguard --help` (issue 15).
    probe = (
        "import sys\n"
        "from trtguard.cli import build_parser\n"
        f"build_parser({command!r})\n"
        "heavy = ('cryptography', 'httpx', 'pydantic', 'policies', 'webhook')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m.startswith('verifier.')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert result.stdout.strip() == "['verifier.base', 'verifier.base._errors']"


def test_an_offline_check_loads_no_registry_client() -> None:
    probe = (
        "import sys\n"
        "from trtguard.cli import build_parser\n"
        "build_parser('check')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'httpx' or 'xml.etree' in m))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert result.stdout.strip() == "[]", "the registry client and the XML writer load when they are used"


#: Loaded by an offline ``check`` whose policies trust only public keys: each signature format's verifier,
#: the registry code and the scan readers load when a signature, registry or scan of theirs is met (issue 15).
OFFLINE_CHECK_SKIPS = (
    "cbor2",
    "jwcrypto",
    "pysequoia",
    "rfc3161_client",
    "nacl",
    "httpx",
    "cryptography.x509",
    "verifier.registry.config",
    "verifier.registry.evidence",
    "verifier.signatures._bundle",
    "verifier.signatures._classic",
    "verifier.signatures.notation",
    "verifier.signatures._verify",
    "verifier.scans._cyclonedx",
)


def test_an_offline_check_with_key_signers_loads_no_other_verifier() -> None:
    library = REPO / "policies" / "library"
    pod = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: small, namespace: prod}\n"
        "spec: {containers: [{name: server, image: 'nvcr.io/nvidia/tensorrt@sha256:" + "0" * 64 + "'}]}\n"
    )
    probe = (
        "import sys\n"
        "from trtguard.cli import main\n"
        f"status = main(['check', '--policies', {str(library)!r}, '--policies', "
        f"{str(library / 'tests' / 'keys.yaml')!r}, '-'])\n"
        f"print(status, sorted(m for m in {OFFLINE_CHECK_SKIPS!r} if m in sys.modules), file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], input=pod, capture_output=True, text=True, check=True, cwd=REPO
    )
    assert "DENY   Pod prod/small" in result.stdout  # it judged the Pod (no signature in an empty folder)
    assert result.stderr.strip() == "1 []"


#: The modules that judge a workload: they reach pod templates through the workload model
#: (policies.workload_model._pods: Workload.templates, readers, templates_of) and nothing else (issue 24).
JUDGING = sorted(
    m for m in MODULES if m.startswith("policies.rules.") or m in ("policies.evaluator", "policies.engines")
)
#: Keys of a raw pod spec or template: a judging module that looks one up reads the object itself.
POD_KEYS = frozenset(
    {"spec", "template", "containers", "initContainers", "ephemeralContainers", "volumes", "volumeMounts"}
    | {"nodeSelector", "affinity", "image"}
)
#: Workload attributes that are the raw object or a path into it, and ImageUse.container (a name, which
#: repeats across templates: containers are told apart by path).
RAW_ATTRIBUTES = frozenset({"obj", "pod_spec_path", "spec_paths", "container"})
#: Where a judging module may read the raw object anyway, and why: CEL's `workload` variable is the object
#: as admitted, change detection compares objects, the decision record names each image's container.
RAW_READERS = {
    ("policies.evaluation._state", "between"),
    ("policies.evaluation._state", "cel_workload"),
    ("policies.evaluation._state", "image_records"),
}
#: What reads pod templates: only extraction (policies.workload_model._extraction, through these) may import
# them.
TEMPLATE_READERS = frozenset(
    {
        "policies.workload_model._templates",
        "policies.workload_model._discovery",
        "policies.workload_model._podspec.PodSpecReader",
        "policies.workload_model._sharing",
    }
    | {"policies.workload_model._scheduling.read_node_selection", "policies.workload_model._paths"}
)


def _functions(tree: ast.AST) -> dict[ast.AST, str]:
    """Every node of ``tree`` → the name of the function it is in ("" at module level)."""
    owner: dict[ast.AST, str] = {}

    def visit(node: ast.AST, name: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else name
            owner[child] = inner
            visit(child, inner)

    visit(tree, "")
    return owner


def _raw_reads(module: str) -> list[str]:
    tree = ast.parse(MODULES[module].read_text())
    owner = _functions(tree)
    found = []
    for node in ast.walk(tree):
        where = f"{module}:{getattr(node, 'lineno', '?')}"
        allowed = (module, owner.get(node, "")) in RAW_READERS
        if isinstance(node, ast.Attribute) and node.attr in RAW_ATTRIBUTES and not allowed:
            found.append(f"{where} reads .{node.attr}")
        key: ast.expr | None = None
        if isinstance(node, ast.Subscript):
            key = node.slice
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            key = node.args[0] if node.args else None
        if isinstance(key, ast.Constant) and key.value in POD_KEYS:
            found.append(f"{where} looks up {key.value!r}")
    return found


@pytest.mark.parametrize("module", JUDGING)
def test_rules_reach_pod_templates_only_through_the_workload_model(module: str) -> None:
    assert not _raw_reads(module), (
        "judge the workload's templates (policies.workload_model._pods), not the object"
    )
    readers = sorted(name for name in _imports(MODULES[module]) if name in TEMPLATE_READERS)
    assert not readers, f"{module} imports {readers}: only extraction reads pod templates"


def test_the_layout_check_sees_a_rule_that_reads_the_object(tmp_path: Path) -> None:
    # What the check above must refuse: GPU fit as it was before issue 24, reading the first template.
    source = (
        "def nodes(run):\n"
        "    spec = run.context.obj['spec']['template']['spec']\n"
        "    return spec.get('nodeSelector'), run.context.pod_spec_path\n"
    )
    MODULES["policies.rules._probe"] = path = tmp_path / "probe.py"
    path.write_text(source)
    try:
        assert len(_raw_reads("policies.rules._probe")) == 6
    finally:
        del MODULES["policies.rules._probe"]

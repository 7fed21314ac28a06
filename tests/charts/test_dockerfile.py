"""The webhook image's Dockerfile, checked without a container engine: inputs, pins, user, hashes."""

from __future__ import annotations

import re
import shlex
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import PurePosixPath

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.charts.helm_chart import REPO

DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
RUNTIME_LOCK = REPO / "requirements" / "runtime.lock"
#: python:3.11-slim-bookworm by digest: the only base image the Dockerfile may use.
BASE = re.compile(r"^python:3\.11-slim-bookworm@sha256:[0-9a-f]{64}$")
#: The environment the image runs in, for evaluating dependency markers.
IMAGE_ENVIRONMENT: dict[str, str] = {
    **{key: str(value) for key, value in default_environment().items()},
    "python_version": "3.11",
    "python_full_version": "3.11.0",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "os_name": "posix",
    "platform_machine": "x86_64",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}


@dataclass(frozen=True)
class Instruction:
    keyword: str
    arguments: str


def instructions() -> list[Instruction]:
    """The Dockerfile's instructions, continuation lines joined and comments dropped."""
    joined: list[Instruction] = []
    pending = ""
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        text = pending + stripped
        pending = ""
        keyword, _, arguments = text.partition(" ")
        joined.append(Instruction(keyword.upper(), arguments.strip()))
    assert not pending, "the Dockerfile ends inside a continued line"
    return joined


def of(keyword: str) -> list[str]:
    return [i.arguments for i in instructions() if i.keyword == keyword]


def context_excludes(path: str) -> bool:
    """Whether .dockerignore keeps ``path`` out of the build context (Docker's rules: last match wins)."""
    excluded = False
    for raw in DOCKERIGNORE.read_text(encoding="utf-8").splitlines():
        pattern = raw.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negated = pattern.startswith("!")
        pattern = pattern.removeprefix("!").strip("/")
        candidates = [
            str(PurePosixPath(*PurePosixPath(path).parts[:n]))
            for n in range(1, len(PurePosixPath(path).parts) + 1)
        ]
        if any(_docker_match(pattern, candidate) for candidate in candidates):
            excluded = not negated
    return excluded


def _docker_match(pattern: str, path: str) -> bool:
    # Go's filepath.Match: '*' and '?' stay within one path component; '**' spans components.
    regex = re.escape(pattern).replace(r"\*\*", "\0").replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
    return re.fullmatch(regex.replace("\0", ".*"), path) is not None


def copy_sources() -> list[str]:
    """The build-context paths of every COPY (not COPY --from=stage)."""
    sources: list[str] = []
    for arguments in of("COPY"):
        words = shlex.split(arguments)
        if any(word.startswith("--from=") for word in words):
            continue
        words = [word for word in words if not word.startswith("--")]
        sources += words[:-1]
    return sources


def test_base_images_are_pinned_by_digest() -> None:
    stages = of("FROM")
    assert len(stages) == 2, "a build stage and a runtime stage"
    images = {stage.split()[0] for stage in stages}
    assert len(images) == 1, f"both stages share one base image: {images}"
    (image,) = images
    assert BASE.match(image), image
    assert not of("ARG"), "no build argument may replace the pinned base image"


@pytest.mark.parametrize("source", copy_sources())
def test_every_copied_path_exists_and_is_in_the_build_context(source: str) -> None:
    path = REPO / source
    assert path.exists(), f"COPY {source}: no such file in the repository"
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    shipped = [f for f in files if not context_excludes(str(f.relative_to(REPO)))]
    assert shipped, f"COPY {source}: .dockerignore keeps all of it out of the build context"


def test_build_context_keeps_test_keys_and_local_state_out() -> None:
    assert context_excludes("policies/library/tests/keys.yaml")
    assert context_excludes(".venv/bin/python")
    assert context_excludes("tests/conftest.py")
    assert context_excludes(".tools/helm")
    assert context_excludes("webhook/__pycache__/settings.cpython-311.pyc")
    assert not context_excludes("webhook/_settings.py")
    assert not context_excludes("policies/library/signed-images.yaml")


def test_runs_as_a_numeric_non_root_user() -> None:
    users = of("USER")
    assert users, "no USER: the image would run as root"
    user, _, group = users[-1].partition(":")
    assert user.isdigit() and int(user) != 0, users[-1]
    assert group.isdigit() and int(group) != 0, users[-1]
    assert int(user) == 65532  # the chart's default runAsUser


def test_pip_installs_only_hash_checked_wheels_without_resolving() -> None:
    installs = [run for run in of("RUN") for part in run.split("&&") if "pip install" in part]
    commands = [part.strip() for run in installs for part in run.split("&&") if "pip install" in part]
    assert commands
    for command in commands:
        assert "--no-deps" in command, command
        if " -r " in command:
            assert "--require-hashes" in command, command
            assert "--only-binary=:all:" in command, command
        else:
            # Only the project's own wheel, built in the same stage, goes in without a lock.
            assert command.endswith("/dist/trtguard-*.whl"), command
    assert any("requirements/runtime.lock" in command for command in commands)


def test_project_is_built_without_fetching_a_build_backend() -> None:
    wheel = [part for run in of("RUN") for part in run.split("&&") if "pip wheel" in part]
    assert wheel and all("--no-build-isolation" in part and "--no-deps" in part for part in wheel)


def test_entrypoint_and_port_match_the_chart() -> None:
    assert of("ENTRYPOINT") == ['["trtguard"]']
    assert of("EXPOSE") == ["8443"]
    copied = [shlex.split(a) for a in of("COPY") if "policies/library" in a]
    assert copied == [["policies/library", "/etc/trtguard/policies/library"]]


def applies(requirement: Requirement, extras: set[str]) -> bool:
    """Whether ``requirement`` is installed in the image when its parent was asked for with ``extras``."""
    if requirement.marker is None:
        return True
    return any(requirement.marker.evaluate({**IMAGE_ENVIRONMENT, "extra": extra}) for extra in extras | {""})


def locked_requirements() -> dict[str, Requirement]:
    """Name -> pinned requirement of each entry in the runtime lock; every entry must carry hashes."""
    locked: dict[str, Requirement] = {}
    for block in re.split(r"\n(?=\S)", RUNTIME_LOCK.read_text(encoding="utf-8")):
        first = block.strip().splitlines()[0] if block.strip() else ""
        if not first or first.startswith("#"):
            continue
        requirement = Requirement(first.rstrip("\\ ").strip())
        assert "--hash=sha256:" in block, f"{requirement.name} has no hash in {RUNTIME_LOCK.name}"
        locked[canonicalize_name(requirement.name)] = requirement
    return locked


def test_runtime_lock_holds_every_runtime_dependency_with_hashes() -> None:
    """pip --no-deps installs what the lock lists and nothing more, so the lock must be complete."""
    locked = locked_requirements()
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    queue: list[tuple[Requirement, set[str]]] = [
        (Requirement(text), set()) for text in project["dependencies"]
    ]
    seen: set[str] = set()
    missing: set[str] = set()
    while queue:
        requirement, parent_extras = queue.pop()
        if not applies(requirement, parent_extras):
            continue
        name = canonicalize_name(requirement.name)
        key = f"{name}[{','.join(sorted(requirement.extras))}]"
        if key in seen:
            continue
        seen.add(key)
        if name not in locked:
            missing.add(name)
            continue
        # The dependencies of the installed distribution: the dev lock pins the same versions.
        queue += [(Requirement(text), set(requirement.extras)) for text in metadata.requires(name) or []]
    assert not missing, f"{RUNTIME_LOCK.name} lacks runtime dependencies: {sorted(missing)}"
    dev_only = {"pytest", "mypy", "ruff", "hatchling", "kubernetes-validate"}
    assert not dev_only & set(locked), f"{RUNTIME_LOCK.name} holds development tools"

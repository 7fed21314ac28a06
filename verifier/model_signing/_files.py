"""A model on disk against the files a signature lists, hashed and walked as upstream's verifier does.

The model is a file (its one resource is named ``.``) or a folder, walked whole (``glob("**/*")``, hidden
files included). Left out, as ``model_signing verify`` leaves them out: the signature's own recorded
``ignore_paths``, the paths the caller ignores (the signature file itself when it lies in the model), and the
git paths ``.git/``, ``.gitattributes``, ``.github/``, ``.gitignore`` unless told otherwise; an ignored
folder ignores everything under it. A symbolic link is refused unless the signature allowed them.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from verifier.base import InputError, VerificationError, hash_file
from verifier.model_signing._signature import ModelSignature

__all__ = ["GIT_PATHS", "model_mismatch"]

#: The paths ``model_signing`` ignores by default (``--ignore-git-paths``).
GIT_PATHS = (".git", ".gitattributes", ".github", ".gitignore")


def _inside(model: Path, paths: Iterable[str | Path]) -> list[Path]:
    """The ignored paths joined to the model, compared by their components as upstream compares them (so
    ``sub/../a`` ignores nothing); an absolute path is first made relative to the model, and one outside
    it is dropped."""
    found = []
    for given in map(Path, paths):
        relative = given
        if given.is_absolute():
            try:
                relative = given.resolve().relative_to(model.resolve())
            except ValueError:
                continue
        found.append(model / relative)
    return found


def _hashed(model: Path, ignored: list[Path], allow_symlinks: bool) -> dict[str, str]:
    found: dict[str, str] = {}
    for path in (model, *model.glob("**/*")):
        if path.is_symlink() and not allow_symlinks:
            raise VerificationError(
                f"{path} is a symbolic link, which the signature does not allow",
                hint="remove the link, or sign the model with --allow_symlinks",
            )
        if not (path.is_file() or path.is_dir()):
            raise InputError(f"{path} is neither a file nor a folder", location=str(model))
        if path.is_file() and not any(path.is_relative_to(p) for p in ignored):
            found[str(PurePosixPath(path.relative_to(model).as_posix()))] = hash_file(path).sha256
    return found


def model_mismatch(
    model: Path,
    signature: ModelSignature,
    *,
    ignore_paths: Iterable[str | Path] = (),
    ignore_git_paths: bool = True,
) -> list[str]:
    """What differs between ``model`` on disk and the files ``signature`` lists (empty: the model is the
    signed one): files added, files missing, files whose content changed, each named."""
    model = Path(model).absolute()
    if not model.exists():
        raise InputError(f"{model} does not exist", location=str(model))
    ignored = _inside(
        model, [*signature.ignore_paths, *ignore_paths, *(GIT_PATHS if ignore_git_paths else ())]
    )
    actual = _hashed(model, ignored, signature.allow_symlinks)
    expected = signature.resources
    problems = []
    if added := sorted(set(actual) - set(expected)):
        problems.append(f"files not signed: {', '.join(added)}")
    if missing := sorted(set(expected) - set(actual)):
        problems.append(f"signed files missing: {', '.join(missing)}")
    changed = sorted(name for name in set(actual) & set(expected) if actual[name] != expected[name])
    if changed:
        problems.append(f"files changed since signing: {', '.join(changed)}")
    return problems

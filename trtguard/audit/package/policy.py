"""The policy set in an evidence package: taking the snapshot, loading it back to recompute its revision.

The revision (``policies.loader``) hashes each policy file under its base name, in load order, then each key
file under the name its TrustedKeys document gives it (relative to the policy file). The snapshot therefore
keeps the files' layout relative to their common folder and the load order; loading it back from a scratch
folder reproduces the revision exactly. A package may not make the loader read anything outside the snapshot:
every file a TrustedKeys document names must be inside it.
"""

from __future__ import annotations

import os
import posixpath
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pydantic import ValidationError

from policies.loader import PolicySet, load_policy_set
from policies.schema import TrustedKey, TrustedKeysDocument
from trtguard.audit.package.archive import UnsafeArchive, check_name
from verifier.base import InputError, VerificationError, decode, load_documents
from verifier.signatures.notation.config import POLICY_FILES

#: Folder of the policy files inside a package.
PREFIX: Final = "policies/"


@dataclass(frozen=True, slots=True)
class PolicySnapshot:
    """Policy and key files by package path, the policy files' load order and the revision they make."""

    revision: str
    policy_files: tuple[str, ...]
    key_files: tuple[str, ...]
    contents: Mapping[str, bytes]


def take_snapshot(paths: Sequence[Path]) -> PolicySnapshot:
    """Load the policies under ``paths`` and copy the files that make their revision.

    The copy is loaded back before it is returned, so a snapshot always recomputes to the revision it
    claims (files changed while being read are caught here rather than by the auditor).
    """
    policy_set = load_policy_set(list(paths))
    policy_paths = [os.path.abspath(path) for path in policy_set.sources]  # noqa: PTH100 - lexical, as the loader
    read: dict[str, bytes] = {}
    key_paths: list[str] = []
    for path in policy_paths:
        data = _read(path)
        read[path] = data
        for name in key_file_names(data, location=path, on_disk=os.path.dirname(path)):  # noqa: PTH120
            if posixpath.isabs(name) or os.path.isabs(name):  # noqa: PTH117
                raise InputError(
                    f"key file {name!r} is named by an absolute path: its revision is not reproducible",
                    location=path,
                    hint="name key files relative to the policy file, e.g. file: keys/build-signer.pub",
                )
            key_path = os.path.normpath(os.path.join(os.path.dirname(path), name))  # noqa: PTH118, PTH120
            if key_path not in read:
                read[key_path] = _read(key_path)
                key_paths.append(key_path)
    root = os.path.commonpath([os.path.dirname(path) for path in read])  # noqa: PTH120
    names = {path: PREFIX + Path(os.path.relpath(path, root)).as_posix() for path in read}
    for path, name in names.items():
        try:
            check_name(name, location=path)
        except UnsafeArchive as error:
            raise InputError(error.message, location=path, hint="use ASCII file names") from None
    snapshot = PolicySnapshot(
        revision=policy_set.revision,
        policy_files=tuple(names[path] for path in policy_paths),
        key_files=tuple(names[path] for path in key_paths),
        contents={names[path]: data for path, data in read.items()},
    )
    reloaded = load_snapshot(snapshot.contents, snapshot.policy_files, snapshot.key_files)
    if reloaded.revision != snapshot.revision:
        raise InputError(
            "the policy files changed while they were being read",
            location=", ".join(map(str, paths)),
            hint="run the export again once the policies have settled",
        )
    return snapshot


def load_snapshot(
    contents: Mapping[str, bytes], policy_files: Sequence[str], key_files: Sequence[str]
) -> PolicySet:
    """Load a snapshot back from a scratch folder.

    Raises :class:`VerificationError` when a listed file is missing or a TrustedKeys document names a file
    outside the snapshot, and the loader's :class:`InputError` when the policies do not load.
    """
    listed = [*policy_files, *key_files]
    for name in listed:
        if not name.startswith(PREFIX) or name not in contents:
            raise VerificationError(f"policy file {name} is not in the package")
    included = set(key_files)
    with tempfile.TemporaryDirectory(prefix="trtguard-policies-") as scratch:
        root = Path(scratch)
        for name in listed:
            target = root / name
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(contents[name])
            except OSError as error:
                problem = f"policy file cannot be laid out: {error.strerror}"
                raise VerificationError(problem, location=name) from None
        for name in policy_files:
            for reference in key_directory_names(contents[name], location=name):
                resolved = posixpath.normpath(posixpath.join(posixpath.dirname(name), reference))
                if posixpath.isabs(reference) or not any(k.startswith(resolved + "/") for k in included):
                    raise VerificationError(
                        f"a TrustedKeys document names the Notation configuration {reference!r}, which is "
                        "not in the package",
                        location=name,
                        hint="a package's policies may only refer to files the package itself holds",
                    )
            for reference in key_file_names(contents[name], location=name):
                resolved = posixpath.normpath(posixpath.join(posixpath.dirname(name), reference))
                if posixpath.isabs(reference) or resolved not in included:
                    raise VerificationError(
                        f"a TrustedKeys document names {reference!r}, which is not a key file of the package",
                        location=name,
                        hint="a package's policies may only refer to files the package itself holds",
                    )
        return load_policy_set([root / name for name in policy_files])


def key_file_names(data: bytes, *, location: str, on_disk: str | None = None) -> list[str]:
    """The files named by the TrustedKeys documents in one policy file, in the order the loader reads them.

    A Notation configuration directory (``notationConfig``) names the files in it that the loader may read
    (its trust policy documents and trust-store files): found on disk under ``on_disk`` (the policy file's
    folder) when a snapshot is taken, and among ``contents`` when one is checked (:func:`load_snapshot`).
    Documents that are not TrustedKeys, or do not validate, name nothing here (the loader reports them).
    The text is read as the loader reads it (:mod:`verifier.base._yamldoc`: aliases of lists and maps refused,
    the expanded size bounded): a package's policy text is untrusted until it has been loaded.
    """
    try:
        documents = [document.data for document in load_documents(decode(data, location), location)]
    except InputError as error:
        raise VerificationError(
            f"policy file does not parse: {error.message}", location=error.location
        ) from None
    names: list[str] = []
    for key in _trusted_keys(documents):
        names += _files(key)
        if key.notation_config is not None and on_disk is not None:
            names += _config_files(on_disk, key.notation_config.directory)
    return names


def key_directory_names(data: bytes, *, location: str) -> list[str]:
    """The Notation configuration directories the TrustedKeys documents in one policy file name."""
    try:
        documents = [document.data for document in load_documents(decode(data, location), location)]
    except InputError:
        return []
    return [
        key.notation_config.directory for key in _trusted_keys(documents) if key.notation_config is not None
    ]


def _trusted_keys(documents: Iterable[object]) -> Iterator[TrustedKey]:
    """The keys of those ``documents`` that are TrustedKeys documents and validate (the loader reports the
    others)."""
    for document in documents:
        if not isinstance(document, dict) or document.get("kind") != "TrustedKeys":
            continue
        try:
            keys = TrustedKeysDocument.model_validate(document).spec.keys
        except ValidationError:
            continue
        yield from keys


def _config_files(base: str, directory: str) -> list[str]:
    """The files of a Notation configuration directory the loader may read, relative to ``base``."""
    if posixpath.isabs(directory) or os.path.isabs(directory):  # noqa: PTH117
        raise InputError(
            f"the Notation configuration {directory!r} is named by an absolute path: its revision is not "
            "reproducible",
            location=base,
            hint="name it relative to the policy file, e.g. notationConfig: {directory: notation}",
        )
    root = Path(base) / directory
    found = [root / name for name in POLICY_FILES if (root / name).is_file()]
    stores = root / "truststore" / "x509"
    if stores.is_dir():
        found += sorted(p for p in stores.glob("*/*/*") if p.is_file() and not p.is_symlink())
    return [os.path.relpath(path, base) for path in found]


def _files(key: TrustedKey) -> list[str]:
    found = [key.file] if key.file is not None else []
    if key.openpgp is not None and key.openpgp.file is not None:
        found.append(key.openpgp.file)
    if key.notation is not None:  # in the order policies.signers reads the trust stores
        stores = key.notation.trust_stores
        found += [*(stores.ca or ()), *(stores.signing_authority or ()), *(stores.tsa or ())]
    if key.keyless is not None:
        found.append(key.keyless.trusted_root.file)
    publisher = key.model_signing
    if publisher is not None:  # a model publisher's key, certificate chain or keyless trusted root
        found += [publisher.file] if publisher.file is not None else []
        found += publisher.certificate_chain or []
        found += [publisher.keyless.trusted_root.file] if publisher.keyless is not None else []
    if key.rekor_public_key is not None:
        found.append(key.rekor_public_key.file)
    return found


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise InputError(f"cannot read: {error.strerror}", location=path) from error

"""Notation's own configuration, read as ``notation verify`` reads it: trust policy document and trust stores.

A Notation configuration directory (``~/.config/notation``, or any folder laid out the same) holds::

    trustpolicy.oci.json   {"version": "1.0", "trustPolicies": [statement, ...]}   (read first)
    trustpolicy.json       the same document under its older name (read when the first is absent)
    truststore/x509/{ca,signingAuthority,tsa}/<named store>/<certificate files>

A statement names its ``trustStores`` as ``<type>:<named store>``, its ``trustedIdentities``, its
``registryScopes`` and ``signatureVerification.level``. The document is checked as notation-go checks it
(``verifier/trustpolicy``): version ``1.0``, unique statement names, each registry scope in one statement
only, ``*`` alone in its statement's scopes, a ``skip`` statement without stores or identities, the others
with both. For an artifact the statement whose scopes name its repository applies, else the ``*`` one, else
none (:meth:`NotationPolicy.statement_for`, with Notation's message). Trust-store files are checked by store
type (:mod:`verifier.signatures.notation._stores`); like Notation, a named store must be a real folder of
regular files (no symlinks, no sub-folders).

trtguard runs no plugins and checks no revocation: a ``signatureVerification.override`` other than of
``revocation`` is refused; ``verifyTimestamp: afterCertExpiry`` is read as ``always`` (timestamps are
checked whenever a ``tsa`` store is configured, which is stricter).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast

from cryptography import x509

from verifier.base import InputError, VerificationError
from verifier.signatures.notation._stores import StoreType, load_certificates
from verifier.signatures.notation._trust import Level, NotationTrust, parse_identities

__all__ = ["POLICY_FILES", "NotationPolicy", "NotationStatement", "load_notation_config"]

#: The trust policy document's names, in the order Notation looks for them.
POLICY_FILES: Final = ("trustpolicy.oci.json", "trustpolicy.json")
_STORE_TYPES: Final[tuple[StoreType, ...]] = ("ca", "signingAuthority", "tsa")
_STORE_NAME: Final = re.compile(r"[a-zA-Z0-9_.-]+")
_LEVELS: Final = ("strict", "permissive", "audit", "skip")
#: Certificate files one named store may hold.
_MAX_FILES: Final = 100


@dataclass(frozen=True, slots=True)
class NotationStatement:
    """One trust policy statement; ``trust`` is None for a ``skip`` statement (nothing is verified)."""

    name: str
    scopes: tuple[str, ...]
    trust: NotationTrust | None


@dataclass(frozen=True, slots=True)
class NotationPolicy:
    """A Notation trust policy document with its trust stores: one trust per statement, chosen by scope."""

    statements: tuple[NotationStatement, ...]
    source: str

    def statement_for(self, repository: str | None) -> NotationStatement:
        """The statement that applies to ``repository`` (exact scope first, then ``*``), as Notation picks.

        Raises :class:`VerificationError` when none applies.
        """
        wildcard = next((s for s in self.statements if "*" in s.scopes), None)
        exact = next((s for s in self.statements if repository is not None and repository in s.scopes), None)
        chosen = exact or wildcard
        if chosen is None:
            raise VerificationError(
                f"artifact {repository or '(no repository)'!r} has no applicable trust policy statement in "
                f"{self.source}; trust policy applicability for a given artifact is determined by "
                "registryScopes"
            )
        return chosen

    def trust_for(self, repository: str | None) -> NotationTrust:
        """The trust of the statement for ``repository``; :class:`VerificationError` for none, or ``skip``."""
        statement = self.statement_for(repository)
        if statement.trust is None:
            raise VerificationError(
                f"trust policy statement {statement.name!r} of {self.source} is set to skip signature "
                "verification: nothing is verified, so its signatures do not count"
            )
        return statement.trust

    @property
    def fingerprint(self) -> str:
        """What verdicts depend on, for cache keys: every statement's trust (or that it skips)."""
        digest = hashlib.sha256()
        for statement in self.statements:
            mark = statement.trust.fingerprint if statement.trust is not None else "skip"
            digest.update(f"{statement.name}\0{','.join(statement.scopes)}\0{mark}\0".encode())
        return digest.hexdigest()


def _strings(value: Any, what: str, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InputError(f"{what} is not a list of strings", location=where)
    return cast(list[str], value)


def _level(name: str, verification: Any, where: str) -> str:
    if not isinstance(verification, dict):
        raise InputError(
            f"trust policy statement {name!r} has invalid signatureVerification: it is not an object",
            location=where,
        )
    level = verification.get("level")
    if level not in _LEVELS:
        raise InputError(
            f"trust policy statement {name!r} has invalid signatureVerification: level {level!r} is not "
            f"one of {', '.join(_LEVELS)}",
            location=where,
        )
    override = verification.get("override") or {}
    if not isinstance(override, dict) or set(override) - {"revocation"}:
        raise InputError(
            f"trust policy statement {name!r} overrides {override!r} of its level; trtguard applies "
            "Notation's levels as they are (an override of revocation alone "
            "is accepted: revocation is not checked)",
            location=where,
        )
    stamp = verification.get("verifyTimestamp", "always")
    if stamp not in ("always", "afterCertExpiry"):
        raise InputError(
            f"trust policy statement {name!r} has invalid signatureVerification: verifyTimestamp must be "
            f"'always' or 'afterCertExpiry', not {stamp!r}",
            location=where,
        )
    return cast(str, level)


def _store_files(folder: Path, kind: str, name: str) -> list[Path]:
    """The certificate files of one named store, as Notation allows them (a folder of regular files)."""
    if not folder.exists():
        raise InputError(f"the trust store {name!r} of type {kind!r} does not exist", location=str(folder))
    if folder.is_symlink() or not folder.is_dir():
        raise InputError(
            f"the trust store {name!r} of type {kind!r} is not a regular directory (symlinks are not "
            "supported)",
            location=str(folder),
        )
    try:
        files = sorted(folder.iterdir())
    except OSError as error:
        raise InputError(
            f"the trust store {name!r} of type {kind!r} cannot be read: {error.strerror}",
            location=str(folder),
        ) from error
    for file in files:
        if file.is_symlink() or not file.is_file():
            raise InputError(
                f"trusted certificate {file.name} in trust store {name} of type {kind} is not a regular file "
                "(directories or symlinks are not supported)",
                location=str(file),
            )
    if not files:
        raise InputError(
            f"no x509 certificates were found in trust store {name!r} of type {kind!r}", location=str(folder)
        )
    if len(files) > _MAX_FILES:
        raise InputError(f"trust store {name!r} has more than {_MAX_FILES} files", location=str(folder))
    return files


def _stores(
    names: Sequence[str], statement: str, root: Path, read: Callable[[Path], bytes], where: str
) -> dict[StoreType, tuple[x509.Certificate, ...]]:
    found: dict[StoreType, list[x509.Certificate]] = {}
    for value in names:
        kind, separator, store = value.partition(":")
        if not separator or not store:
            raise InputError(
                f"trust policy statement {statement!r} has malformed trust store value {value!r}; the "
                "required format is <TrustStoreType>:<TrustStoreName>",
                location=where,
            )
        if kind not in _STORE_TYPES:
            raise InputError(
                f"trust policy statement {statement!r} uses an unsupported trust store type {kind!r} in "
                f"trust store value {value!r}",
                location=where,
            )
        if not _STORE_NAME.fullmatch(store) or store in (".", ".."):
            raise InputError(
                f"trust policy statement {statement!r} uses an unsupported trust store name {store!r}; named "
                "store names follow [a-zA-Z0-9_.-]+",
                location=where,
            )
        store_type: StoreType = kind
        folder = root / "truststore" / "x509" / kind / store
        for file in _store_files(folder, kind, store):
            found.setdefault(store_type, []).extend(
                load_certificates(read(file), location=str(file), store=store_type)
            )
    return {kind: tuple(certificates) for kind, certificates in found.items()}


def _statement(
    raw: Any, root: Path, read: Callable[[Path], bytes], where: str
) -> tuple[str, tuple[str, ...], NotationTrust | None]:
    if not isinstance(raw, dict):
        raise InputError("a trust policy statement is not an object", location=where)
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise InputError(
            "a trust policy statement is missing a name, every statement requires a name", location=where
        )
    level = _level(name, raw.get("signatureVerification"), where)
    stores = _strings(raw.get("trustStores"), f"trust policy statement {name!r} trustStores", where)
    identities = _strings(
        raw.get("trustedIdentities"), f"trust policy statement {name!r} trustedIdentities", where
    )
    scopes = tuple(
        _strings(raw.get("registryScopes"), f"trust policy statement {name!r} registryScopes", where)
    )
    if not scopes:
        raise InputError(
            f"trust policy statement {name!r} has zero registry scopes, it must specify registry scopes with "
            "at least one value",
            location=where,
        )
    if "*" in scopes and len(scopes) > 1:
        raise InputError(
            f"trust policy statement {name!r} uses wildcard registry scope '*', a wildcard scope cannot be "
            "used in conjunction with other scope values",
            location=where,
        )
    if level == "skip":
        if stores or identities:
            raise InputError(
                f"trust policy statement {name!r} is set to skip signature verification but configured with "
                "trust stores and/or trusted identities, remove them if signature verification needs to be "
                "skipped",
                location=where,
            )
        return name, scopes, None
    if not stores or not identities:
        raise InputError(
            f"trust policy statement {name!r} is either missing trust stores or trusted identities, both "
            "must be specified",
            location=where,
        )
    location = f"{where} statement {name!r}"
    try:
        trust = NotationTrust(
            stores=_stores(stores, name, root, read, where),
            identities=parse_identities(identities, location=location),
            scopes=scopes,
            level=cast(Level, level),
        )
    except InputError as error:
        raise InputError(
            f"trust policy statement {name!r}: {error.message}",
            location=error.location or where,
            hint=error.hint,
        ) from error
    return name, scopes, trust


def load_notation_config(root: Path, *, read: Callable[[Path], bytes]) -> NotationPolicy:
    """The trust policy document of the Notation configuration directory ``root`` and its trust stores.

    ``read`` reads one file (so that the caller can record what was read); :class:`InputError` for anything
    Notation would refuse, naming the file.
    """
    path = next((root / name for name in POLICY_FILES if (root / name).exists()), None)
    if path is not None and not path.is_file():
        # A folder, or a FIFO (opening it would wait for a writer); a symlink to a file is read (ConfigMaps).
        raise InputError(
            "the trust policy is not a regular file",
            location=str(path),
        )
    if path is None:
        raise InputError(
            f"no Notation trust policy ({' or '.join(POLICY_FILES)}) in {root}",
            location=str(root),
            hint="point at the folder that holds trustpolicy.json and truststore/ (Notation's configuration "
            "directory)",
        )
    where = str(path)
    try:
        document: Any = json.loads(read(path))
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise InputError("malformed trust policy: not JSON", location=where) from None
    if not isinstance(document, dict):
        raise InputError("malformed trust policy: not a JSON object", location=where)
    version = document.get("version")
    if not version:
        raise InputError(
            "the trust policy document has empty version, version must be specified", location=where
        )
    if version != "1.0":
        raise InputError(f"the trust policy document uses unsupported version {version!r}", location=where)
    raw_statements = document.get("trustPolicies")
    if not isinstance(raw_statements, list) or not raw_statements:
        raise InputError(
            "the trust policy document can not have zero trust policy statements", location=where
        )
    statements: list[NotationStatement] = []
    owners: dict[str, str] = {}
    for raw in raw_statements:
        name, scopes, trust = _statement(raw, root, read, where)
        if any(s.name == name for s in statements):
            raise InputError(
                f"multiple trust policy statements use the same name {name!r}, statement names must be "
                "unique",
                location=where,
            )
        for scope in scopes:
            if scope in owners:
                raise InputError(
                    f"registry scope {scope!r} is present in multiple trust policy statements, one registry "
                    "scope value can only be associated with one statement",
                    location=where,
                )
            owners[scope] = name
        statements.append(NotationStatement(name, scopes, trust))
    return NotationPolicy(tuple(statements), where)

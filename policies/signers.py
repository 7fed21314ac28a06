"""TrustedKeys documents → named :class:`Signer` objects, and what makes a rule's list of signers unusable.

A signer is a public key (inline, or read from a file beside the policy) or a keyless identity with the
Sigstore trusted root it is checked against; a Rekor public key may come with either. It can also be an
OpenPGP key (build manifests and change approvals) or a Notary Project signer (trust stores, trusted
identities, registry scopes and level; image signatures). Files read here are added to the policy revision
digest, so that a changed key file is a new revision.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from policies._trusted_keys import KeylessSigner, ModelSigningSigner
from policies.schema import NotationSigner, TrustedKey, TrustedKeysDocument
from verifier.base import Document, TrtguardError, read_limited
from verifier.verification import PublicKey

if TYPE_CHECKING:
    # Each signer format's verifier loads with the first signer of that format (start-up time, issue 15).
    from verifier.verification import (
        KeylessIdentity,
        ModelSigningTrust,
        NotationPolicy,
        NotationTrust,
        OpenPGPKey,
        StoreType,
        TrustRoot,
    )

__all__ = ["Signer", "load_signers", "signer_list_problems"]


@dataclass(frozen=True, slots=True)
class Signer:
    """A named signer from a TrustedKeys document, ready to verify with.

    Either a public key, or a keyless identity with the Sigstore trusted root it is checked against.
    """

    ref: str
    public_key: PublicKey | None
    identity: KeylessIdentity | None
    trust_root: TrustRoot | None
    rekor_key: PublicKey | None
    openpgp: OpenPGPKey | None = None
    notation: NotationTrust | NotationPolicy | None = None
    #: An OpenSSF Model Signing publisher's key or certificates: it signs models only.
    model_signing: ModelSigningTrust | None = None

    @property
    def kind(self) -> str:
        """``key``, ``keyless``, ``openpgp``, ``notation`` or ``model-signing``: the format it signs in."""
        if self.model_signing is not None:
            return "model-signing"
        if self.openpgp is not None:
            return "openpgp"
        if self.notation is not None:
            return "notation"
        return "key" if self.public_key is not None else "keyless"

    @property
    def fingerprint(self) -> str:
        """What identifies the signer's trust material: key id, OpenPGP fingerprint, Notation trust digest."""
        if self.model_signing is not None:
            return self.model_signing.identity
        if self.openpgp is not None:
            return self.openpgp.fingerprint
        if self.notation is not None:
            return self.notation.fingerprint
        if self.public_key is not None:
            return self.public_key.key_id
        return self.trust_root.fingerprint if self.trust_root is not None else ""


def load_signers(
    docs: Sequence[tuple[TrustedKeysDocument, Document, Path]],
    problems: list[str],
    digest: Any,
    files: list[tuple[Path, str]] | None = None,
) -> dict[str, Signer]:
    """Every signer of ``docs`` by ``set/name``; problems (a duplicate set, a key that does not load) are
    added to ``problems``, and key files read are added to the revision ``digest`` and, with the SHA-256
    of the bytes read, to ``files`` (``serve`` watches them)."""
    read_files: list[tuple[Path, str]] = [] if files is None else files
    signers: dict[str, Signer] = {}
    seen: dict[str, str] = {}
    for doc, document, path in docs:
        set_name = doc.metadata.name
        where = f"{path}:{document.line}"
        if set_name in seen:
            problems.append(f"{where}: TrustedKeys {set_name!r} is already defined at {seen[set_name]}")
            continue
        seen[set_name] = where
        for index, key in enumerate(doc.spec.keys):
            key_where = f"{path}:{document.line_of(('spec', 'keys', index))}"
            signer = _load_signer(
                f"{set_name}/{key.name}", key, path.parent, key_where, problems, digest, read_files
            )
            if signer is not None:
                signers[signer.ref] = signer
    return signers


def _load_signer(
    ref: str,
    key: TrustedKey,
    base: Path,
    where: str,
    problems: list[str],
    digest: Any,
    files: list[tuple[Path, str]],
) -> Signer | None:
    def read(name: str) -> bytes | None:
        file = base / name
        try:
            data = file.read_bytes()
        except OSError as error:
            problems.append(f"{where}: key {ref}: cannot read {file}: {error.strerror}")
            return None
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
        files.append((file, hashlib.sha256(data).hexdigest()))
        return data

    try:
        public_key = identity = trust_root = rekor = None
        if key.openpgp is not None:
            armored = key.openpgp.armored.encode() if key.openpgp.armored is not None else None
            data = armored if armored is not None else read(key.openpgp.file or "")
            if data is None:
                return None
            from verifier.verification import OpenPGPKey  # noqa: PLC0415 - see TYPE_CHECKING above

            return Signer(ref, None, None, None, None, openpgp=OpenPGPKey.from_armored(data, location=where))
        if key.model_signing is not None:
            publisher = _model_signing_trust(key.model_signing, read, where, base)
            return None if publisher is None else Signer(ref, None, None, None, None, model_signing=publisher)
        if key.notation is not None:
            trust = _notation_trust(key.notation, read, where)
            return None if trust is None else Signer(ref, None, None, None, None, notation=trust)
        if key.notation_config is not None:
            from verifier.verification import load_notation_config  # noqa: PLC0415 - see TYPE_CHECKING

            config = load_notation_config(
                base / key.notation_config.directory, read=_recorded(base, digest, files)
            )
            return Signer(ref, None, None, None, None, notation=config)
        if key.public_key is not None:
            public_key = PublicKey.from_pem(key.public_key.encode())
        elif key.file is not None:
            data = read(key.file)
            if data is None:
                return None
            public_key = PublicKey.from_pem(data)
        if key.keyless is not None:
            identity, trust_root = _keyless(key.keyless, read, base)
            if trust_root is None:
                return None
        if key.rekor_public_key is not None:
            data = read(key.rekor_public_key.file)
            if data is None:
                return None
            rekor = PublicKey.from_pem(data)
    except TrtguardError as error:
        # The file at fault (a trust-store certificate, a Notation configuration file) is named too.
        at = f" [{error.location}]" if error.location and error.location != where else ""
        problems.append(f"{where}: key {ref}: {error.message}{at}")
        return None
    return Signer(ref=ref, public_key=public_key, identity=identity, trust_root=trust_root, rekor_key=rekor)


def _keyless(keyless: KeylessSigner, read: Any, base: Path) -> tuple[KeylessIdentity, TrustRoot | None]:
    """A keyless identity and its trusted root (None when the root file cannot be read: a problem then)."""
    from verifier.verification import KeylessIdentity, TrustRoot  # noqa: PLC0415 - see TYPE_CHECKING

    identity = KeylessIdentity(
        issuer=keyless.issuer,
        issuer_regex=keyless.issuer_regexp,
        subject=keyless.subject,
        subject_regex=keyless.subject_regexp,
    )
    root = read(keyless.trusted_root.file)
    if root is None:
        return identity, None
    return identity, TrustRoot.from_bytes(root, location=str(base / keyless.trusted_root.file))


def _recorded(base: Path, digest: Any, files: list[tuple[Path, str]]) -> Callable[[Path], bytes]:
    """A reader of a Notation configuration's files that adds each to the revision ``digest`` and
    ``files``."""

    def read(path: Path) -> bytes:
        data = read_limited(path, "the file")
        name = str(path.relative_to(base)) if path.is_relative_to(base) else str(path)
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
        files.append((path, hashlib.sha256(data).hexdigest()))
        return data

    return read


def _model_signing_trust(
    signer: ModelSigningSigner, read: Any, where: str, base: Path
) -> ModelSigningTrust | None:
    from verifier.verification import (  # noqa: PLC0415 - see TYPE_CHECKING above
        ModelSigningCertificates,
        ModelSigningKey,
        ModelSigningKeyless,
    )

    if signer.keyless is not None:
        identity, trust_root = _keyless(signer.keyless, read, base)
        return None if trust_root is None else ModelSigningKeyless(identity, trust_root)
    if signer.certificate_chain is not None:
        anchors: list[Any] = []
        for name in signer.certificate_chain:
            data = read(name)
            if data is None:
                return None
            anchors += ModelSigningCertificates.from_pem(data, f"{where} certificateChain {name}").anchors
        return ModelSigningCertificates(tuple(anchors))
    data = signer.public_key.encode() if signer.public_key is not None else read(signer.file or "")
    return None if data is None else ModelSigningKey.from_pem(data, where)


def _notation_trust(signer: NotationSigner, read: Any, where: str) -> NotationTrust | None:
    from verifier.verification import (  # noqa: PLC0415 - see TYPE_CHECKING above
        NotationTrust,
        load_certificates,
        parse_identities,
    )

    stores: dict[StoreType, tuple[Any, ...]] = {}
    given: tuple[tuple[StoreType, list[str] | None], ...] = (
        ("ca", signer.trust_stores.ca),
        ("signingAuthority", signer.trust_stores.signing_authority),
        ("tsa", signer.trust_stores.tsa),
    )
    for kind, files in given:
        certificates: list[Any] = []
        for name in files or ():
            data = read(name)
            if data is None:
                return None
            certificates += load_certificates(data, location=f"{where} trustStores.{kind} {name}", store=kind)
        if certificates:
            stores[kind] = tuple(certificates)
    return NotationTrust(
        stores=stores,
        identities=parse_identities(signer.trusted_identities, location=where),
        scopes=tuple(signer.registry_scopes),
        level=signer.verification_level,  # type: ignore[arg-type]  # 'skip' is refused with its reason
    )


def signer_list_problems(
    refs: Sequence[str],
    signers: Mapping[str, Signer],
    *,
    keyless_allowed: bool,
    openpgp_allowed: bool = False,
    model_signing_only: bool = False,
) -> list[tuple[int, str]]:
    """What makes one rule's list of (defined) signers unusable, found at load time rather than at admission.

    Each problem is the index into ``refs`` it is about and what is wrong. ``keyless_allowed`` is true for
    image signatures only (keyless identities and Notary Project signers sign images); attestations (DSSE)
    are verified with public keys, and ``openpgp_allowed`` (build manifests and change approvals) admits
    OpenPGP keys too. ``model_signing_only`` is for the signers of a build's inputs (``onnxSignedBy``,
    ``calibrationSignedBy``): model-signing signers there, and nowhere else. One key listed twice (by two
    names) is a problem in every format.
    """
    found: list[tuple[int, str]] = []
    by_key: dict[str, str] = {}
    for index, ref in enumerate(refs):
        signer = signers[ref]
        if model_signing_only or signer.model_signing is not None:
            if model_signing_only and signer.model_signing is None:
                found.append(
                    (index, f"{ref} is no model-signing signer; list a TrustedKeys modelSigning entry")
                )
            elif not model_signing_only:
                where = "onnxSignedBy and calibrationSignedBy"
                found.append((index, f"{ref} is a model-signing signer; it counts for {where} only"))
            elif signer.model_signing is not None:
                identity = signer.model_signing.identity
                if identity in by_key and by_key[identity] != ref:
                    found.append((index, f"{ref} and {by_key[identity]} are the same signer; list each once"))
                by_key.setdefault(identity, ref)
            continue
        if signer.openpgp is not None or signer.notation is not None:
            problem = _format_problem(
                ref, signer, keyless_allowed=keyless_allowed, openpgp_allowed=openpgp_allowed
            )
            if problem is not None:
                found.append((index, problem))
            elif signer.openpgp is not None:
                fingerprint = f"openpgp:{signer.openpgp.fingerprint}"
                if fingerprint in by_key and by_key[fingerprint] != ref:
                    found.append(
                        (
                            index,
                            f"{ref} and {by_key[fingerprint]} are the same OpenPGP key; list each key once",
                        )
                    )
                by_key.setdefault(fingerprint, ref)
            continue
        key = signer.public_key
        if key is None:
            if not keyless_allowed:
                found.append(
                    (
                        index,
                        f"{ref} is a keyless identity; attestations are verified with public keys only, so "
                        "list a TrustedKeys entry with publicKey or file",
                    )
                )
            continue
        if key.key_id in by_key and by_key[key.key_id] != ref:
            found.append(
                (
                    index,
                    f"{ref} and {by_key[key.key_id]} are the same key; a threshold counts distinct keys, so "
                    "list each key once",
                )
            )
        by_key.setdefault(key.key_id, ref)
    roots = {root.fingerprint for ref in refs if (root := signers[ref].trust_root) is not None}
    if len(roots) > 1:
        found.append(
            (
                0,
                "the keyless signers use different trusted roots; list keyless signers of one Sigstore "
                "instance per rule",
            )
        )
    return found


def _format_problem(ref: str, signer: Signer, *, keyless_allowed: bool, openpgp_allowed: bool) -> str | None:
    """Why an OpenPGP key or a Notation signer cannot sign what this rule asks for, or None."""
    if signer.openpgp is not None and not openpgp_allowed:
        return (
            f"{ref} is an OpenPGP key; OpenPGP signatures count for build manifests and change approvals only"
        )
    if signer.notation is not None and not keyless_allowed:
        return f"{ref} is a Notary Project signer; Notation signatures count for image signatures only"
    return None

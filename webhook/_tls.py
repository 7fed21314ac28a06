"""TLS for the webhook: a local CA with a serving certificate, and certificate reload without a restart.

``make_self_signed`` writes a CA and a serving certificate whose SANs cover ``localhost``, the loopback
addresses and the Service DNS names the API server will ask for (``<svc>.<ns>.svc``); it reuses what is there
while it is still valid for those names, so the CA a client pinned stays the same across restarts.

:class:`CertificateReloader` watches the certificate and key files (a Kubernetes Secret update, a
cert-manager renewal) and loads a new pair into the *live* ``SSLContext``: new handshakes get the new
certificate, established connections keep theirs. The files are read and checked in a thread, and the pair
goes live on the event loop's thread, where the handshakes run, so that none sees the context mid-change. A
pair that does not load keeps the old one in force.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import logging
import os
import re
import ssl
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from verifier.base import InputError

_log = logging.getLogger(__name__)

#: Names every self-signed serving certificate carries.
LOCAL_NAMES: Final = ("localhost", "127.0.0.1", "::1")
#: A certificate closer than this to expiry is replaced instead of reused.
RENEW_BEFORE: Final = timedelta(days=30)
_DNS_NAME = re.compile(
    r"(?=.{1,253}$)(\*\.)?([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*"
)


@dataclass(frozen=True, slots=True)
class SelfSignedFiles:
    """Paths written by :func:`make_self_signed`."""

    ca_cert: Path
    cert: Path
    key: Path


def make_self_signed(
    directory: Path,
    *,
    sans: Sequence[str] = (),
    valid_days: int = 365,
    now: datetime | None = None,
) -> SelfSignedFiles:
    """Create a CA and a serving certificate in ``directory`` (or reuse valid ones covering ``sans``).

    Files: ``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key`` (keys mode 0600). Raises :class:`InputError` for
    a SAN that is neither a DNS name nor an IP address, and for a ``directory`` that is a file or where the
    files cannot be written.
    """
    names = _normalise_names([*LOCAL_NAMES, *sans])
    now = now or datetime.now(UTC)
    if directory.exists() and not directory.is_dir():
        raise InputError("--self-signed names a file, not a folder", location=str(directory))
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(
            f"cannot make the certificate folder: {error.strerror}", location=str(directory)
        ) from None
    files = SelfSignedFiles(directory / "ca.crt", directory / "tls.crt", directory / "tls.key")
    ca_key_path = directory / "ca.key"

    ca = _load_pair(files.ca_cert, ca_key_path)
    if ca is None or not _fresh(ca[0], now):
        ca = _new_ca(now, valid_days + 365)
        _write(ca_key_path, _key_pem(ca[1]), private=True)
        _write(files.ca_cert, ca[0].public_bytes(serialization.Encoding.PEM))
    ca_cert, ca_key = ca

    leaf = _load_pair(files.cert, files.key)
    if leaf is not None and _fresh(leaf[0], now) and _covers(leaf[0], names) and _issued_by(leaf[0], ca_cert):
        return files
    cert, key = _new_leaf(ca_cert, ca_key, names, now, valid_days)
    # Key first: a reloader that sees the new certificate with the old key rejects the pair and retries.
    _write(files.key, _key_pem(key), private=True)
    _write(files.cert, cert.public_bytes(serialization.Encoding.PEM))
    return files


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    """A server ``SSLContext`` as the API server expects it: TLS 1.2 or newer, ALPN ``http/1.1``.

    Raises :class:`InputError` when the pair does not load.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as error:
        raise InputError(
            f"cannot load the TLS certificate and key: {error}",
            location=f"{cert}, {key}",
            hint="--tls-cert is a PEM certificate chain and --tls-key its PEM private key",
        ) from None
    return context


def certificate_not_after(cert: Path) -> datetime | None:
    """Expiry of the first certificate in the PEM file, or ``None`` if it cannot be read."""
    try:
        return _not_after(cert.read_bytes())
    except OSError:
        return None


def _not_after(pem: bytes) -> datetime | None:
    try:
        return x509.load_pem_x509_certificate(pem).not_valid_after_utc
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class _Candidate:
    """A changed pair that loads: the bytes to put in force."""

    pem: bytes
    fingerprint: str
    not_after: datetime | None


@dataclass(frozen=True, slots=True)
class _Refusal:
    """Why changed files cannot go live; ``fingerprint`` (when known) keeps them from being reported again."""

    message: str
    fingerprint: str | None


ReloadCallback = Callable[[bool, str | None], None]
"""Called as ``callback(succeeded, error_message)`` after every attempt to load changed files."""


class CertificateReloader:
    """Polls a certificate/key pair and swaps it into a live ``SSLContext`` when it changes."""

    def __init__(
        self,
        context: ssl.SSLContext,
        cert: Path,
        key: Path,
        *,
        on_reload: ReloadCallback | None = None,
    ) -> None:
        self.context = context
        self.cert = cert
        self.key = key
        self._on_reload = on_reload
        self._fingerprint = self._read_fingerprint()
        self.last_error: str | None = None
        self.not_after = certificate_not_after(cert)

    async def check(self) -> bool | None:
        """Reload if the files changed: True when a new pair went live, False when it was refused.

        ``None`` when nothing changed. The files are read and checked in a thread; the pair is loaded into
        the live context on the calling (event loop) thread, never while a handshake uses it.
        """
        candidate = await asyncio.to_thread(self._read_pair)
        if candidate is None:
            return None
        if isinstance(candidate, _Refusal):
            return self._refused(candidate.message, candidate.fingerprint)
        try:
            with _pem_file(candidate.pem) as combined:
                self.context.load_cert_chain(combined)
        except (OSError, ssl.SSLError) as error:
            return self._refused(
                f"new certificate refused, the previous one stays in force: {error}", candidate.fingerprint
            )
        self._fingerprint = candidate.fingerprint
        self.last_error = None
        self.not_after = candidate.not_after
        _log.info(
            "TLS certificate reloaded", extra={"cert": str(self.cert), "not_after": str(self.not_after)}
        )
        if self._on_reload is not None:
            self._on_reload(True, None)
        return True

    async def watch(self, interval: float) -> None:
        """Check every ``interval`` seconds until cancelled.

        An attempt that fails in an unexpected way is logged and counted as a refused reload, and the next
        poll tries again: the watch goes on, and the pair in force stays.
        """
        while True:
            await asyncio.sleep(interval)
            try:
                await self.check()
            except Exception as error:  # the watch must outlive any one attempt
                # No fingerprint: the same files are tried again at the next poll.
                message = f"certificate reload failed: {type(error).__name__}: {error}"
                self._refused(message, None, error)

    def _read_pair(self) -> _Candidate | _Refusal | None:
        """Read the files and check that they form a pair (blocking: runs in a thread)."""
        try:
            cert_pem, key_pem = self.cert.read_bytes(), self.key.read_bytes()
        except OSError as error:
            return _Refusal(f"cannot read {error.filename}: {error.strerror}", None)
        fingerprint = hashlib.sha256(cert_pem + b"\0" + key_pem).hexdigest()
        if fingerprint == self._fingerprint:
            return None
        # Exactly the bytes that were checked go live, whatever happens on disk meanwhile.
        pem = cert_pem + b"\n" + key_pem
        try:
            with _pem_file(pem) as combined:
                ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(combined)
        except (OSError, ssl.SSLError) as error:
            return _Refusal(f"new certificate refused, the previous one stays in force: {error}", fingerprint)
        return _Candidate(pem, fingerprint, _not_after(cert_pem))

    def _refused(self, message: str, fingerprint: str | None, error: Exception | None = None) -> bool:
        # Remember the refused content so that one bad pair is reported once, not every poll.
        if fingerprint is not None:
            self._fingerprint = fingerprint
        if message != self.last_error:
            _log.error(message, exc_info=error, extra={"cert": str(self.cert), "key": str(self.key)})
        self.last_error = message
        if self._on_reload is not None:
            self._on_reload(False, message)
        return False

    def _read_fingerprint(self) -> str | None:
        try:
            return hashlib.sha256(self.cert.read_bytes() + b"\0" + self.key.read_bytes()).hexdigest()
        except OSError:
            return None


@contextlib.contextmanager
def _pem_file(data: bytes) -> Iterator[Path]:
    # ssl only loads keys from files: an anonymous in-memory file keeps the key off the disk (Linux).
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("trtguard-tls", 0)
        try:
            os.write(fd, data)
            yield Path(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="trtguard-tls-") as folder:
        path = Path(folder) / "pair.pem"
        path.touch(mode=0o600)
        path.write_bytes(data)
        yield path


def _normalise_names(names: Sequence[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for raw in names:
        name = raw.strip().lower().rstrip(".")
        try:
            ipaddress.ip_address(name)
        except ValueError:
            if not _DNS_NAME.fullmatch(name):
                raise InputError(
                    f"{raw!r} is neither a DNS name nor an IP address",
                    location="--san",
                    hint="give Service names such as trtguard.trtguard.svc",
                ) from None
        seen.setdefault(name, None)
    return tuple(seen)


def _general_names(names: Sequence[str]) -> list[x509.GeneralName]:
    result: list[x509.GeneralName] = []
    for name in names:
        try:
            result.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            result.append(x509.DNSName(name))
    return result


def _covers(cert: x509.Certificate, names: Sequence[str]) -> bool:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    present = {n.lower() for n in san.get_values_for_type(x509.DNSName)}
    present |= {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}
    return all(str(ipaddress.ip_address(n)) in present if _is_ip(n) else n in present for n in names)


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _fresh(cert: x509.Certificate, now: datetime) -> bool:
    return cert.not_valid_before_utc <= now and cert.not_valid_after_utc - RENEW_BEFORE > now


def _issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _load_pair(cert: Path, key: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None:
    try:
        certificate = x509.load_pem_x509_certificate(cert.read_bytes())
        private = serialization.load_pem_private_key(key.read_bytes(), password=None)
    except (OSError, ValueError, TypeError):
        return None
    if not isinstance(private, ec.EllipticCurvePrivateKey):
        return None
    if certificate.public_key() != private.public_key():
        return None
    return certificate, private


def _key_usage(*, signs_certificates: bool) -> x509.KeyUsage:
    """A CA's key signs certificates (and CRLs) only; a serving certificate's key only signs handshakes."""
    return x509.KeyUsage(
        digital_signature=not signs_certificates,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=signs_certificates,
        crl_sign=signs_certificates,
        encipher_only=False,
        decipher_only=False,
    )


def _new_ca(now: datetime, days: int) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "trtguard local CA")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(signs_certificates=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _new_leaf(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    names: Sequence[str],
    now: datetime,
    days: int,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    dns = [n for n in names if not _is_ip(n)]
    # The CN is informational only (clients match SANs); pick the most specific Service name.
    common_name = max(dns, key=lambda n: (n.count("."), len(n))) if dns else names[0]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(min(now + timedelta(days=days), ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(signs_certificates=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(_general_names(names)), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),  # type: ignore[arg-type]
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _write(path: Path, data: bytes, *, private: bool = False) -> None:
    # Write beside the target and rename over it: a reader never sees half a file.
    try:
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except OSError as error:
        raise InputError(
            f"cannot write the certificate files: {error.strerror}", location=str(path)
        ) from None
    try:
        os.fchmod(fd, 0o600 if private else 0o644)
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
        Path(temporary).replace(path)
    except BaseException as error:
        Path(temporary).unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise InputError(
                f"cannot write the certificate files: {error.strerror}", location=str(path)
            ) from None
        raise

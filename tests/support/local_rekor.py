"""A transparency log and a Fulcio CA made here, for tests: real keys, a real Merkle tree, signed checkpoints,
SETs, certificates and SCTs.

``LocalLog`` writes what a Rekor v1 instance returns, in the Sigstore bundle's form (``tlogEntries`` items):
the entry body, the SET over ``{body, integratedTime, logID, logIndex}`` (RFC 8785), and an RFC 6962
inclusion proof to a tree of several entries with a checkpoint signed as Rekor v1 signs it. ``trusted_root``
writes a ``trusted_root.json`` naming the log, so the command line can be pointed at it.

``LocalFulcio`` issues what Fulcio issues: a short-lived code-signing certificate for an OIDC identity
(issuer extensions v1 and v2, critical SAN, empty subject) under an intermediate and a root, with an SCT of
its own CT log embedded (RFC 6962 precertificate entry); ``trusted_root`` adds the CA and the CT log to a
log's trusted root.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from datetime import UTC, datetime, timedelta
from typing import Any

import rfc8785
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from verifier.crypto._keys import PrivateKey, PublicKey


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _leaf(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def merkle_root(leaves: list[bytes]) -> bytes:
    """RFC 6962 Merkle tree hash over leaf hashes."""
    if len(leaves) == 1:
        return leaves[0]
    split = 1 << ((len(leaves) - 1).bit_length() - 1)
    return hashlib.sha256(b"\x01" + merkle_root(leaves[:split]) + merkle_root(leaves[split:])).digest()


def audit_path(index: int, leaves: list[bytes]) -> list[bytes]:
    """RFC 6962 audit path of leaf ``index``, leaf to root."""
    if len(leaves) == 1:
        return []
    split = 1 << ((len(leaves) - 1).bit_length() - 1)
    if index < split:
        return [*audit_path(index, leaves[:split]), merkle_root(leaves[split:])]
    return [*audit_path(index - split, leaves[split:]), merkle_root(leaves[:split])]


class LocalLog:
    """A Rekor v1-style log signed by ``key``; entries land among ``filler`` other entries."""

    def __init__(
        self, key: PrivateKey, *, host: str = "rekor.local", tree_id: int = 42, filler: int = 6
    ) -> None:
        self.key = key
        self.host = host
        self.origin = f"{host} - {tree_id}"
        self.leaves = [_leaf(b"other entry %d" % i) for i in range(filler)]

    @property
    def log_id(self) -> bytes:
        return bytes.fromhex(self.key.public_key().key_id)

    def checkpoint(self, size: int, root: bytes) -> str:
        note = f"{self.origin}\n{size}\n{b64(root)}\n"
        hint = hashlib.sha256(self.key.public_key().to_der()).digest()[:4]
        return f"{note}\n\u2014 {self.host} {b64(hint + self.key.sign(note.encode()))}\n"

    def entry(
        self,
        body: dict[str, Any],
        *,
        integrated_time: int = 1_700_000_000,
        promise: bool = True,
        proof: bool = True,
    ) -> dict[str, Any]:
        """Append ``body`` (a Rekor ``ProposedEntry``) and return its bundle ``tlogEntries`` item."""
        raw = json.dumps(body, separators=(",", ":")).encode()
        index = len(self.leaves)
        self.leaves.append(_leaf(raw))
        self.leaves.append(_leaf(b"a later entry %d" % index))  # the entry is not the last leaf
        entry: dict[str, Any] = {
            "logIndex": str(1000 + index),  # a global index, as a sharded Rekor v1 reports it
            "logId": {"keyId": b64(self.log_id)},
            "kindVersion": {"kind": body["kind"], "version": body["apiVersion"]},
            "integratedTime": str(integrated_time),
            "canonicalizedBody": b64(raw),
        }
        if promise:
            signed = rfc8785.dumps(
                {
                    "body": b64(raw),
                    "integratedTime": integrated_time,
                    "logID": self.log_id.hex(),
                    "logIndex": 1000 + index,
                }
            )
            entry["inclusionPromise"] = {"signedEntryTimestamp": b64(self.key.sign(signed))}
        if proof:
            root = merkle_root(self.leaves)
            entry["inclusionProof"] = {
                "logIndex": str(index),
                "rootHash": b64(root),
                "treeSize": str(len(self.leaves)),
                "hashes": [b64(node) for node in audit_path(index, self.leaves)],
                "checkpoint": {"envelope": self.checkpoint(len(self.leaves), root)},
            }
        return entry

    def trusted_root(self, *, start: str = "2020-01-01T00:00:00Z", end: str | None = None) -> dict[str, Any]:
        """A ``trusted_root.json`` whose only content is this log."""
        valid_for = {"start": start} | ({"end": end} if end else {})
        return {
            "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
            "tlogs": [
                {
                    "baseUrl": f"https://{self.host}",
                    "hashAlgorithm": "SHA2_256",
                    "publicKey": {
                        "rawBytes": b64(self.key.public_key().to_der()),
                        "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                        "validFor": valid_for,
                    },
                    "logId": {"keyId": b64(self.log_id)},
                }
            ],
        }


def hashedrekord(digest: bytes, signature: bytes, public_pem: bytes) -> dict[str, Any]:
    """A ``hashedrekord`` 0.0.1 body: the artifact's SHA-256, the signature and the signer's PEM."""
    return {
        "apiVersion": "0.0.1",
        "kind": "hashedrekord",
        "spec": {
            "data": {"hash": {"algorithm": "sha256", "value": digest.hex()}},
            "signature": {"content": b64(signature), "publicKey": {"content": b64(public_pem)}},
        },
    }


def dsse_entry(payload: bytes, signatures: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    """A ``dsse`` 0.0.1 body: the payload's SHA-256 and each (signature, verifier PEM)."""
    return {
        "apiVersion": "0.0.1",
        "kind": "dsse",
        "spec": {
            "payloadHash": {"algorithm": "sha256", "value": hashlib.sha256(payload).hexdigest()},
            "signatures": [{"signature": b64(sig), "verifier": b64(pem)} for sig, pem in signatures],
        },
    }


#: The OIDC issuer and identity ``LocalFulcio`` certifies unless told otherwise.
OIDC_ISSUER = "https://issuer.local"
IDENTITY = "https://github.com/example/repo/.github/workflows/build.yml@refs/heads/main"
_ISSUER_V1 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.1")
_ISSUER_V2 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.8")
_SCT_LIST = x509.ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")


def _der_length(length: int) -> bytes:
    if length < 0x80:
        return bytes([length])
    encoded = length.to_bytes((length.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(encoded)]) + encoded


def _der(tag: int, content: bytes) -> bytes:
    return bytes([tag]) + _der_length(len(content)) + content


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


class LocalFulcio:
    """A Fulcio-like CA (root and intermediate) and the CT log whose SCTs its certificates embed."""

    def __init__(self, *, start: datetime = datetime(2023, 1, 1, tzinfo=UTC)) -> None:
        self.start = start
        self.root_key = ec.generate_private_key(ec.SECP384R1())
        self.intermediate_key = ec.generate_private_key(ec.SECP384R1())
        self.ct_key = PrivateKey(ec.generate_private_key(ec.SECP256R1()))
        self.root = self._ca(
            _name("local fulcio root"), self.root_key, self.root_key, _name("local fulcio root")
        )
        self.intermediate = self._ca(
            _name("local fulcio intermediate"), self.intermediate_key, self.root_key, self.root.subject, 0
        )

    def _ca(
        self,
        subject: x509.Name,
        key: ec.EllipticCurvePrivateKey,
        issuer_key: ec.EllipticCurvePrivateKey,
        issuer: x509.Name,
        path_length: int | None = None,
    ) -> x509.Certificate:
        public = key.public_key()
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(self.start)
            .not_valid_after(self.start + timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=path_length), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=False,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False
            )
            .sign(issuer_key, hashes.SHA384())
        )

    @property
    def ct_log_id(self) -> bytes:
        return bytes.fromhex(self.ct_key.public_key().key_id)

    def _sct(self, tbs_precertificate: bytes, moment: datetime) -> bytes:
        """One SignedCertificateTimestamp (RFC 6962 §3.2) over a precertificate entry, TLS-encoded."""
        millis = (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
        issuer_key_hash = hashlib.sha256(
            self.intermediate.public_key().public_bytes(
                serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        ).digest()
        signed = (
            struct.pack(">BBQH", 0, 0, millis, 1)
            + issuer_key_hash
            + len(tbs_precertificate).to_bytes(3, "big")
            + tbs_precertificate
            + struct.pack(">H", 0)
        )
        signature = self.ct_key.sign(signed)
        # version, log id, timestamp, no extensions, SHA-256 (4) with ECDSA (3), signature
        return (
            bytes([0])
            + self.ct_log_id
            + struct.pack(">QH", millis, 0)
            + bytes([4, 3])
            + struct.pack(">H", len(signature))
            + signature
        )

    def certificate(
        self,
        key: PublicKey,
        *,
        identity: str = IDENTITY,
        issuer: str = OIDC_ISSUER,
        not_before: datetime = datetime(2023, 11, 14, 22, 10, tzinfo=UTC),
        sct_time: datetime | None = None,
        extensions: tuple[x509.ExtensionType, ...] = (),
        san: x509.ExtensionType | None = None,
    ) -> x509.Certificate:
        """A ten-minute code-signing certificate for ``identity`` (a URI, or an e-mail when it has an ``@``
        and no scheme) with an embedded SCT dated ``sct_time`` (default: ``not_before``). ``san`` replaces the
        SAN extension; ``extensions`` are added before the SCT."""
        name: x509.GeneralName = (
            x509.RFC822Name(identity) if "://" not in identity else x509.UniformResourceIdentifier(identity)
        )
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([]))
            .issuer_name(self.intermediate.subject)
            .public_key(key.crypto)
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_before + timedelta(minutes=10))
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.crypto), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.intermediate_key.public_key()),
                critical=False,
            )
            .add_extension(san or x509.SubjectAlternativeName([name]), critical=True)
            .add_extension(x509.UnrecognizedExtension(_ISSUER_V1, issuer.encode()), critical=False)
            .add_extension(
                x509.UnrecognizedExtension(_ISSUER_V2, _der(0x0C, issuer.encode())), critical=False
            )
        )
        for extension in extensions:
            builder = builder.add_extension(extension, critical=False)
        # The SCT signs the certificate without its SCT list (the precertificate's TBS): sign that first.
        precertificate = builder.sign(self.intermediate_key, hashes.SHA384())
        sct = self._sct(precertificate.tbs_certificate_bytes, sct_time or not_before)
        sct_list = struct.pack(">H", len(sct) + 2) + struct.pack(">H", len(sct)) + sct
        return builder.add_extension(
            x509.UnrecognizedExtension(_SCT_LIST, _der(0x04, sct_list)), critical=False
        ).sign(self.intermediate_key, hashes.SHA384())

    def trusted_root(
        self, log: LocalLog, *, ct_start: str = "2020-01-01T00:00:00Z", ct_end: str | None = None
    ) -> dict[str, Any]:
        """``log``'s trusted root with this CA and its CT log (valid from ``ct_start`` to ``ct_end``)."""
        root = log.trusted_root()
        root["certificateAuthorities"] = [
            {
                "subject": {"organization": "local", "commonName": "local fulcio"},
                "certChain": {
                    "certificates": [
                        {"rawBytes": b64(certificate.public_bytes(serialization.Encoding.DER))}
                        for certificate in (self.intermediate, self.root)
                    ]
                },
                "validFor": {"start": "2020-01-01T00:00:00Z"},
            }
        ]
        root["ctlogs"] = [
            {
                "baseUrl": "https://ct.local",
                "hashAlgorithm": "SHA2_256",
                "publicKey": {
                    "rawBytes": b64(self.ct_key.public_key().to_der()),
                    "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                    "validFor": {"start": ct_start} | ({"end": ct_end} if ct_end else {}),
                },
                "logId": {"keyId": b64(self.ct_log_id)},
            }
        ]
        return root


def keyless_bundle(
    certificate: x509.Certificate, signer: PrivateKey, artifact: bytes, log: LocalLog, *, integrated_time: int
) -> dict[str, Any]:
    """A v0.3 keyless message-signature bundle over ``artifact``, its entry (promise and proof) in ``log``."""
    digest = hashlib.sha256(artifact).digest()
    signature = signer.sign(artifact)
    pem = certificate.public_bytes(serialization.Encoding.PEM)
    entry = log.entry(hashedrekord(digest, signature, pem), integrated_time=integrated_time)
    return {
        "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
        "verificationMaterial": {
            "certificate": {"rawBytes": b64(certificate.public_bytes(serialization.Encoding.DER))},
            "tlogEntries": [entry],
        },
        "messageSignature": {
            "messageDigest": {"algorithm": "SHA2_256", "digest": b64(digest)},
            "signature": b64(signature),
        },
    }

"""A conformance harness for Notary Project verification: what the specification and notation-go say each
case must give (accept or refuse), against what trtguard gives.

Two suites: ``spec`` (envelopes, certificates and trust stores built here from the specification's text:
signature-specification.md, signature-envelope-jws.md / -cose.md, trust-store-trust-policy.md) and
``notation-go`` (notation-go's and notation-core-go's own test data, tests/data/notation-go/SOURCES.md, with
the verdicts their tests assert). A case's verdict is trtguard's whole path: trust stores and identities are
loaded the way a policy loads them (a TrustedKeys document on disk), envelopes verified with
``verify_notation`` against the manifest descriptor. A refusal is a :class:`TrtguardError`; anything else
raised is a crash (never a verdict). Only APIs that ``main`` had before issue 25 are used (with a shim for
the descriptor argument), so that ``bench/notation_conformance.py`` can run the same cases against it.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.support import notation_envelopes as envelopes
from tests.support.notary_pki import Issued, Pki, issue, make_pki, new_key, subject
from verifier.base._errors import TrtguardError

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
JWS, COSE = "application/jose+json", "application/cose"
IDENTITY = "x509.subject: C=US, ST=WA, O=Example, CN=Release Signer"
PARTIAL = "x509.subject: C=US, ST=WA, O=Example"
MOCK_IDENTITY = "x509.subject:CN=Notation Test Root,O=Notary,L=Seattle,ST=WA,C=US"
MOCK_DIGEST = "sha256:60043cf45eaebc4c0867fea485a039b598f52fd09fd5b07b0b2d2f88fad9d74e"
STAMPED_DIGEST = "sha256:c0669ef34cdc14332c0f1ab0c2c01acb91d96014b172f1a76f3a39e63d1f0bda"
#: The upstream vectors are judged at a fixed time (their certificates expire).
UPSTREAM_NOW = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Case:
    """One verdict: ``accept`` is what the specification or upstream's test says."""

    suite: str
    name: str
    accept: bool
    run: Callable[[Path], bool]  # given a scratch folder; True accepted, False or TrtguardError refused


@dataclass(frozen=True)
class Outcome:
    case: Case
    accepted: bool | None  # None: it crashed
    detail: str

    @property
    def verdict(self) -> str:
        if self.accepted is None:
            return "crash"
        if self.accepted == self.case.accept:
            return "agree"
        return "false accept" if self.accepted else "false reject"


# ---------------------------------------------------------------- trtguard's path, on main's API as well

_POLICY = """\
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: conformance}
spec:
  images:
    - name: signed
      match: ["*"]
      signatures: {keys: [c/signer]}
"""


def _pem(certificates: Sequence[x509.Certificate]) -> bytes:
    return b"".join(c.public_bytes(Encoding.PEM) for c in certificates)


def policy_trust(
    folder: Path,
    stores: dict[str, list[tuple[str, bytes]]],
    identities: Sequence[str] = (IDENTITY,),
    level: str = "strict",
) -> Any:
    """The Notation trust a TrustedKeys document gives, loaded as ``check`` loads it (refusal: raises)."""
    from policies.loader import load_policy_set  # noqa: PLC0415

    folder.mkdir(parents=True, exist_ok=True)
    names: dict[str, list[str]] = {}
    for kind, files in stores.items():
        for name, data in files:
            (folder / name).write_bytes(data)
            names.setdefault("signingAuthority" if kind == "signingAuthority" else kind, []).append(name)
    keys = {
        "apiVersion": "trtguard.dev/v1alpha1",
        "kind": "TrustedKeys",
        "metadata": {"name": "c"},
        "spec": {
            "keys": [
                {
                    "name": "signer",
                    "notation": {
                        "trustStores": names,
                        "trustedIdentities": list(identities),
                        "registryScopes": ["*"],
                        "verificationLevel": level,
                    },
                }
            ]
        },
    }
    (folder / "keys.yaml").write_text(json.dumps(keys))
    (folder / "policy.yaml").write_text(_POLICY)
    return load_policy_set([folder / "keys.yaml", folder / "policy.yaml"]).signers["c/signer"].notation


def verify(
    envelope: bytes, media_type: str, trust: Any, descriptor: tuple[str, str, int], now: datetime
) -> bool:
    """``verify_notation`` against the artifact ``descriptor`` (media type, digest, size)."""
    from verifier.signatures import notation  # noqa: PLC0415

    signature = notation.NotationSignature(envelope, media_type)
    media, digest, size = descriptor
    options: dict[str, Any] = {"repository": "registry.example/app", "now": now}
    if "descriptor" in inspect.signature(notation.verify_notation).parameters:
        options["descriptor"] = notation.TargetArtifact(media, digest, size)
    else:  # main before issue 25: the digest alone
        options["digest"] = digest
    notation.verify_notation(signature, trust, **options)
    return True


def identities_admit(certificate: x509.Certificate, identities: Sequence[str]) -> bool:
    """notation-go's ``verifyX509TrustedIdentities``: the identities as a policy loads them, matched against
    the leaf's subject."""
    from verifier.signatures.notation import _trust as trust  # noqa: PLC0415

    parse = getattr(trust, "parse_identities", None)
    parsed = parse(identities) if parse else tuple(trust.TrustedIdentity.parse(t) for t in identities)
    if not parsed:
        return False
    if any(i.attributes is None for i in parsed):
        return True
    try:
        found = trust.certificate_subject(certificate)
    except ValueError:
        return False
    return any(i.admits(found) for i in parsed)


# ---------------------------------------------------------------- the specification suite


@dataclass
class _World:
    pki: Pki
    now: datetime
    descriptor: tuple[str, str, int]

    @property
    def target(self) -> dict[str, Any]:
        media, digest, size = self.descriptor
        return {"mediaType": media, "digest": digest, "size": size}

    def sign(
        self,
        media_type: str,
        *,
        leaf: Issued | None = None,
        target: dict[str, Any] | None = None,
        chain_protected: bool = False,
        **headers: Any,
    ) -> bytes:
        leaf = leaf or self.pki.leaf
        chain = [leaf.certificate, self.pki.intermediate.certificate, self.pki.root.certificate]
        body = envelopes.payload(target or self.target)
        if media_type == JWS:
            return envelopes.jws(
                leaf.signing_key, chain, envelopes.jws_headers("ES256", self.now, **headers), body
            )
        protected = envelopes.cose_headers("ES256", self.now, **headers)
        return envelopes.cose(
            leaf.signing_key, chain, protected, body, alg="ES256", chain_protected=chain_protected
        )

    def trust(self, folder: Path, identities: Sequence[str] = (IDENTITY,)) -> Any:
        return policy_trust(folder, {"ca": [("root.crt", self.pki.root.pem())]}, identities)

    def check(self, folder: Path, envelope: bytes, media_type: str, **options: Any) -> bool:
        trust = options.pop("trust", None) or self.trust(folder)
        return verify(envelope, media_type, trust, options.pop("descriptor", self.descriptor), self.now)


PLUGIN_HEADER = "io.cncf.notary.verificationPlugin"
_MIB = 1024 * 1024  # the envelope bound (written here: the harness also judges checkouts without it)


def _rfc3339(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _spec_world() -> _World:
    manifest = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": []}).encode()
    pki = make_pki("ec-p256")
    now = datetime.now(UTC).replace(microsecond=0)
    return _World(pki, now, (OCI_MANIFEST, "sha256:" + hashlib.sha256(manifest).hexdigest(), len(manifest)))


def _spec_cases(w: _World) -> list[Case]:
    root, inter, leaf = w.pki.root, w.pki.intermediate, w.pki.leaf
    media, _, size = w.descriptor
    self_signed = issue(subject("Self Signer"))  # a self-signed signing certificate (not a CA)
    any_eku = w.pki.leaf_for(
        subject("Release Signer"),
        usages=[ExtendedKeyUsageOID.CODE_SIGNING, ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE],
    )
    server_eku = w.pki.leaf_for(subject("Release Signer"), usages=[ExtendedKeyUsageOID.SERVER_AUTH])
    bad_dn = w.pki.leaf_for(subject("Bad=#CN"))
    ca_leaf = issue(subject("Release Signer"), issuer=inter, ca=True, key=new_key())
    other = make_pki()

    def store(kind: str, *files: tuple[str, bytes]) -> Callable[[Path], bool]:
        return lambda folder: policy_trust(folder, {kind: list(files)}) is not None

    def tsa(*files: tuple[str, bytes]) -> Callable[[Path], bool]:
        return lambda folder: (
            policy_trust(folder, {"ca": [("root.crt", root.pem())], "tsa": list(files)}) is not None
        )

    def envelope(media_type: str, **options: Any) -> Callable[[Path], bool]:
        descriptor = options.pop("descriptor", w.descriptor)
        trust_identities = options.pop("identities", (IDENTITY,))
        return lambda folder: w.check(
            folder,
            w.sign(media_type, **options),
            media_type,
            descriptor=descriptor,
            trust=w.trust(folder, trust_identities),
        )

    def concatenated_der(folder: Path) -> bool:
        data = other.root.certificate.public_bytes(Encoding.DER) + root.certificate.public_bytes(Encoding.DER)
        trust = policy_trust(folder, {"ca": [("roots.der", data)]})
        return w.check(folder, w.sign(JWS), JWS, trust=trust)

    def hostile_crit(folder: Path) -> bool:
        return w.check(folder, w.sign(JWS, crit=[["io.cncf.notary.signingScheme"]]), JWS)

    def hostile_cose_alg(folder: Path) -> bool:
        headers = envelopes.cose_headers("ES256", w.now)
        headers[1] = [-7]
        chain = [leaf.certificate, inter.certificate, root.certificate]
        data = envelopes.cose(leaf.signing_key, chain, headers, envelopes.payload(w.target), alg="ES256")
        return w.check(folder, data, COSE)

    def untrusted_root(folder: Path) -> bool:
        trust = policy_trust(folder, {"ca": [("other.crt", other.root.pem())]})
        return w.check(folder, w.sign(JWS), JWS, trust=trust)

    def tampered(folder: Path) -> bool:
        document = json.loads(w.sign(JWS))
        document["signature"] = ("B" if document["signature"][0] == "A" else "A") + document["signature"][1:]
        return w.check(folder, json.dumps(document).encode(), JWS)

    plugin = "nonX509Prefix:my-custom-identity"
    docker = {**w.target, "mediaType": DOCKER_MANIFEST}
    longer = {**w.target, "size": size + 1}
    stamp = {
        envelopes.SIGNING_TIME: _rfc3339(w.now - timedelta(hours=1)),
        envelopes.EXPIRY: _rfc3339(w.now - timedelta(seconds=1)),
        "crit": [envelopes.SCHEME, envelopes.EXPIRY],
    }
    cases = [
        ("ca store: a root CA certificate", True, store("ca", ("root.crt", root.pem()))),
        ("ca store: an intermediate CA certificate", True, store("ca", ("inter.crt", inter.pem()))),
        ("ca store: a self-signed signing certificate", True, store("ca", ("self.crt", self_signed.pem()))),
        ("ca store: a leaf another CA issued", False, store("ca", ("leaf.crt", leaf.pem()))),
        (
            "ca store: a root and a leaf in one file",
            False,
            store("ca", ("both.crt", root.pem() + leaf.pem())),
        ),
        ("signingAuthority store: a leaf", False, store("signingAuthority", ("l.crt", leaf.pem()))),
        ("tsa store: a root CA certificate", True, tsa(("tsa.crt", other.root.pem()))),
        ("tsa store: an intermediate (not self-issued)", False, tsa(("inter.crt", inter.pem()))),
        ("tsa store: a self-signed non-CA certificate", False, tsa(("self.crt", self_signed.pem()))),
        ("ca store: two DER certificates in one file", True, concatenated_der),
        ("JWS: valid", True, envelope(JWS)),
        ("COSE: valid", True, envelope(COSE)),
        ("COSE: x5chain in the protected header", True, envelope(COSE, chain_protected=True)),
        ("JWS: payload size off by one", False, envelope(JWS, target=longer)),
        ("COSE: payload size off by one", False, envelope(COSE, target=longer)),
        ("JWS: Docker media type for an OCI manifest", False, envelope(JWS, target=docker)),
        ("COSE: Docker media type for an OCI manifest", False, envelope(COSE, target=docker)),
        (
            "JWS: payload for another digest",
            False,
            envelope(JWS, descriptor=(media, "sha256:" + "0" * 64, size)),
        ),
        ("leaf with anyExtendedKeyUsage", False, envelope(JWS, leaf=any_eku)),
        ("leaf with serverAuth", False, envelope(JWS, leaf=server_eku)),
        ("leaf that is a CA", False, envelope(JWS, leaf=ca_leaf)),
        (
            "leaf subject CN=Bad=#CN, identity C, ST, O",
            False,
            envelope(JWS, leaf=bad_dn, identities=(PARTIAL,)),
        ),
        ("identities: x509.subject and nonX509Prefix", True, envelope(JWS, identities=(IDENTITY, plugin))),
        ("identities: nonX509Prefix alone", False, envelope(JWS, identities=(plugin,))),
        (
            "identity that does not match",
            False,
            envelope(JWS, identities=("x509.subject: C=US, ST=WA, O=X",)),
        ),
        ("crit holding a list", False, hostile_crit),
        ("COSE alg holding a list", False, hostile_cose_alg),
        ("untrusted root", False, untrusted_root),
        ("signature tampered", False, tampered),
        ("signature expired", False, envelope(JWS, **stamp)),
        # Issue 25: a signature that needs a verification plugin (notation-go refuses the attribute when it
        # is not critical, and the signature without the plugin when it is), and the envelope size bound.
        ("JWS: verificationPlugin not marked critical", False, envelope(JWS, **{PLUGIN_HEADER: "acme"})),
        ("COSE: verificationPlugin not marked critical", False, envelope(COSE, **{PLUGIN_HEADER: "acme"})),
        (
            "JWS: verificationPlugin marked critical",
            False,
            envelope(JWS, **{PLUGIN_HEADER: "acme", "crit": [envelopes.SCHEME, PLUGIN_HEADER]}),
        ),
        ("JWS: envelope above 1 MiB", False, envelope(JWS, **{"x-padding": "x" * _MIB})),
        ("COSE: envelope above 1 MiB", False, envelope(COSE, **{"x-padding": "x" * _MIB})),
    ]
    return [Case("spec", name, accept, run) for name, accept, run in cases]


# ---------------------------------------------------------------- the notation-go suite


def _upstream_cases(data: Path) -> list[Case]:
    stores = data / "truststore"
    mock_root = (data / "ca-NotationTestRoot.pem").read_bytes()
    docker = (DOCKER_MANIFEST, MOCK_DIGEST, 528)

    def store(kind: str, path: Path) -> Callable[[Path], bool]:
        extra = {"ca": [("mock.pem", mock_root)]} if kind == "tsa" else {}
        return lambda folder: (
            policy_trust(folder, {**extra, kind: [(path.name, path.read_bytes())]}) is not None
        )

    def mock(
        name: str, descriptor: tuple[str, str, int] = docker, level: str = "strict"
    ) -> Callable[[Path], bool]:
        def run(folder: Path) -> bool:
            stores = {"ca": [("root.pem", mock_root)], "signingAuthority": [("root.pem", mock_root)]}
            trust = policy_trust(folder, stores, (MOCK_IDENTITY,), level)
            envelope = (data / name).read_bytes()
            return verify(envelope, JWS, trust, descriptor, UPSTREAM_NOW)

        return run

    def stamped(name: str, tsa: str | None = "tsa-globalsignRoot.cer") -> Callable[[Path], bool]:
        def run(folder: Path) -> bool:
            from verifier.signatures.notation._envelope import read_envelope  # noqa: PLC0415

            envelope = (data / name).read_bytes()
            media_type = JWS if envelope.startswith(b"{") else COSE
            signer = read_envelope(envelope, media_type).certificates[-1]
            found = {"ca": [("signer.pem", _pem([signer]))]}
            if tsa:
                found["tsa"] = [(tsa, (data / tsa).read_bytes())]
            trust = policy_trust(folder, found, ("*",))
            return verify(envelope, media_type, trust, (DOCKER_MANIFEST, STAMPED_DIGEST, 528), UPSTREAM_NOW)

        return run

    signing = x509.load_pem_x509_certificate((data / "signing-cert.pem").read_bytes())
    bad = x509.load_pem_x509_certificate((data / "bad-cert.pem").read_bytes())
    plugin = "nonX509Prefix:my-custom-identity"
    table = [  # verifier_test.go TestVerifyX509TrustedIdentities, row by row (wantErr → refuse)
        (signing, ["x509.subject:C=US,O=SomeOrg,ST=WA"], True),
        (signing, ["x509.subject:C=US,O=SomeOrg,ST=WA", plugin], True),
        (signing, ["x509.subject:C=US,O=SomeOrg,ST=WA", "x509.subject:C=IND,O=SomeOrg,ST=TS"], True),
        (signing, [plugin], False),
        (signing, ["*"], True),
        (signing, ["x509.subject:C=IND,O=SomeOrg,ST=TS"], False),
        (signing, ["x509.subject:C=IND,O=SomeOrg,ST=TS", plugin], False),
        (signing, ["x509.subject:C=IND,O=SomeOrg,ST=TS", "x509.subject:C=LOL,O=LOL,ST=LOL"], False),
        (signing, ["x509.subject:C=bad=#identity,O=LOL,ST=LOL"], False),
        (bad, ["x509.subject:C=US,O=SomeOrg,ST=WA", plugin], False),
    ]

    def admits(certificate: x509.Certificate, identities: list[str]) -> Callable[[Path], bool]:
        return lambda _folder: identities_admit(certificate, identities)

    ca, tsa = stores / "ca", stores / "tsa"
    oci = (OCI_MANIFEST, MOCK_DIGEST, 300)  # mocks.go SigManfiestDescriptor: the mock digest, OCI, 300 bytes
    cases = [
        ("ca: non-ca.crt", False, store("ca", ca / "trust-store-with-leaf-certs/non-ca.crt")),
        (
            "ca: RootAndLeafCerts.crt",
            False,
            store("ca", ca / "trust-store-with-leaf-certs-in-single-file/RootAndLeafCerts.crt"),
        ),
        ("ca: invalid", False, store("ca", ca / "trust-store-with-invalid-certs/invalid")),
        ("ca: GlobalSign.der", True, store("ca", ca / "valid-trust-store-2/GlobalSign.der")),
        ("ca: GlobalSignRootCA.crt", True, store("ca", ca / "valid-trust-store-2/GlobalSignRootCA.crt")),
        (
            "ca: openssl-minimum-self-signed.pem",
            True,
            store("ca", ca / "valid-trust-store-self-signed/openssl-minimum-self-signed.pem"),
        ),
        ("ca: notation-core-go multi-der.der (concatenated DER)", True, store("ca", data / "multi-der.der")),
        ("ca: notation-core-go der.der", True, store("ca", data / "der.der")),
        (
            "tsa: test-nonCA/wabbit-networks.io.crt",
            False,
            store("tsa", tsa / "test-nonCA/wabbit-networks.io.crt"),
        ),
        (
            "tsa: test-nonSelfIssued/nonSelfIssued.crt",
            False,
            store("tsa", tsa / "test-nonSelfIssued/nonSelfIssued.crt"),
        ),
        ("tsa: test-timestamp/globalsignRoot.cer", True, store("tsa", data / "tsa-globalsignRoot.cer")),
        *[(f"identities row {n}: {', '.join(i)}", ok, admits(c, i)) for n, (c, i, ok) in enumerate(table)],
        ("ca_valid_sig_env.json", True, mock("ca_valid_sig_env.json")),
        ("sa_valid_sig_env.json", True, mock("sa_valid_sig_env.json")),
        ("ca_valid_sig_env.json for SigManfiestDescriptor", False, mock("ca_valid_sig_env.json", oci)),
        ("ca_expired_sig_env.json at strict", False, mock("ca_expired_sig_env.json")),
        ("sa_expired_sig_env.json at strict", False, mock("sa_expired_sig_env.json")),
        ("ca_expired_sig_env.json at permissive", True, mock("ca_expired_sig_env.json", level="permissive")),
        ("ca_invalid_sig_env.json (padded base64)", False, mock("ca_invalid_sig_env.json")),
        ("ca_plugin_sig_env.json (needs a plugin)", False, mock("ca_plugin_sig_env.json")),
        ("sa_plugin_sig_env.json (needs a plugin)", False, mock("sa_plugin_sig_env.json")),
        ("jwsWithTimestamp.sig", True, stamped("jwsWithTimestamp.sig")),
        ("coseWithTimestamp.sig", True, stamped("coseWithTimestamp.sig")),
        ("jwsExpiredWithTimestamp.sig with a tsa store", True, stamped("jwsExpiredWithTimestamp.sig")),
        ("coseExpiredWithTimestamp.sig with a tsa store", True, stamped("coseExpiredWithTimestamp.sig")),
        ("jwsExpiredWithTimestamp.sig without one", False, stamped("jwsExpiredWithTimestamp.sig", None)),
        ("withoutTimestamp.sig with a tsa store", False, stamped("withoutTimestamp.sig")),
        ("timestampBeforeNotBefore.sig", False, stamped("timestampBeforeNotBefore.sig")),
        ("timestampAfterNotAfter.sig", False, stamped("timestampAfterNotAfter.sig")),
        (
            "coseWithTimestamp.sig, another TSA",
            False,
            stamped("coseWithTimestamp.sig", "tsa-DigiCertTSARootSHA384.cer"),
        ),
    ]
    return [Case("notation-go", name, accept, run) for name, accept, run in cases]


# ---------------------------------------------------------------- running


def cases(data: Path) -> list[Case]:
    """Every case of both suites (``data``: tests/data/notation-go)."""
    return _spec_cases(_spec_world()) + _upstream_cases(data)


def run_case(case: Case) -> Outcome:
    with tempfile.TemporaryDirectory() as scratch:
        try:
            accepted = case.run(Path(scratch))
        except TrtguardError as error:
            return Outcome(case, False, error.message)
        except Exception as error:
            return Outcome(case, None, f"{type(error).__name__}: {error}")
    return Outcome(case, bool(accepted), "")


def table(outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
    """Per suite: cases, agree, false accept, false reject, crash."""
    rows = []
    for suite in dict.fromkeys(o.case.suite for o in outcomes):
        mine = [o for o in outcomes if o.case.suite == suite]
        counts = {
            v: sum(o.verdict == v for o in mine) for v in ("agree", "false accept", "false reject", "crash")
        }
        rows.append({"suite": suite, "cases": len(mine), **counts})
    return rows

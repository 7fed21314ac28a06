"""Notary Project image signatures and GPG-signed build manifests, end to end (issue 19): written with
``trtguard sign --format notation`` and ``attach-attestation --signature`` (signatures by the real gpg) into
a real registry (Debian's docker-registry, no referrers API: the ``sha256-<digest>`` fallback index), judged
by ``trtguard check --registry`` and by ``trtguard serve`` over TLS under policies that require them.

Admitted: a Notation-signed image (JWS and COSE envelopes) and an engine whose build manifest gpg signed.
Denied: the signature missing, tampered, out of its validity period, or by an untrusted identity or key.
Issue 25 adds hostile referrers beside valid signatures, descriptor mismatches, a Notation configuration
directory, the same verdicts from an air-gapped check of a fetched folder, ``--now`` and ``verify-notation``.

Over 500 lines: every case shares one registry world (images, signatures, a GnuPG home), built once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.policies.conftest import manifest_data
from tests.policies.registry_world import pod, run_cli
from tests.support import notation_envelopes as envelopes
from tests.support.gpg import GnuPG
from tests.support.harness import SERVICE, WebhookProcess, review, verify_admission_response
from tests.support.images import push_image, tiny_image
from tests.support.localregistry import LocalRegistry, plain_config, start_registry
from tests.support.notary_pki import NOW, Pki, make_pki, subject
from trtguard.audit.package import ArchiveLimits
from trtguard.audit.package.archive import read_archive
from trtguard.release.cosign_layout import push_referrer
from trtguard.release.publish import RegistryWriter
from verifier.base._deadline import Deadline
from verifier.base._references import ImageReference
from verifier.crypto._keys import encrypt_private_key, generate_private_key
from verifier.manifest import load_manifest, manifest_statement
from verifier.registry.client import RegistryClient
from verifier.signatures.notation import ARTIFACT_TYPE, JWS_MEDIA_TYPE, sign_notation

pytestmark = pytest.mark.registry
DOCKER_V2 = "application/vnd.docker.distribution.manifest.v2+json"

KEYS = """\
apiVersion: trtguard.dev/v1alpha1
kind: TrustedKeys
metadata: {name: platform}
spec:
  keys:
    - name: notary-release
      notation:
        trustStores: {ca: [trust/ca.crt]}
        trustedIdentities: ["x509.subject: C=US, ST=WA, O=Example, CN=Release Signer"]
        registryScopes: ["*"]
        verificationLevel: strict
    - name: gpg-build
      openpgp: {file: trust/build.asc}
    - name: notary-config
      notationConfig: {directory: notation}
"""
POLICY = """\
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: formats}
spec:
  match: {namespaces: [prod]}
  images:
    - name: notary-images
      fields: [container]
      match: ["HOST/notary/*"]
      signatures: {keys: [platform/notary-release]}
    - name: notation-config-images
      fields: [container]
      match: ["HOST/config/*"]
      signatures: {keys: [platform/notary-config]}
    - name: engines
      fields: [volume]
      match: ["HOST/models/*"]
      requireDigest: true
  models:
    buildManifest: {keys: [platform/gpg-build]}
"""


@dataclass
class Case:
    image: str
    engine: str | None
    allowed: bool
    reason: str = ""  # a piece of the violation's message when denied


@dataclass
class World:
    root: Path
    config: Path
    policies: Path
    cases: dict[str, Case]


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    running = start_registry(tmp_path_factory.mktemp("formats-registry"), http={}, auth=None)
    yield running
    running.stop()


def _sign_notation(root: Path, config: Path, image: str, signer: Any, chain: Any, *extra: str) -> None:
    cert, key = signer.write(root, f"signer-{abs(hash(image))}")
    chain_file = root / f"chain-{abs(hash(image))}.pem"
    chain_file.write_bytes(b"".join(c.public_bytes(Encoding.PEM) for c in chain))
    status, out, err = run_cli(
        "sign", image, "--format", "notation", "--key", key, "--certificate", cert,
        "--certificate-chain", chain_file, "--registry-config", config, *extra,
    )  # fmt: skip
    assert status == 0, err
    assert "Notary Project" in out


def _push_engine(root: Path, config: Path, host: str, name: str, engine: bytes) -> str:
    path = root / f"{name}.plan"
    path.write_bytes(engine)
    status, out, err = run_cli(
        "push-engine", path, "--to", f"{host}/models/{name}:v1", "--registry-config", config
    )
    assert status == 0, err
    return out.strip()


def _attach_gpg(
    root: Path, config: Path, engine_ref: str, statement: bytes, signature: bytes, name: str
) -> None:
    (root / f"{name}.json").write_bytes(statement)
    (root / f"{name}.json.asc").write_bytes(signature)
    status, _, err = run_cli(
        "attach-attestation", root / f"{name}.json", "--signature", root / f"{name}.json.asc",
        "--to", engine_ref, "--registry-config", config,
    )  # fmt: skip
    assert status == 0, err


def _statement(engine: bytes) -> bytes:
    return manifest_statement(load_manifest(manifest_data(engine), "test")).to_json()


@pytest.fixture(scope="module")
def world(registry: LocalRegistry, tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("formats")
    host = registry.host
    policies = root / "policies"  # the policy, the keys and their trust files: one --policies folder
    (policies / "trust").mkdir(parents=True)
    config = root / "registries.yaml"
    config.write_text(f'registries:\n  "{host}":\n    plain_http: true\n')
    pki = make_pki("rsa-3072")
    (policies / "trust" / "ca.crt").write_bytes(pki.root.pem())
    home = root / "gnupg"
    home.mkdir(mode=0o700)
    gpg = GnuPG(home)
    t0 = NOW - timedelta(days=30)
    build = gpg.generate("build <build@example.com>", "ed25519", at=t0)
    stranger = gpg.generate("stranger <stranger@example.com>", "nistp256", at=t0)
    late = gpg.generate("late <late@example.com>", "rsa3072", at=t0)
    (policies / "trust" / "build.asc").write_bytes(gpg.export(build))

    images = ["signed", "signed-cose", "unsigned", "tampered", "expired", "expired-now", "signature-expired"]
    images += ["stranger", "other-ca", "base", "hostile-beside", "hostile", "size", "media-type", "any-eku"]
    images += ["cose-protected"]

    async def push() -> None:
        async with RegistryClient(plain_config(host)) as client:
            for name in images:
                await push_image(client, ImageReference.parse(f"{host}/notary/{name}:v1"), tiny_image(name))
            for name in ("app", "other"):
                await push_image(client, ImageReference.parse(f"{host}/config/{name}:v1"), tiny_image(name))

    asyncio.run(push())
    ref = {name: f"{host}/notary/{name}:v1" for name in images}
    chain = pki.chain[1:]
    _sign_notation(root, config, ref["signed"], pki.leaf, chain)
    _sign_notation(root, config, ref["base"], pki.leaf, chain)
    _sign_notation(root, config, ref["signed-cose"], pki.leaf, chain, "--envelope", "cose")
    expired = pki.leaf_for(
        subject("Release Signer", unit="Builds"),
        not_before=NOW - timedelta(days=10),
        not_after=NOW - timedelta(days=1),
    )
    _sign_notation(root, config, ref["expired"], expired, chain)
    _sign_notation(root, config, ref["stranger"], pki.leaf_for(subject("Someone Else")), chain)
    other: Pki = make_pki()
    _sign_notation(root, config, ref["other-ca"], other.leaf, other.chain[1:])
    _push_notation(host, ref["tampered"], pki.leaf, pki.chain, tamper=True)
    _push_notation(
        host, ref["expired-now"], expired, [expired.certificate, *chain], signing_time=NOW - timedelta(days=5)
    )
    _push_notation(
        host, ref["signature-expired"], pki.leaf, pki.chain,
        signing_time=NOW - timedelta(hours=2), expiry=NOW - timedelta(hours=1),
    )  # fmt: skip

    engines = {
        name: f"the {name} engine ".encode() * 64
        for name in ("gpg", "none", "gpg-tampered", "gpg-late", "gpg-stranger")
    }
    engine_ref = {name: _push_engine(root, config, host, name, data) for name, data in engines.items()}
    _sign_notation(root, config, engine_ref["gpg"], pki.leaf, chain)  # the evidence package carries it too
    statement = _statement(engines["gpg"])
    _attach_gpg(
        root,
        config,
        engine_ref["gpg"],
        statement,
        gpg.sign(statement, build, at=NOW - timedelta(hours=1)),
        "gpg",
    )
    honest = _statement(engines["gpg-tampered"])
    changed = honest.replace(b'"audit_id":"AUD-1"', b'"audit_id":"AUD-2"')
    assert changed != honest
    _attach_gpg(
        root,
        config,
        engine_ref["gpg-tampered"],
        changed,
        gpg.sign(honest, build, at=NOW - timedelta(hours=1)),
        "tampered",
    )
    statement = _statement(engines["gpg-late"])
    signature = gpg.sign(statement, late, at=t0 + timedelta(days=3))
    gpg.set_expiry(
        late, t0 + timedelta(days=2), at=t0 + timedelta(hours=1)
    )  # the key expired before it signed
    (policies / "trust" / "build.asc").write_bytes(gpg.export(build))
    _attach_gpg(root, config, engine_ref["gpg-late"], statement, signature, "late")
    statement = _statement(engines["gpg-stranger"])
    _attach_gpg(
        root, config, engine_ref["gpg-stranger"], statement, gpg.sign(statement, stranger, at=NOW), "stranger"
    )

    (policies / "keys.yaml").write_text(KEYS)
    with (policies / "keys.yaml").open("a") as keys:  # late is trusted too; it expired before it signed
        keys.write("    - name: gpg-late\n      openpgp: {file: trust/late.asc}\n")
    (policies / "trust" / "late.asc").write_bytes(gpg.export(late))
    (policies / "policy.yaml").write_text(
        POLICY.replace("HOST", host).replace(
            "keys: [platform/gpg-build]", "keys: [platform/gpg-build, platform/gpg-late]"
        )
    )
    # Issue 25: hostile evidence beside a valid signature, the whole descriptor, anyExtendedKeyUsage, a COSE
    # chain in the protected header (pushed with attach-attestation), a Notation configuration directory.
    _sign_notation(root, config, ref["hostile-beside"], pki.leaf, chain)
    for name in ("hostile-beside", "hostile"):
        headers = envelopes.jws_headers("PS384", NOW, crit=[["io.cncf.notary.signingScheme"]])
        target = _descriptor(host, ref[name])
        _push_envelope(
            host,
            ref[name],
            envelopes.jws(pki.leaf.signing_key, pki.chain, headers, envelopes.payload(target)),
        )
    _push_notation(host, ref["size"], pki.leaf, pki.chain, descriptor_change={"size": 1})
    _push_notation(host, ref["media-type"], pki.leaf, pki.chain, descriptor_change={"mediaType": DOCKER_V2})
    any_eku = pki.leaf_for(
        subject("Release Signer"),
        usages=[ExtendedKeyUsageOID.CODE_SIGNING, ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE],
    )
    _push_notation(host, ref["any-eku"], any_eku, [any_eku.certificate, *chain])
    protected = envelopes.cose(
        pki.leaf.signing_key, pki.chain, envelopes.cose_headers("PS384", NOW),
        envelopes.payload(_descriptor(host, ref["cose-protected"])), alg="PS384", chain_protected=True,
    )  # fmt: skip
    (root / "protected.cose").write_bytes(protected)
    status, _, err = run_cli(
        "attach-attestation",
        root / "protected.cose",
        "--to",
        ref["cose-protected"],
        "--registry-config",
        config,
    )
    assert status == 0, err
    config_ref = {name: f"{host}/config/{name}:v1" for name in ("app", "other")}
    for image in config_ref.values():
        _sign_notation(root, config, image, pki.leaf, chain)
    _notation_config(policies / "notation", pki, f"{host}/config/app")  # never read as a policy document

    base = ref["base"]
    cases = {
        "notation-jws": Case(ref["signed"], None, True),
        "notation-cose": Case(ref["signed-cose"], None, True),
        "notation-missing": Case(ref["unsigned"], None, False, "no signature found"),
        "notation-tampered": Case(ref["tampered"], None, False, "signature does not verify"),
        "notation-signed-after-certificate-expired": Case(
            ref["expired"], None, False, "at the claimed signing time"
        ),
        "notation-certificate-expired-since": Case(
            ref["expired-now"], None, False, "no authentic timestamp covers the signing"
        ),
        "notation-signature-expired": Case(ref["signature-expired"], None, False, "the signature expired at"),
        "notation-untrusted-identity": Case(
            ref["stranger"], None, False, "matches none of the trusted identities"
        ),
        "notation-untrusted-root": Case(
            ref["other-ca"], None, False, "no certificate of the signer's 'ca' trust store"
        ),
        "notation-hostile-beside-valid": Case(ref["hostile-beside"], None, True),
        "notation-hostile-alone": Case(
            ref["hostile"], None, False, '"crit" lists something other than header'
        ),
        "notation-descriptor-size": Case(ref["size"], None, False, "the signed descriptor of"),
        "notation-descriptor-media-type": Case(ref["media-type"], None, False, "media type"),
        "notation-any-eku": Case(ref["any-eku"], None, False, "must not contain anyExtendedKeyUsage"),
        "notation-cose-protected-chain": Case(ref["cose-protected"], None, True),
        "notation-config-scope": Case(config_ref["app"], None, True),
        "notation-config-wildcard": Case(
            config_ref["other"], None, False, "matches none of the trusted identities"
        ),
        "gpg-manifest": Case(base, engine_ref["gpg"], True),
        "gpg-missing": Case(base, engine_ref["none"], False, "no build manifest attestation found"),
        "gpg-tampered": Case(
            base, engine_ref["gpg-tampered"], False, "not a valid signature over these bytes"
        ),
        "gpg-expired-key": Case(base, engine_ref["gpg-late"], False, "expired"),
        "gpg-untrusted-key": Case(
            base, engine_ref["gpg-stranger"], False, "not a valid signature over these bytes"
        ),
    }
    return World(root, config, policies, cases)


def _descriptor(host: str, image: str) -> dict[str, Any]:
    """The descriptor the registry serves for ``image``'s manifest."""

    async def go() -> dict[str, Any]:
        async with RegistryClient(plain_config(host)) as client:
            pinned = ImageReference.parse(image)
            pinned = pinned.with_digest(await client.resolve(pinned, Deadline.after(30)))
            target = (await client.get_manifest(pinned, Deadline.after(30))).descriptor
            return {"mediaType": target.media_type, "digest": target.digest, "size": target.size}

    return asyncio.run(go())


def _push_envelope(host: str, image: str, envelope: bytes, media_type: str = JWS_MEDIA_TYPE) -> None:
    """Any bytes as a Notary Project signature referrer of ``image`` (a hostile one too)."""

    async def go() -> None:
        async with RegistryClient(plain_config(host)) as client:
            pinned = ImageReference.parse(image)
            pinned = pinned.with_digest(await client.resolve(pinned, Deadline.after(30)))
            target = (await client.get_manifest(pinned, Deadline.after(30))).descriptor
            await push_referrer(
                RegistryWriter(client), pinned, target, artifact_type=ARTIFACT_TYPE, blob=envelope,
                blob_media_type=media_type, deadline=Deadline.after(30),
            )  # fmt: skip

    asyncio.run(go())


def _notation_config(folder: Path, pki: Pki, scope: str) -> None:
    """A Notation configuration directory as `notation` lays it out: the statement for ``scope`` trusts the
    release signer; the wildcard one trusts someone else."""
    store = folder / "truststore" / "x509" / "ca" / "release"
    store.mkdir(parents=True)
    (store / "root.crt").write_bytes(pki.root.pem())
    statement = {
        "name": "app",
        "registryScopes": [scope],
        "signatureVerification": {"level": "strict"},
        "trustStores": ["ca:release"],
        "trustedIdentities": [
            "x509.subject: C=US, ST=WA, O=Example, CN=Release Signer",
            "nonX509Prefix:plugin",
        ],
    }
    others = {**statement, "name": "others", "registryScopes": ["*"]}
    others["trustedIdentities"] = ["x509.subject: C=US, ST=WA, O=Example, CN=Someone Else"]
    document = {"version": "1.0", "trustPolicies": [statement, others]}
    (folder / "trustpolicy.json").write_text(json.dumps(document))  # v1.0, as `notation` writes it


def _push_notation(
    host: str,
    image: str,
    signer: Any,
    chain: Any,
    *,
    tamper: bool = False,
    descriptor_change: dict[str, Any] | None = None,
    **options: Any,
) -> None:
    """A Notary signature of ``image`` made here (a signing time or expiry the CLI does not offer, or one byte
    of the signature flipped), pushed as a referrer the way ``sign --format notation`` pushes one."""

    async def go() -> None:
        async with RegistryClient(plain_config(host)) as client:
            pinned = ImageReference.parse(image)
            pinned = pinned.with_digest(await client.resolve(pinned, Deadline.after(30)))
            target = (await client.get_manifest(pinned, Deadline.after(30))).descriptor
            descriptor = {"mediaType": target.media_type, "digest": target.digest, "size": target.size}
            for name, change in (descriptor_change or {}).items():
                descriptor[name] = descriptor[name] + change if name == "size" else change
            envelope = json.loads(sign_notation(descriptor, signer.signing_key, chain, **options))
            if tamper:
                signature = envelope["signature"]
                envelope["signature"] = ("B" if signature[0] == "A" else "A") + signature[1:]
            await push_referrer(
                RegistryWriter(client),
                pinned,
                target,
                artifact_type=ARTIFACT_TYPE,
                blob=json.dumps(envelope).encode(),
                blob_media_type=JWS_MEDIA_TYPE,
                deadline=Deadline.after(30),
            )

    asyncio.run(go())


@pytest.fixture(scope="module")
def checked(world: World, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """``trtguard check --registry`` of each case alone."""
    folder = tmp_path_factory.mktemp("checks")
    found = {}
    for name, case in world.cases.items():
        status, result = _check(world, pod(case.image, case.engine), folder / name)
        found[name] = {"status": status, "result": result}
    return found


def _check(world: World, obj: dict[str, Any], folder: Path) -> tuple[int, dict[str, Any]]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pod.yaml").write_text(yaml.safe_dump(obj))
    status, out, err = run_cli(
        "check", "--policies", world.policies,
        "--registry-config", world.config, "--format", "json", folder / "pod.yaml",
    )  # fmt: skip
    assert status in (0, 1), err
    [result] = json.loads(out)
    return status, result


@pytest.mark.parametrize(
    "name",
    [
        "notation-jws",
        "notation-cose",
        "notation-missing",
        "notation-tampered",
        "notation-signed-after-certificate-expired",
        "notation-certificate-expired-since",
        "notation-signature-expired",
        "notation-untrusted-identity",
        "notation-untrusted-root",
        "notation-hostile-beside-valid",
        "notation-hostile-alone",
        "notation-descriptor-size",
        "notation-descriptor-media-type",
        "notation-any-eku",
        "notation-cose-protected-chain",
        "notation-config-scope",
        "notation-config-wildcard",
        "gpg-manifest",
        "gpg-missing",
        "gpg-tampered",
        "gpg-expired-key",
        "gpg-untrusted-key",
    ],
)
def test_check_registry_admits_only_valid_signatures(
    world: World, checked: dict[str, dict[str, Any]], name: str
) -> None:
    case, outcome = world.cases[name], checked[name]
    assert (outcome["status"] == 0) is case.allowed, outcome["result"]
    if not case.allowed:
        messages = " ".join(v["message"] for v in outcome["result"]["violations"])
        assert case.reason in messages, messages


@pytest.fixture(scope="module")
def server(world: World, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookProcess]:
    process = WebhookProcess(
        ["--policies", str(world.policies), "--registry-config", str(world.config), "--self-signed", "tls",
         "--san", SERVICE, "--decision-log", f"sqlite:///{world.root / 'decisions.db'}"],
        tmp_path_factory.mktemp("formats-webhook"),
    )  # fmt: skip
    process.start()
    yield process
    process.stop()


def test_serve_agrees_with_check_on_every_case(world: World, server: WebhookProcess) -> None:
    async def admit() -> dict[str, bool]:
        verdicts = {}
        async with server.client() as client:
            for name, case in world.cases.items():
                body = review(obj=pod(case.image, case.engine, name))
                response = await client.post(body)
                verdicts[name] = bool(verify_admission_response(body["request"]["uid"], response)["allowed"])
        return verdicts

    assert asyncio.run(admit()) == {name: case.allowed for name, case in world.cases.items()}


def test_the_local_registry_has_no_referrers_api_so_the_fallback_tag_carries_them(world: World) -> None:
    host = world.config.read_text().split('"')[1]
    image = ImageReference.parse(world.cases["notation-jws"].image)

    async def go() -> bool:
        async with RegistryClient(plain_config(host)) as client:
            digest = await client.resolve(image, Deadline.after(30))
            found = await client.referrers(image, digest, Deadline.after(30))
            index = await client.get_manifest(
                image, Deadline.after(30), reference=f"sha256-{digest[7:]}", missing_ok=True
            )
            return (
                found is None
                and index is not None
                and any(d.artifact_type == ARTIFACT_TYPE for d in index.manifests)
            )

    assert asyncio.run(go())


def test_the_evidence_package_carries_the_gpg_manifest_and_the_notation_signature(
    world: World, server: WebhookProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRTGUARD_PASSWORD", "exporter")
    exporter = generate_private_key()
    (world.root / "exporter.key").write_bytes(encrypt_private_key(exporter, b"exporter"))
    (world.root / "exporter.pub").write_bytes(exporter.public_key().to_pem())
    archive = world.root / "evidence.tar.gz"
    status, _, err = run_cli(
        "evidence", "export", "--workload", "prod/gpg-manifest", "--decision-log",
        f"sqlite:///{world.root / 'decisions.db'}", "--policies", world.policies, "--registry-config",
        world.config, "--key", world.root / "exporter.key", "-o", archive, "--force",
    )  # fmt: skip
    assert status == 0, err
    members = read_archive(archive, ArchiveLimits())
    assert any(name.endswith("/build-manifest-1.1.asc") for name in members), sorted(members)
    assert any(name.endswith("-notation-jws.jws.json") for name in members), sorted(members)
    status, out, err = run_cli("evidence", "verify", archive, "--key", world.root / "exporter.pub")
    assert status == 0, out + err
    text = " ".join(out.split())  # the report wraps its lines
    assert "build-manifest (audit ID AUD-1, TensorRT 10.5.0.18) signed by platform/gpg-build" in text
    assert (
        "1-notation-jws.jws.json verifies (1 of 1 required signers: identities [platform/notary-release"
        in text
    )


# Issue 25: the same verdicts air-gapped, at a given time, and from `verify-notation`.

NOTATION_CASES = [
    "notation-jws", "notation-cose", "notation-missing", "notation-tampered",
    "notation-signed-after-certificate-expired", "notation-certificate-expired-since",
    "notation-signature-expired", "notation-untrusted-identity", "notation-untrusted-root",
    "notation-hostile-beside-valid", "notation-hostile-alone", "notation-descriptor-size",
    "notation-descriptor-media-type", "notation-any-eku", "notation-cose-protected-chain",
    "notation-config-scope", "notation-config-wildcard",
]  # fmt: skip


def _pinned(world: World, image: str) -> str:
    host = world.config.read_text().split('"')[1]

    async def go() -> str:
        async with RegistryClient(plain_config(host)) as client:
            reference = ImageReference.parse(image)
            return f"{reference.name}@{await client.resolve(reference, Deadline.after(30))}"

    return asyncio.run(go())


def _verdicts(world: World, folder: Path, *evidence: object, now: str) -> dict[str, tuple[int, str]]:
    found = {}
    for name in NOTATION_CASES:
        path = folder / f"{name}.yaml"
        status, out, err = run_cli(
            "check", "--policies", world.policies, *evidence, "--now", now, "--format", "json", path
        )
        assert status in (0, 1), err
        [result] = json.loads(out)
        found[name] = (status, " ".join(v["message"] for v in result["violations"]))
    return found


def test_fetch_attestations_then_an_air_gapped_check_gives_the_registry_verdicts(
    world: World, tmp_path: Path
) -> None:
    pods = tmp_path / "pods"
    pods.mkdir()
    for name in NOTATION_CASES:  # offline, images are named by digest
        obj = pod(_pinned(world, world.cases[name].image), None, name)
        (pods / f"{name}.yaml").write_text(yaml.safe_dump(obj))
    folder = tmp_path / "evidence"
    status, out, err = run_cli("fetch-attestations", pods, "-o", folder, "--registry-config", world.config)
    assert status == 0, err
    copied = sorted(p.name for p in folder.rglob("*.notation.*"))
    assert len(copied) >= 17 and any(n.endswith(".cose") for n in copied), copied
    assert " 0 signature(s)" not in out
    now = NOW.isoformat()
    online = _verdicts(world, pods, "--registry-config", world.config, now=now)
    offline = _verdicts(world, pods, "--attestations", folder, now=now)
    assert {n: s for n, (s, _) in offline.items()} == {n: s for n, (s, _) in online.items()}
    assert {n: s == 0 for n, (s, _) in online.items()} == {n: world.cases[n].allowed for n in NOTATION_CASES}
    for name in NOTATION_CASES:
        if not world.cases[name].allowed:
            assert world.cases[name].reason in offline[name][1], (name, offline[name][1])


def test_the_missing_signature_hint_names_notations_tools(world: World, tmp_path: Path) -> None:
    obj = pod(_pinned(world, world.cases["notation-missing"].image), None, "missing")
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(obj))
    (tmp_path / "empty").mkdir()
    status, out, _ = run_cli(
        "check", "--policies", world.policies, "--attestations", tmp_path / "empty", tmp_path / "pod.yaml"
    )
    text = " ".join(out.split())
    assert status == 1 and "`notation sign` or `trtguard sign --format notation`" in text, text
    assert "trtguard fetch-attestations" in text


def test_now_reproduces_a_verdict_about_expiry(world: World, tmp_path: Path) -> None:
    obj = pod(world.cases["notation-signature-expired"].image, None, "expiry")
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(obj))

    def check(now: datetime) -> int:
        status, _, err = run_cli(
            "check", "--policies", world.policies, "--registry-config", world.config,
            "--now", now.isoformat(), tmp_path / "pod.yaml",
        )  # fmt: skip
        assert status in (0, 1), err
        return status

    assert check(NOW) == 1  # it expired an hour ago
    assert check(NOW - timedelta(minutes=90)) == 0  # half an hour before it expired
    with pytest.raises(SystemExit) as exited:  # argparse refuses it, exit status 2
        run_cli("check", "--policies", world.policies, "--now", "yesterday", tmp_path / "pod.yaml")
    assert exited.value.code == 2


def test_verify_notation_from_the_registry_and_offline(world: World, tmp_path: Path) -> None:
    config = world.policies / "notation"
    image = world.cases["notation-config-scope"].image
    status, out, err = run_cli(
        "verify-notation", image, "--config", config, "--registry-config", world.config
    )
    assert status == 0, out + err
    assert "trust policy statement 'app'" in out and "1 of 1 signature(s) verified" in out
    other = world.cases["notation-config-wildcard"].image
    status, out, _ = run_cli("verify-notation", other, "--config", config, "--registry-config", world.config)
    assert status == 1 and "statement 'others'" in out and "matches none of the trusted identities" in out
    # Offline: the envelope and the manifest, as fetch-attestations copies them.
    pinned = _pinned(world, image)
    folder = tmp_path / "evidence"
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(pod(pinned, None)))
    assert (
        run_cli("fetch-attestations", tmp_path / "pod.yaml", "-o", folder, "--registry-config", world.config)[
            0
        ]
        == 0
    )
    [envelope] = folder.rglob("*.notation.jws")
    [manifest] = folder.rglob("manifest.json")
    offline = ("verify-notation", pinned, "--config", config, "--signature", envelope)
    status, out, err = run_cli(*offline, "--manifest", manifest)
    assert status == 0, out + err
    served = json.loads(manifest.read_bytes())["mediaType"]
    wrong = json.dumps(
        {"mediaType": served, "digest": pinned.split("@")[1], "size": manifest.stat().st_size + 1}
    )
    status, out, _ = run_cli(*offline, "--descriptor", wrong)
    assert status == 1 and "size" in out
    status, _, err = run_cli(*offline)
    assert status == 2 and "--manifest" in err
    later = (NOW + timedelta(days=400)).isoformat()  # after the signing certificate expired
    status, out, _ = run_cli(*offline, "--manifest", manifest, "--now", later)
    assert status == 1 and "expired" in out


def test_attach_attestation_refuses_a_notation_envelope_for_another_manifest(world: World) -> None:
    envelope = world.root / "protected.cose"  # made for the cose-protected image
    status, _, err = run_cli(
        "attach-attestation",
        envelope,
        "--to",
        world.cases["notation-jws"].image,
        "--registry-config",
        world.config,
    )
    assert status == 2 and "the envelope signs" in err

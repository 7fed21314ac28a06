"""Offline signature verification throughput, each figure next to its baseline measured in the same run.

Run from the repository root::

    .venv/bin/python bench/signatures.py                 # default: up to 2 s or 2000 rounds per row
    .venv/bin/python bench/signatures.py --seconds 1 --rounds 500

Rows and their baselines:

* classic cosign signature (1 key; 3 keys, threshold 3; with a Rekor SET) vs one raw ``cryptography``
  ECDSA P-256 verification (the floor: one signature check);
* key-signed cosign v3 bundle (DSSE statement) vs the same raw verification;
* keyless classic signature and keyless bundle (public vectors from ``shared/fixtures``, production
  trusted root) vs the raw verification: the cost of chain, SCT and log checks;
* DSSE attestation of a 1 MiB payload vs raw ECDSA over the same bytes;
* opening a cosign key file (scrypt N=2^16) vs ``hashlib.scrypt`` alone.

Every loop is bounded by both ``--rounds`` and ``--seconds``. Keys and signatures are made fresh here.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import rfc8785
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from verifier import signatures
from verifier.crypto import _dsse as dsse
from verifier.crypto import _intoto as intoto
from verifier.crypto import _keys as keys
from verifier.signatures import CosignSignature, KeylessIdentity, TrustPolicy, TrustRoot

IMAGE = "sha256:" + hashlib.sha256(b"bench manifest").hexdigest()


def measure(function: Callable[[], object], *, rounds: int, seconds: float) -> tuple[float, int]:
    """Median seconds per call over at most ``rounds`` calls or ``seconds`` of wall time."""
    function()  # warm-up (caches, lazy imports)
    samples: list[float] = []
    deadline = time.perf_counter() + seconds
    while len(samples) < rounds and time.perf_counter() < deadline:
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), len(samples)


def row(name: str, function: Callable[[], object], baseline: float | None, args: argparse.Namespace) -> float:
    median, count = measure(function, rounds=args.rounds, seconds=args.seconds)
    ratio = f"{median / baseline:6.1f}x" if baseline else "  base "
    print(f"{name:<58} {median * 1e6:10.1f} µs  {1 / median:9.0f}/s  {ratio}  (n={count})")
    return median


def _payload(reference: str = "registry.example.com/app") -> bytes:
    return json.dumps(
        {
            "critical": {
                "identity": {"docker-reference": reference},
                "image": {"docker-manifest-digest": IMAGE},
                "type": "cosign container image signature",
            },
            "optional": None,
        }
    ).encode()


def _classic(key: keys.PrivateKey, rekor: keys.PrivateKey | None = None) -> CosignSignature:
    payload = _payload()
    signature = key.sign(payload)
    bundle = None
    if rekor is not None:
        body = {
            "apiVersion": "0.0.1",
            "kind": "hashedrekord",
            "spec": {
                "data": {"hash": {"algorithm": "sha256", "value": hashlib.sha256(payload).hexdigest()}},
                "signature": {
                    "content": base64.b64encode(signature).decode(),
                    "publicKey": {"content": base64.b64encode(key.public_key().to_pem()).decode()},
                },
            },
        }
        entry: dict[str, str | int] = {
            "body": base64.b64encode(json.dumps(body).encode()).decode(),
            "integratedTime": 1_700_000_000,
            "logID": rekor.public_key().key_id,
            "logIndex": 1,
        }
        bundle = json.dumps(
            {
                "SignedEntryTimestamp": base64.b64encode(rekor.sign(rfc8785.dumps(entry))).decode(),
                "Payload": entry,
            }
        )
    return CosignSignature(
        payload=payload, signature=base64.b64encode(signature).decode(), rekor_bundle=bundle
    )


def _keyed_bundle(key: keys.PrivateKey) -> bytes:
    statement = intoto.Statement(
        subject=[intoto.ResourceDescriptor(digest={"sha256": IMAGE.removeprefix("sha256:")})],
        predicate_type=signatures.COSIGN_SIGN_PREDICATE,
    )
    envelope = intoto.sign_statement(statement, key)
    return json.dumps(
        {
            "mediaType": signatures.BUNDLE_MEDIA_TYPE,
            "verificationMaterial": {"publicKey": {"hint": ""}, "tlogEntries": []},
            "dsseEnvelope": {
                "payload": base64.b64encode(envelope.payload).decode(),
                "payloadType": envelope.payload_type,
                "signatures": [{"sig": base64.b64encode(envelope.signatures[0].sig).decode(), "keyid": ""}],
            },
        }
    ).encode()


def _fixtures() -> Path | None:
    configured = os.environ.get("TRTGUARD_SHARED_FIXTURES")
    candidates = [Path(configured)] if configured else []
    candidates += [
        Path(__file__).resolve().parent.parent.parent / "shared" / "fixtures",
        Path("/work/shared/fixtures"),
    ]
    return next((c for c in candidates if c.is_dir()), None)


def keyless_rows(args: argparse.Namespace, baseline: float) -> None:
    root = _fixtures()
    if root is None:
        print("keyless rows skipped: shared/fixtures not found")
        return
    cosign = root / "cosign"
    prod = TrustRoot.from_file(cosign / "trust" / "prod-trusted_root.json")
    raw = (cosign / "containers-image" / "dir-img-cosign-fulcio-rekor-valid" / "signature-1").read_bytes()
    document = json.loads(raw[raw.index(b"\n") + 1 :])
    layer = CosignSignature.from_layer(
        base64.b64decode(document["payload"]), document["mimeType"], document["annotations"]
    )
    digest = (
        "sha256:"
        + hashlib.sha256(
            (cosign / "containers-image" / "dir-img-cosign-fulcio-rekor-valid" / "manifest.json").read_bytes()
        ).hexdigest()
    )
    policy = TrustPolicy(
        identities=(KeylessIdentity(issuer="https://github.com/login/oauth", subject="mitr@redhat.com"),),
        trust_root=prod,
    )
    row(
        "keyless classic (Fulcio chain + SCT + SET + body)",
        lambda: signatures.verify_image_signatures(digest, policy, classic=[layer]),
        baseline,
        args,
    )
    conformance = cosign / "bundles" / "conformance"
    bundle = (conformance / "happy-path-v0.3" / "bundle.sigstore.json").read_bytes()
    artifact = "sha256:" + hashlib.sha256((conformance / "a.txt").read_bytes()).hexdigest()
    beacon = KeylessIdentity(
        issuer="https://token.actions.githubusercontent.com",
        subject_regex=r"https://github\.com/sigstore-conformance/.*",
    )
    bundle_policy = TrustPolicy(identities=(beacon,), trust_root=prod)
    row(
        "keyless bundle v0.3 (chain + SCT + SET + proof + checkpoint)",
        lambda: signatures.verify_bundle(bundle, bundle_policy, digest=artifact),
        baseline,
        args,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=2000, help="at most this many calls per row")
    parser.add_argument("--seconds", type=float, default=2.0, help="at most this much time per row")
    args = parser.parse_args()

    named = {name: keys.generate_private_key() for name in ("a", "b", "c", "rekor")}
    raw_key = ec.generate_private_key(ec.SECP256R1())
    payload = _payload()
    raw_signature = raw_key.sign(payload, ec.ECDSA(hashes.SHA256()))
    raw_public = raw_key.public_key()

    print(f"{'row':<58} {'median':>13}  {'rate':>11}  vs base")
    baseline = row(
        "BASE raw ECDSA P-256 verify (cryptography)",
        lambda: raw_public.verify(raw_signature, payload, ec.ECDSA(hashes.SHA256())),
        None,
        args,
    )
    one = TrustPolicy(keys={"a": named["a"].public_key()})
    classic_one = [_classic(named["a"])]
    row(
        "classic signature, 1 trusted key",
        lambda: signatures.verify_image_signatures(IMAGE, one, classic=classic_one),
        baseline,
        args,
    )
    three = TrustPolicy(keys={n: named[n].public_key() for n in "abc"}, threshold=3)
    classic_three = [_classic(named[n]) for n in "abc"]
    row(
        "classic signatures, 3 keys, threshold 3 (9 checks)",
        lambda: signatures.verify_image_signatures(IMAGE, three, classic=classic_three),
        baseline,
        args,
    )
    with_log = TrustPolicy(
        keys={"a": named["a"].public_key()}, rekor_keys=(named["rekor"].public_key(),), require_tlog=True
    )
    classic_log = [_classic(named["a"], named["rekor"])]
    row(
        "classic signature + Rekor SET and body check",
        lambda: signatures.verify_image_signatures(IMAGE, with_log, classic=classic_log),
        baseline,
        args,
    )
    bundle = _keyed_bundle(named["a"])
    row(
        "cosign v3 key-signed bundle (DSSE statement)",
        lambda: signatures.verify_image_signatures(IMAGE, one, bundles=[bundle]),
        baseline,
        args,
    )
    keyless_rows(args, baseline)

    big = os.urandom(1 << 20)
    big_signature = raw_key.sign(big, ec.ECDSA(hashes.SHA256()))
    big_base = row(
        "BASE raw ECDSA P-256 verify of 1 MiB",
        lambda: raw_public.verify(big_signature, big, ec.ECDSA(hashes.SHA256())),
        None,
        args,
    )
    envelope = dsse.sign_envelope("application/octet-stream", big, named["a"])
    row(
        "DSSE envelope of 1 MiB (PAE + verify)",
        lambda: dsse.verify_envelope(envelope, {"a": named["a"].public_key()}),
        big_base,
        args,
    )

    key_file = keys.encrypt_private_key(named["a"], b"bench")
    salt = os.urandom(32)
    slow = argparse.Namespace(rounds=min(args.rounds, 20), seconds=args.seconds)
    scrypt_base = row(
        "BASE hashlib.scrypt N=2^16 r=8 p=1",
        lambda: hashlib.scrypt(b"bench", salt=salt, n=1 << 16, r=8, p=1, dklen=32, maxmem=1 << 28),
        None,
        slow,
    )
    row(
        "open a cosign key file (N=2^16)",
        lambda: keys.load_private_key(key_file, b"bench"),
        scrypt_base,
        slow,
    )


if __name__ == "__main__":
    main()

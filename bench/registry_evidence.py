"""Registry evidence on the admission path: latency cold and warm, requests per burst, verification rate.

Starts Debian's ``docker-registry`` on 127.0.0.1 (temporary storage, killed at the end), pushes signed tiny
images with the project's own client, then measures what ``PolicyEvaluator.evaluate`` pays for a pod whose
image must carry a signature by a trusted key (policy: one image rule with ``signatures: {keys: [...]}``):

* **admission latency** — resolve the tag, fetch the ``.sig`` manifest, its payload blob and the referrers
  (API, then fallback tag), verify the signature, decide — with a cold cache (a new image each time) and
  warm (the engine's verified-evidence cache, keyed by digest and key set); p50 and p99. Baseline in the
  same run: one bare HTTP GET of ``/v2/`` on the same registry (the floor any registry look-up pays).
* **registry requests per burst** of 100 concurrent admissions of one new image by one engine (shared
  client, single-flight cache) against the baseline of 100 independent engines (nothing shared).
* **verification throughput** — classic signatures verified per second by
  ``verifier.signatures.verify_image_signatures``, against a bare ECDSA P-256 verify with ``cryptography``.

Usage: ``.venv/bin/python bench/registry_evidence.py [--images N] [--warm N] [--bursts N]``
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from policies.evaluator import PolicyEvaluator
from policies.loader import PolicySet, load_policy_set
from policies.schema import trusted_keys_yaml
from trtguard.release.cosign_layout import append_layer, simple_signing_payload
from trtguard.release.publish import RegistryWriter
from verifier.base._deadline import Deadline
from verifier.base._references import ImageReference
from verifier.crypto._keys import PrivateKey, generate_private_key
from verifier.registry._cosign_layout import SIGNATURE_ANNOTATION, SIMPLE_SIGNING, signature_tag
from verifier.registry._oci import OCI_CONFIG, OCI_MANIFEST, Descriptor, image_manifest
from verifier.registry.client import RegistryClient
from verifier.registry.config import RegistryConfig
from verifier.registry.evidence import RegistryEvidence
from verifier.signatures import CosignSignature, TrustPolicy, verify_image_signatures


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start_registry(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("docker-registry")
    if binary is None:
        raise SystemExit("docker-registry is not installed (apt-get install docker-registry)")
    port = _free_port()
    config = {
        "version": 0.1,
        "log": {"level": "error", "accesslog": {"disabled": True}},
        "storage": {"filesystem": {"rootdirectory": str(folder / "storage")}},
        "http": {"addr": f"127.0.0.1:{port}"},
    }
    (folder / "config.yml").write_text(json.dumps(config))
    process = subprocess.Popen(
        [binary, "serve", str(folder / "config.yml")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    for _ in range(300):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.1):
                return process, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise SystemExit("docker-registry did not start")


def client_config(host: str) -> RegistryConfig:
    return RegistryConfig.model_validate({"registries": {host: {"plain_http": True}}})


async def push_signed_image(client: RegistryClient, host: str, key: PrivateKey) -> ImageReference:
    """A new one-layer image under a new tag, with one classic signature."""
    ref = ImageReference.parse(f"{host}/bench/app:{uuid.uuid4().hex[:12]}")
    deadline, writer = Deadline.after(30), RegistryWriter(client)
    config = await writer.push_blob(
        ref, json.dumps({"rootfs": {"type": "layers", "diff_ids": []}}).encode(), OCI_CONFIG, deadline
    )
    layer = await writer.push_blob(
        ref, uuid.uuid4().bytes * 64, "application/vnd.oci.image.layer.v1.tar", deadline
    )
    manifest = image_manifest(config=config, layers=[Descriptor(layer.media_type, layer.digest, layer.size)])
    pushed = await writer.push_manifest(ref, manifest, OCI_MANIFEST, deadline, tag=ref.tag)
    payload = simple_signing_payload(ref, pushed.digest)
    await append_layer(
        writer,
        ref,
        signature_tag(pushed.digest),
        payload,
        media_type=SIMPLE_SIGNING,
        annotations={SIGNATURE_ANNOTATION: base64.b64encode(key.sign(payload)).decode()},
        deadline=deadline,
    )
    return ref


def signed_images_policy(host: str, key: PrivateKey, folder: Path) -> PolicySet:
    """One image rule: images from the bench repository need a signature by ``bench/signer``."""
    (folder / "keys.yaml").write_text(trusted_keys_yaml("bench", {"signer": key.public_key()}))
    (folder / "policy.yaml").write_text(
        "apiVersion: trtguard.dev/v1alpha1\nkind: InferencePolicy\nmetadata: {name: signed-images}\n"
        f'spec:\n  images:\n    - name: bench\n      match: ["{host}/bench/*"]\n'
        "      signatures: {keys: [bench/signer]}\n"
    )
    return load_policy_set([folder / "policy.yaml", folder / "keys.yaml"])


def pod(image: ImageReference | str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bench", "namespace": "default"},
        "spec": {"containers": [{"name": "app", "image": str(image)}]},
    }


async def admit(engine: PolicyEvaluator, image: ImageReference | str) -> None:
    decision = await engine.evaluate(pod(image), deadline=Deadline.after(10))
    if not decision.allowed:
        raise SystemExit(f"unexpected deny: {[v.message for v in decision.denials]}")


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def report(name: str, samples: list[float]) -> None:
    ms = [s * 1000 for s in samples]
    print(
        f"  {name:<44} n={len(ms):>5}  p50 {percentile(ms, 0.5):7.2f} ms  p99 {percentile(ms, 0.99):7.2f} ms"
        f"  mean {statistics.fmean(ms):7.2f} ms"
    )


async def timed(action: Callable[[], Awaitable[object]], count: int) -> list[float]:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        await action()
        samples.append(time.perf_counter() - started)
    return samples


async def latency(host: str, key: PrivateKey, policy_set: PolicySet, images: int, warm: int) -> None:
    print("admission latency, PolicyEvaluator.evaluate (resolve + .sig + payload + referrers + verify):")
    async with RegistryClient(client_config(host)) as seeding:
        refs = [await push_signed_image(seeding, host, key) for _ in range(images)]
    async with httpx.AsyncClient() as bare:
        report(
            "baseline: bare GET /v2/ (same registry)",
            await timed(lambda: bare.get(f"http://{host}/v2/"), warm),
        )
    async with RegistryClient(client_config(host)) as client:
        engine = PolicyEvaluator(policy_set, RegistryEvidence(client))
        queue = list(refs)
        report(
            "cold: new image each time, tag reference",
            await timed(lambda: admit(engine, queue.pop()), images),
        )
        report("warm: cached result, tag reference", await timed(lambda: admit(engine, refs[0]), warm))
        pinned = refs[0].with_digest(await client.resolve(refs[0], Deadline.after(10)))
        report("warm: cached result, digest reference", await timed(lambda: admit(engine, pinned), warm))


async def bursts(host: str, key: PrivateKey, policy_set: PolicySet, count: int) -> None:
    print("registry requests per burst of 100 concurrent admissions of one new image:")
    shared_counts, naive_counts, durations = [], [], []
    for _ in range(count):
        async with RegistryClient(client_config(host)) as seeding:
            ref = await push_signed_image(seeding, host, key)
        async with RegistryClient(client_config(host)) as client:
            engine = PolicyEvaluator(policy_set, RegistryEvidence(client))
            started = time.perf_counter()
            await asyncio.gather(*(admit(engine, ref) for _ in range(100)))
            durations.append(time.perf_counter() - started)
            shared_counts.append(client.stats.total_requests)
        # Baseline: the same 100 admissions, each with its own engine and client (nothing shared), ten at
        # a time so that the two-core test machine answers them within the deadline.
        clients = [RegistryClient(client_config(host)) for _ in range(100)]
        gate = asyncio.Semaphore(10)
        try:
            await asyncio.gather(*(_independent(made, policy_set, ref, gate) for made in clients))
            naive_counts.append(sum(c.stats.total_requests for c in clients))
        finally:
            for made in clients:
                await made.aclose()
    shared = statistics.fmean(shared_counts)
    print(f"  one engine, shared client (single-flight) {shared:7.1f} requests per burst {shared_counts}")
    print(
        f"  baseline: 100 independent engines       {statistics.fmean(naive_counts):7.1f} requests per burst"
    )
    print(f"  requests in one admission ('one set')   {naive_counts[0] / 100:7.1f}")
    report("whole burst of 100 (shared)", durations)


async def _independent(
    client: RegistryClient, policy_set: PolicySet, ref: ImageReference, gate: asyncio.Semaphore
) -> None:
    async with gate:
        await admit(PolicyEvaluator(policy_set, RegistryEvidence(client)), ref)


def throughput(key: PrivateKey, policy: TrustPolicy, seconds: float) -> None:
    print("verification throughput (one classic signature, P-256):")
    ref = ImageReference.parse("registry.example/bench/app:v1")
    digest = "sha256:" + "ab" * 32
    payload = simple_signing_payload(ref, digest)
    signature = key.sign(payload)
    classic = [CosignSignature(payload=payload, signature=base64.b64encode(signature).decode())]
    public = key.public_key()
    raw_private = ec.generate_private_key(ec.SECP256R1())
    raw_signature = raw_private.sign(payload, ec.ECDSA(hashes.SHA256()))
    raw_public = raw_private.public_key()

    def rate(action: Callable[[], object]) -> float:
        done, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            action()
            done += 1
        return done / (time.perf_counter() - started)

    baseline = rate(lambda: raw_public.verify(raw_signature, payload, ec.ECDSA(hashes.SHA256())))
    keys_verify = rate(lambda: public.verify(signature, payload))
    full = rate(lambda: verify_image_signatures(digest, policy, classic=classic, repository=ref.name))
    print(f"  baseline: cryptography ECDSA verify     {baseline:9.0f} /s")
    print(f"  verifier.crypto._keys PublicKey.verify          {keys_verify:9.0f} /s")
    print(f"  verify_image_signatures (full check)    {full:9.0f} /s")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--images", type=int, default=100, help="cold look-ups (one new image each)")
    parser.add_argument("--warm", type=int, default=1000, help="warm look-ups")
    parser.add_argument("--bursts", type=int, default=5, help="bursts of 100 identical look-ups")
    parser.add_argument("--seconds", type=float, default=2.0, help="time per throughput measurement")
    args = parser.parse_args()
    key = generate_private_key()
    policy = TrustPolicy(keys={"signer": key.public_key()})
    with tempfile.TemporaryDirectory() as folder:
        process, host = start_registry(Path(folder))
        try:
            print(f"docker-registry on {host}; Python {sys.version.split()[0]}")
            policy_set = signed_images_policy(host, key, Path(folder))
            await latency(host, key, policy_set, args.images, args.warm)
            await bursts(host, key, policy_set, args.bursts)
        finally:
            process.terminate()
            process.wait(timeout=10)
    throughput(key, policy, args.seconds)


if __name__ == "__main__":
    asyncio.run(main())

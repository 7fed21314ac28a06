"""A real registry holding honest and forged resources, for the layer-smuggling and cache-order tests.

What a user does is done with trtguard's own commands (``push-engine``, ``attach-attestation``); what an
attacker with push rights but no signing key does (park a signed build manifest on another engine, copy a
``.sig`` tag, push a signed image's digest into a second repository) is done with the registry client,
writing exactly the layouts the commands write.

:func:`build_world` fills one registry with :data:`RESOURCES`; :func:`check_registry` is ``trtguard check
--registry`` for one Pod, the verdict every other path (one long-lived ``PolicyEvaluator``, ``trtguard
serve``) must agree with.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml

from policies.schema import trusted_keys_yaml
from tests.policies.conftest import manifest_data
from tests.support.images import push_image, tiny_image
from tests.support.localregistry import LocalRegistry, plain_config
from trtguard.cli import main
from trtguard.release._attach import PREDICATE_TYPE_REFERRER_ANNOTATION
from trtguard.release.cosign_layout import append_layer, push_referrer, simple_signing_payload
from trtguard.release.publish import RegistryWriter
from verifier.base._deadline import Deadline
from verifier.base._digests import sha256_bytes
from verifier.base._references import ImageReference
from verifier.crypto._dsse import sign_envelope
from verifier.crypto._intoto import PAYLOAD_TYPE, ResourceDescriptor
from verifier.crypto._keys import PrivateKey, generate_private_key
from verifier.manifest import ENGINE_BUILD_PREDICATE_TYPE, EngineBuildManifest, manifest_statement
from verifier.registry._cosign_layout import (
    DSSE_ENVELOPE,
    PREDICATE_TYPE_ANNOTATION,
    SIGNATURE_ANNOTATION,
    SIMPLE_SIGNING,
    attestation_tag,
    read_signatures,
    signature_tag,
)
from verifier.registry.client import RegistryClient

T = TypeVar("T")

POLICY = """\
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: registry-policy}
spec:
  match: {namespaces: [prod]}
  images:
    - name: runtime
      match: ["HOST/inference/*"]
      signatures: {keys: [platform/image-signer]}
    - name: engines
      match: ["HOST/models/*"]
      requireDigest: true
  models:
    required: false
    buildManifest: {keys: [platform/build-signer]}
"""

#: The engine the build signer built and signed, and one nobody signed.
GOOD_ENGINE = b"the engine the build pipeline built and signed " * 64
EVIL_ENGINE = b"an engine nobody signed " * 64
#: An ONNX model a second signed engine was built from, pushed beside it.
ONNX_MODEL = b"an ONNX model " * 32
OTHER_ENGINE = b"a second signed engine, built from ONNX_MODEL " * 64


@dataclass(frozen=True)
class Resource:
    """A Pod's runtime image and engine (None: no engine), and the verdict ``check`` must give alone."""

    image: str
    engine: str | None
    allowed: bool


@dataclass
class World:
    """The registry, the keys and policy files, and the resources in it (name → :class:`Resource`)."""

    registry: LocalRegistry
    root: Path
    keys: dict[str, PrivateKey] = field(default_factory=dict)
    resources: dict[str, Resource] = field(default_factory=dict)

    @property
    def host(self) -> str:
        return self.registry.host

    @property
    def config(self) -> Path:
        """The registry configuration for the commands and ``serve`` (plain HTTP to the loopback registry)."""
        return self.root / "registries.yaml"

    @property
    def policies(self) -> Path:
        """The folder of the policy and the TrustedKeys files (``--policies`` of check and serve)."""
        return self.root / "policies"

    def ref(self, text: str) -> ImageReference:
        return ImageReference.parse(f"{self.host}/{text}")

    def in_registry(self, work: Callable[[RegistryClient], Awaitable[T]]) -> T:
        """Run ``work`` with a fresh client (from synchronous test code)."""

        async def go() -> T:
            async with RegistryClient(plain_config(self.host)) as client:
                return await work(client)

        return asyncio.run(go())


def run_cli(*argv: object) -> tuple[int, str, str]:
    """``trtguard ARGV`` in this process: exit status, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([str(a) for a in argv])
    return status, out.getvalue(), err.getvalue()


def pod(image: str, engine: str | None, name: str = "p") -> dict[str, Any]:
    """A Pod in ``prod`` running ``image``, with ``engine`` mounted as an image volume."""
    container: dict[str, Any] = {"name": "server", "image": image}
    spec: dict[str, Any] = {"containers": [container]}
    if engine is not None:
        container["volumeMounts"] = [{"name": "engine", "mountPath": "/models"}]
        spec["volumes"] = [{"name": "engine", "image": {"reference": engine}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "prod"}, "spec": spec}


def check_registry(world: World, obj: dict[str, Any], folder: Path) -> tuple[int, dict[str, Any]]:
    """``trtguard check --registry-config`` of one resource: exit status and its JSON result."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "pod.yaml"
    path.write_text(yaml.safe_dump(obj))
    status, out, err = run_cli(
        "check", "--policies", world.policies, "--registry-config", world.config, "--format", "json", path
    )
    assert status in (0, 1), err
    [result] = json.loads(out)
    return status, result


def build_envelope(
    key: PrivateKey, engine: bytes, *, also_about: Sequence[str] = (), **overrides: Any
) -> bytes:
    """A DSSE envelope of the build manifest of ``engine``, signed by ``key``.

    Its subject is the engine file, plus the ``sha256:`` digests ``also_about`` (an artifact digest).
    """
    manifest = EngineBuildManifest.model_validate(manifest_data(engine, **overrides))
    statement = manifest_statement(manifest)
    extra = [
        ResourceDescriptor(name="artifact", digest={"sha256": d.removeprefix("sha256:")}) for d in also_about
    ]
    statement = statement.model_copy(update={"subject": [*statement.subject, *extra]})
    return sign_envelope(PAYLOAD_TYPE, statement.to_json(), key).to_json()


async def park(
    client: RegistryClient,
    pinned: ImageReference,
    envelope: bytes,
    *,
    via: Literal["att", "referrer", "both"] = "both",
    predicate_type: str = ENGINE_BUILD_PREDICATE_TYPE,
) -> None:
    """Attach ``envelope`` to ``pinned`` as ``attach-attestation`` would, without its checks (an attacker)."""
    assert pinned.digest is not None
    deadline = Deadline.after(30)
    if via in ("att", "both"):
        await append_layer(
            RegistryWriter(client),
            pinned,
            attestation_tag(pinned.digest),
            envelope,
            media_type=DSSE_ENVELOPE,
            annotations={PREDICATE_TYPE_ANNOTATION: predicate_type},
            deadline=deadline,
        )
    if via in ("referrer", "both"):
        manifest = await client.get_manifest(pinned, deadline)
        await push_referrer(
            RegistryWriter(client),
            pinned,
            manifest.descriptor,
            artifact_type=DSSE_ENVELOPE,
            blob=envelope,
            blob_media_type=DSSE_ENVELOPE,
            layer_annotations={PREDICATE_TYPE_ANNOTATION: predicate_type},
            annotations={PREDICATE_TYPE_REFERRER_ANNOTATION: predicate_type},
            deadline=deadline,
        )


async def sign_image(client: RegistryClient, pinned: ImageReference, key: PrivateKey) -> None:
    """What ``trtguard sign`` writes: a classic simple-signing signature naming ``pinned``'s repository."""
    assert pinned.digest is not None
    payload = simple_signing_payload(pinned, pinned.digest)
    await append_layer(
        RegistryWriter(client),
        pinned,
        signature_tag(pinned.digest),
        payload,
        media_type=SIMPLE_SIGNING,
        annotations={SIGNATURE_ANNOTATION: base64.b64encode(key.sign(payload)).decode()},
        deadline=Deadline.after(30),
    )


async def copy_signatures(client: RegistryClient, source: ImageReference, target: ImageReference) -> None:
    """Copy the ``.sig`` layers of ``source`` to the same digest in ``target``'s repository."""
    assert source.digest is not None
    deadline = Deadline.after(30)
    for layer in await read_signatures(client, source, source.digest, deadline):
        await append_layer(
            RegistryWriter(client),
            target,
            signature_tag(source.digest),
            layer.payload,
            media_type=layer.media_type,
            annotations=dict(layer.annotations),
            deadline=deadline,
        )


async def copy_artifact(
    client: RegistryClient, source: ImageReference, target: ImageReference
) -> ImageReference:
    """Copy the artifact ``source`` (blobs and manifest bytes) to ``target``'s tag; the same digest there."""
    deadline, writer = Deadline.after(30), RegistryWriter(client)
    manifest = await client.get_manifest(source, deadline)
    for blob in (manifest.config, *manifest.layers):
        data = await client.get_blob(source, blob, deadline)
        await writer.push_blob(target, data, blob.media_type, deadline)
    pushed = await writer.push_manifest(target, manifest.data, manifest.media_type, deadline, tag=target.tag)
    return target.with_digest(pushed.digest)


def push_engine_cli(world: World, repository: str, engine: Path, *extra: object) -> ImageReference:
    """``trtguard push-engine ENGINE --to HOST/REPOSITORY:v1 EXTRA``; the pushed digest reference."""
    status, out, err = run_cli(
        "push-engine",
        engine,
        "--to",
        f"{world.host}/{repository}:v1",
        *extra,
        "--registry-config",
        world.config,
    )
    assert status == 0, err
    return ImageReference.parse(out.strip())


def attach_cli(world: World, envelope: bytes, to: ImageReference | str, name: str) -> tuple[int, str]:
    """``trtguard attach-attestation``; exit status and stderr."""
    path = world.root / f"{name}.dsse.json"
    path.write_bytes(envelope)
    status, _, err = run_cli("attach-attestation", path, "--to", to, "--registry-config", world.config)
    return status, err


def write_files(folder: Path, **files: bytes) -> dict[str, Path]:
    """Write ``name=bytes`` files (``name`` with ``_`` for ``.``) into ``folder``; their paths by name."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, data in files.items():
        path = folder / name.replace("_", ".")
        path.write_bytes(data)
        paths[name] = path
    return paths


def make_world(registry: LocalRegistry, root: Path) -> World:
    """Keys, policy files and the registry configuration (no resources yet)."""
    world = World(registry, root)
    world.keys = {name: generate_private_key() for name in ("image-signer", "build-signer")}
    world.policies.mkdir()
    (world.policies / "keys.yaml").write_text(
        trusted_keys_yaml("platform", {name: key.public_key() for name, key in world.keys.items()})
    )
    (world.policies / "policy.yaml").write_text(POLICY.replace("HOST", registry.host))
    world.config.write_text(f'registries:\n  "{registry.host}":\n    plain_http: true\n')
    return world


def build_world(registry: LocalRegistry, root: Path) -> World:
    """The resources of the cache-order tests, each with the verdict ``check --registry`` gives for it alone.

    * ``inference/signed``, ``inference/unsigned`` and ``inference/copied`` hold one image digest; only the
      first is signed, the third has the first one's ``.sig`` tag copied into it. ``inference/other`` is a
      second signed image.
    * ``models/good`` is an engine with its signed build manifest; ``models/mirror`` holds the same artifact
      without it. ``models/onnx`` carries a signed engine with the ONNX model its manifest records.
    * ``models/smuggled`` is ``push-engine evil.plan --onnx good.plan`` with the good engine's manifest
      parked on it; ``models/swapped`` carries the good engine under the ONNX file name and the unsigned one
      as the ONNX layer named ``model.plan``, with the good engine's manifest.
    """
    world = make_world(registry, root)
    image_key, build_key = world.keys["image-signer"], world.keys["build-signer"]
    runtime = tiny_image("the signed runtime")
    other = tiny_image("another signed runtime")

    async def images(client: RegistryClient) -> dict[str, ImageReference]:
        pinned = {}
        for repository, image in (
            ("inference/signed", runtime),
            ("inference/unsigned", runtime),
            ("inference/copied", runtime),
            ("inference/other", other),
        ):
            ref = world.ref(f"{repository}:v1")
            pinned[repository] = ref.with_digest(await push_image(client, ref, image))
        await sign_image(client, pinned["inference/signed"], image_key)
        await sign_image(client, pinned["inference/other"], image_key)
        await copy_signatures(client, pinned["inference/signed"], pinned["inference/copied"])
        return pinned

    pinned = world.in_registry(images)
    files = write_files(root / "files", good_plan=GOOD_ENGINE, evil_plan=EVIL_ENGINE, model_onnx=ONNX_MODEL)
    (root / "other").mkdir()
    (root / "other" / "model.plan").write_bytes(OTHER_ENGINE)
    swapped = write_files(root / "swapped", model_onnx=GOOD_ENGINE, model_plan=EVIL_ENGINE)

    good_manifest = build_envelope(build_key, GOOD_ENGINE)
    good = push_engine_cli(world, "models/good", files["good_plan"])
    assert attach_cli(world, good_manifest, good, "good")[0] == 0
    mirror = world.in_registry(lambda client: copy_artifact(client, good, world.ref("models/mirror:v1")))
    onnx = push_engine_cli(world, "models/onnx", root / "other" / "model.plan", "--onnx", files["model_onnx"])
    onnx_manifest = build_envelope(build_key, OTHER_ENGINE, onnx={"sha256": sha256_bytes(ONNX_MODEL)})
    assert attach_cli(world, onnx_manifest, onnx, "onnx")[0] == 0
    smuggled = push_engine_cli(world, "models/smuggled", files["evil_plan"], "--onnx", files["good_plan"])
    swap = push_engine_cli(world, "models/swapped", swapped["model_onnx"], "--onnx", swapped["model_plan"])

    async def forge(client: RegistryClient) -> None:
        await park(client, smuggled, good_manifest)
        await park(client, swap, good_manifest)

    world.in_registry(forge)
    signed = str(pinned["inference/signed"])
    world.resources = {
        "signed": Resource(signed, None, allowed=True),
        "unsigned": Resource(str(pinned["inference/unsigned"]), None, allowed=False),
        "copied-signature": Resource(str(pinned["inference/copied"]), None, allowed=False),
        "other-signed": Resource(str(pinned["inference/other"]), None, allowed=True),
        "good-engine": Resource(signed, str(good), allowed=True),
        "mirrored-engine": Resource(signed, str(mirror), allowed=False),
        "engine-with-onnx": Resource(signed, str(onnx), allowed=True),
        "smuggled-engine": Resource(signed, str(smuggled), allowed=False),
        "swapped-files": Resource(signed, str(swap), allowed=False),
        "good-engine-unsigned-image": Resource(str(pinned["inference/unsigned"]), str(good), allowed=False),
    }
    return world

"""verifier/registry/_auth.py: dockerconfigjson, challenges, and auth against real registries.

The token registry is distribution in ``auth: token`` mode with the test token service; the TLS registry
uses a test CA and htpasswd Basic auth.
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import pytest

from tests.support.images import push_image, tiny_image
from tests.support.localregistry import (
    HTPASSWD_PASSWORD,
    HTPASSWD_USER,
    LocalRegistry,
    plain_config,
)
from tests.support.tokenserver import TokenServer
from verifier.base._deadline import Deadline
from verifier.base._errors import EvidenceUnavailable, InputError
from verifier.base._files import MAX_DOCUMENT_BYTES
from verifier.base._references import ImageReference
from verifier.registry._auth import Credentials, CredentialStore, parse_challenges, parse_docker_config
from verifier.registry.client import RegistryClient
from verifier.registry.config import RegistryConfig


def _auth(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


def _write_credentials(path: Path, entries: dict[str, tuple[str, str]]) -> Path:
    path.write_text(json.dumps({"auths": {host: {"auth": _auth(*pair)} for host, pair in entries.items()}}))
    return path


def test_dockerconfigjson_forms() -> None:
    document = {
        "auths": {
            "https://index.docker.io/v1/": {"auth": _auth("hub-user", "hub:pass:with:colons")},
            "ghcr.io": {"username": "bot", "password": "token"},
            "quay.io": {"email": "nobody@example.com"},
        },
        "credsStore": "desktop",
    }
    found = parse_docker_config(json.dumps(document).encode(), source="secret")
    assert found == {
        "docker.io": Credentials("hub-user", "hub:pass:with:colons"),
        "ghcr.io": Credentials("bot", "token"),
    }
    legacy = parse_docker_config(
        json.dumps({"127.0.0.1:5000": {"auth": _auth("a", "b")}}).encode(), source="s"
    )
    assert legacy == {"127.0.0.1:5000": Credentials("a", "b")}


def test_credentials_do_not_show_the_password() -> None:
    assert "secret" not in repr(Credentials("user", "secret"))


@pytest.mark.parametrize(
    ("document", "words"),
    [
        (b"not json", "not JSON"),
        (b"[]", "not a JSON object"),
        (json.dumps({"auths": {"r.example": {"auth": "%%%"}}}).encode(), "not base64"),
        (
            json.dumps({"auths": {"r.example": {"auth": base64.b64encode(b"nocolon").decode()}}}).encode(),
            "user:password",
        ),
        (json.dumps({"auths": {"r.example": {"identitytoken": "x"}}}).encode(), "identity tokens"),
        (json.dumps({"auths": {"r.example": "x"}}).encode(), "not an object"),
    ],
)
def test_bad_credentials_files(document: bytes, words: str) -> None:
    with pytest.raises(InputError, match=words) as raised:
        parse_docker_config(document, source="pull-secret")
    assert raised.value.location is not None and raised.value.location.startswith("pull-secret")


def test_credential_store_rereads_a_rotated_file(tmp_path: Path) -> None:
    path = _write_credentials(tmp_path / "config.json", {"r.example": ("a", "1")})
    store = CredentialStore(path)
    assert store.lookup("R.example") == Credentials("a", "1")
    replacement = _write_credentials(tmp_path / "new.json", {"r.example": ("a", "2-rotated")})
    replacement.replace(path)  # how a Secret volume swaps its content
    assert store.lookup("r.example") == Credentials("a", "2-rotated")
    assert store.lookup("other.example") is None
    assert CredentialStore(None).lookup("r.example") is None


def test_missing_credentials_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read the credentials file"):
        CredentialStore(tmp_path / "absent.json")


def test_credentials_file_above_the_document_limit_is_refused_unread(tmp_path: Path) -> None:
    # A configuration document has the one bound of every document read (MAX_DOCUMENT_BYTES); the file was
    # read whole before, however large.
    path = tmp_path / "config.json"
    path.write_bytes(b" " * (MAX_DOCUMENT_BYTES + 1))
    with pytest.raises(InputError, match="the credentials file is larger than 16 MiB"):
        CredentialStore(path)


def test_challenges_with_commas_inside_quotes() -> None:
    (challenge,) = parse_challenges(
        [
            'Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push"'
        ]
    )
    assert challenge.scheme == "bearer"
    assert challenge.params == {
        "realm": "https://auth.example/token",
        "service": "registry.example",
        "scope": "repository:a/b:pull,push",
    }
    basic, bearer = parse_challenges(['Basic realm="x"', 'Bearer realm="https://a/t",error="invalid_token"'])
    assert basic.scheme == "basic" and bearer.params["error"] == "invalid_token"
    assert parse_challenges([""]) == []


async def test_bearer_tokens_from_the_realm_are_cached_per_scope(
    token_registry: LocalRegistry, token_server: TokenServer, tmp_path: Path
) -> None:
    credentials = _write_credentials(tmp_path / "auth.json", {token_registry.host: ("robot", "robot-secret")})
    config = plain_config(token_registry.host, credentials_file=str(credentials))
    ref = ImageReference.parse(f"{token_registry.host}/team/secured:v1")
    async with RegistryClient(config) as client:
        image = tiny_image()
        start = token_server.requests
        digest = await push_image(client, ref, image)
        before = token_server.requests
        assert before > start  # the push needed a token
        for _ in range(5):
            assert await client.resolve(ref, Deadline.after(10)) == digest
        # One token for pull on this repository, then reused.
        assert token_server.requests - before <= 1
        blobs = await asyncio.gather(
            *(client.get_blob(ref, blob.descriptor, Deadline.after(10)) for blob in image.blobs)
        )
        assert blobs == [blob.data for blob in image.blobs]


async def test_bearer_with_wrong_password_is_a_definitive_refusal(
    token_registry: LocalRegistry, tmp_path: Path
) -> None:
    credentials = _write_credentials(tmp_path / "auth.json", {token_registry.host: ("robot", "wrong")})
    config = plain_config(token_registry.host, credentials_file=str(credentials))
    ref = ImageReference.parse(f"{token_registry.host}/team/secured:v1")
    async with RegistryClient(config) as client:
        with pytest.raises(EvidenceUnavailable) as raised:
            await client.resolve(ref, Deadline.after(10))
    assert raised.value.transient is False
    assert "token service" in raised.value.message and "refused the credentials" in raised.value.message


async def test_bearer_without_credentials_is_refused(token_registry: LocalRegistry) -> None:
    ref = ImageReference.parse(f"{token_registry.host}/team/secured:v1")
    async with RegistryClient(plain_config(token_registry.host)) as client:
        with pytest.raises(EvidenceUnavailable) as raised:
            await client.resolve(ref, Deadline.after(10))
    assert raised.value.transient is False
    assert "anonymous access" in raised.value.message


def _tls_config(registry: LocalRegistry, tmp_path: Path, *, password: str | None, ca: bool) -> RegistryConfig:
    document: dict[str, object] = {}
    if password is not None:
        document["credentials_file"] = str(
            _write_credentials(tmp_path / "tls-auth.json", {registry.host: (HTPASSWD_USER, password)})
        )
    if ca:
        document["registries"] = {registry.host: {"ca_bundle": str(registry.folder / "ca.crt")}}
    return RegistryConfig.model_validate(document)


async def test_tls_with_ca_bundle_and_basic_auth(tls_registry: LocalRegistry, tmp_path: Path) -> None:
    config = _tls_config(tls_registry, tmp_path, password=HTPASSWD_PASSWORD, ca=True)
    ref = ImageReference.parse(f"{tls_registry.host}/team/tls:v1")
    async with RegistryClient(config) as client:
        digest = await push_image(client, ref, tiny_image())
        assert await client.resolve(ref, Deadline.after(10)) == digest


async def test_tls_certificate_from_an_unknown_ca_is_refused(
    tls_registry: LocalRegistry, tmp_path: Path
) -> None:
    config = _tls_config(tls_registry, tmp_path, password=HTPASSWD_PASSWORD, ca=False)
    ref = ImageReference.parse(f"{tls_registry.host}/team/tls:v1")
    async with RegistryClient(config) as client:
        with pytest.raises(EvidenceUnavailable) as raised:
            await client.resolve(ref, Deadline.after(10))
    assert raised.value.transient is False
    assert "TLS certificate not trusted" in raised.value.message
    assert raised.value.hint is not None and "ca_bundle" in raised.value.hint


async def test_basic_auth_failures(tls_registry: LocalRegistry, tmp_path: Path) -> None:
    ref = ImageReference.parse(f"{tls_registry.host}/team/tls:v1")
    async with RegistryClient(_tls_config(tls_registry, tmp_path, password=None, ca=True)) as client:
        with pytest.raises(EvidenceUnavailable, match="requires a user name and password") as missing:
            await client.resolve(ref, Deadline.after(10))
    async with RegistryClient(_tls_config(tls_registry, tmp_path, password="wrong", ca=True)) as client:
        with pytest.raises(EvidenceUnavailable, match="refused the credentials") as wrong:
            await client.resolve(ref, Deadline.after(10))
    assert missing.value.transient is False and wrong.value.transient is False


async def test_a_ca_bundle_that_is_not_pem_is_an_input_error(
    tls_registry: LocalRegistry, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate")
    config = RegistryConfig.model_validate({"registries": {tls_registry.host: {"ca_bundle": str(bad)}}})
    async with RegistryClient(config) as client:
        with pytest.raises(InputError, match="CA bundle"):
            await client.resolve(ImageReference.parse(f"{tls_registry.host}/team/tls:v1"), Deadline.after(5))


async def test_tls_to_a_plain_http_registry_says_so(registry: LocalRegistry) -> None:
    """It used to say "could not be connected to (operation not permitted)" three times: a registry down."""
    ref = ImageReference.parse(f"{registry.host}/team/plain:v1")
    async with RegistryClient(RegistryConfig()) as client:
        with pytest.raises(EvidenceUnavailable) as raised:
            await client.resolve(ref, Deadline.after(10))
    assert raised.value.transient is False
    assert raised.value.message == (
        f"{registry.host} answered the TLS handshake in plain HTTP: it is a plain-HTTP registry, and "
        "trtguard asked it over TLS (for manifest team/plain:v1)"
    )
    assert raised.value.hint is not None and f"plain_http: true for {registry.host}" in raised.value.hint


async def test_plain_http_to_a_tls_registry_says_so(tls_registry: LocalRegistry) -> None:
    ref = ImageReference.parse(f"{tls_registry.host}/team/tls:v1")
    async with RegistryClient(plain_config(tls_registry.host)) as client:
        with pytest.raises(EvidenceUnavailable) as raised:
            await client.resolve(ref, Deadline.after(10))
    assert raised.value.transient is False
    assert (
        f"{tls_registry.host} speaks TLS (HTTPS), but trtguard asked it in plain HTTP" in raised.value.message
    )
    assert raised.value.hint is not None and "remove plain_http" in raised.value.hint

"""verifier/registry/config.py: the --registry-config file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from verifier.base._errors import InputError
from verifier.registry.config import (
    RegistryConfig,
    is_loopback,
    load_registry_config,
    normalise_host,
)

README = Path(__file__).resolve().parents[3] / "verifier" / "registry" / "README.md"


def _readme_example() -> str:
    text = README.read_text()
    match = re.search(r"```yaml\n(# registries.yaml\n.*?)```", text, re.S)
    assert match is not None
    return match.group(1)


def test_the_documented_example_loads(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "registries.yaml"
    path.parent.mkdir()
    path.write_text(_readme_example())
    config = load_registry_config(path)
    assert config.credentials_file == path.parent / "pull-secret" / ".dockerconfigjson"
    corp = config.settings_for("REGISTRY.corp.example")
    assert corp.ca_bundle == path.parent / "certs" / "corp-ca.pem"
    assert corp.base_url == "https://registry.corp.example"
    assert corp.retry.attempts == 3
    local = config.settings_for("127.0.0.1:5000")
    assert local.base_url == "http://127.0.0.1:5000"
    assert local.retry.attempts == 1
    assert local.timeouts.request == 30
    assert config.defaults.limits.manifest_bytes == 4 * 1024 * 1024


def test_empty_file_means_defaults(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    config = load_registry_config(path)
    settings = config.settings_for("ghcr.io")
    assert settings.base_url == "https://ghcr.io"
    assert settings.ca_bundle is None and settings.timeouts.connect == 3


def test_docker_hub_is_served_from_registry_1() -> None:
    config = RegistryConfig.model_validate({"registries": {"index.docker.io": {"retry": {"attempts": 5}}}})
    settings = config.settings_for("docker.io")
    assert settings.host == "docker.io"
    assert settings.base_url == "https://registry-1.docker.io"
    assert settings.retry.attempts == 5


@pytest.mark.parametrize(
    ("document", "field", "words"),
    [
        ("registries:\n  registry.corp.example:\n    plain_http: true\n", "registries", "loopback"),
        ("registries:\n  10.0.0.8:5000: {plain_http: true}\n", "registries", "loopback"),
        ("registries:\n  docker.io: {}\n  index.docker.io: {}\n", "registries", "twice"),
        ("defaults:\n  retry: {attempts: 0}\n", "defaults.retry.attempts", "greater than or equal"),
        ("defaults:\n  timeouts: {connect: -1}\n", "defaults.timeouts.connect", "greater than"),
        ("registries:\n  ghcr.io: {ca_bundel: x.pem}\n", "registries.ghcr.io.ca_bundel", "Extra inputs"),
        ("max_conections: 4\n", "max_conections", "Extra inputs"),
    ],
)
def test_bad_settings_name_the_field(tmp_path: Path, document: str, field: str, words: str) -> None:
    path = tmp_path / "registries.yaml"
    path.write_text(document)
    with pytest.raises(InputError) as raised:
        load_registry_config(path)
    assert raised.value.location == f"{path}: {field}"
    assert words in raised.value.message
    assert raised.value.hint is not None


def test_yaml_errors_give_the_line(tmp_path: Path) -> None:
    path = tmp_path / "registries.yaml"
    path.write_text("registries:\n  a: {\n  b: [\n")
    with pytest.raises(InputError) as raised:
        load_registry_config(path)
    assert raised.value.location is not None and re.fullmatch(
        rf"{re.escape(str(path))}:\d+(:\d+)?", raised.value.location
    )


def test_not_a_mapping_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(InputError, match="must be a mapping"):
        load_registry_config(path)
    with pytest.raises(InputError, match="cannot read"):
        load_registry_config(tmp_path / "missing.yaml")


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("localhost:5000", True),
        ("127.0.0.1:5000", True),
        ("127.1.2.3", True),
        ("[::1]:5000", True),
        ("[::1]", True),
        ("10.0.0.1:5000", False),
        ("localhost.evil.example", False),
        ("registry.corp.example", False),
        ("0.0.0.0:5000", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(
    ("text", "host"),
    [
        ("https://index.docker.io/v1/", "docker.io"),
        ("registry-1.docker.io", "docker.io"),
        ("GHCR.io", "ghcr.io"),
        ("http://127.0.0.1:5000/v2/", "127.0.0.1:5000"),
    ],
)
def test_normalise_host(text: str, host: str) -> None:
    assert normalise_host(text) == host


def test_normalise_host_refuses_empty() -> None:
    with pytest.raises(ValueError):
        normalise_host("https://")

"""Policies, trust material and registry settings reach the server as files it can load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from policies.loader import load_policy_set
from tests.charts.helm_chart import (
    CHART,
    FULLNAME,
    flags,
    one,
    pod_spec,
    policy_folder,
    projected_files,
    render,
    render_error,
    webhook_container,
)
from verifier.registry.config import (
    Limits,
    RegistryConfig,
    RegistryDefaults,
    RegistryEntry,
    RetryPolicy,
    Timeouts,
    load_registry_config,
)

pytestmark = pytest.mark.helm

SCHEMA_PATH = CHART / "values.schema.json"


def test_policy_documents_and_keys_load_beside_the_bundled_library(tmp_path: Path) -> None:
    docs = render(CHART / "ci" / "helm-certs-values.yaml")
    container = webhook_container(docs)
    root = Path(flags(container["args"])["--policies"])
    assert root == Path("/etc/trtguard/policies")
    mount = next(m for m in container["volumeMounts"] if m["name"] == "policies")
    assert mount["mountPath"] == "/etc/trtguard/policies/site" and mount["readOnly"] is True

    files = projected_files(docs)
    assert set(files) == {
        "platform-keys.yaml",
        "team-inference.yaml",
        "keys/image-signer.pub",
        "keys/build-signer.pub",
        "keys/gpu-verifier.pub",
    }
    image_root = policy_folder(docs, tmp_path)

    policy_set = load_policy_set(image_root)
    assert {"platform/image-signer", "platform/build-signer", "platform/gpu-verifier"} <= set(
        policy_set.signers
    )
    names = {policy.name for policy in policy_set.policies}
    assert "team-inference" in names
    assert "trusted-tensorrt-images" in names
    # Each file once: the hidden ..data copies are not loaded a second time.
    assert len(policy_set.sources) == len(set(map(Path.resolve, policy_set.sources)))


def test_without_the_library_only_your_files_are_loaded() -> None:
    docs = render(CHART / "ci" / "existing-configmap-values.yaml")
    assert flags(webhook_container(docs)["args"])["--policies"] == "/etc/trtguard/policies/site"
    sources = pod_spec(one(docs, "Deployment"))["volumes"]
    projected = next(v for v in sources if v["name"] == "policies")["projected"]["sources"]
    assert projected == [
        {"configMap": {"name": "inference-policies"}},
        {
            "secret": {
                "name": "inference-trust",
                "items": [
                    {"key": "image-signer.pub", "path": "keys/image-signer.pub"},
                    {"key": "build-signer.pub", "path": "keys/build-signer.pub"},
                    {"key": "trusted_root.json", "path": "keys/trusted_root.json"},
                ],
            }
        },
    ]


def test_bundled_library_alone_mounts_nothing() -> None:
    docs = render()
    assert flags(webhook_container(docs)["args"])["--policies"] == "/etc/trtguard/policies"
    assert not [v for v in pod_spec(one(docs, "Deployment"))["volumes"] if v["name"] == "policies"]
    assert not [d for d in docs if d["kind"] == "ConfigMap"]


@pytest.mark.parametrize(
    ("set_json", "message"),
    [
        ({"policies.includeLibrary": False}, "no policies: set policies.includeLibrary=true"),
        ({"trust.existingSecret": "keys"}, "trust.existingSecret needs trust.existingSecretKeys"),
        ({"policies.documents": {"policy.txt": "x"}}, "at '/policies/documents'"),
    ],
)
def test_policy_values_that_cannot_work_are_refused(set_json: dict[str, Any], message: str) -> None:
    assert message in render_error(set_json=set_json)


def test_registry_configuration_loads_and_points_at_the_mounted_credentials(tmp_path: Path) -> None:
    docs = render(CHART / "ci" / "postgresql-values.yaml")
    container = webhook_container(docs)
    config_path = Path(flags(container["args"])["--registry-config"])
    config_map = one(docs, "ConfigMap")
    assert config_map["metadata"]["name"] == f"{FULLNAME}-registry"
    written = tmp_path / config_path.name
    written.write_text(config_map["data"][config_path.name], encoding="utf-8")
    config = load_registry_config(written)

    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod_spec(one(docs, "Deployment"))["volumes"]}
    assert config_path.parent == Path(mounts["registry-config"])
    assert volumes["registry-config"]["configMap"]["name"] == config_map["metadata"]["name"]
    # The credentials are the image pull Secret's .dockerconfigjson, mounted where the file says.
    assert config.credentials_file is not None
    credentials = volumes["registry-credentials"]["secret"]
    assert credentials["secretName"] == "registry-pull"
    assert credentials["items"] == [{"key": ".dockerconfigjson", "path": config.credentials_file.name}]
    assert config.credentials_file.parent == Path(mounts["registry-credentials"])
    settings = config.settings_for("registry.corp.example:5000")
    assert settings.ca_bundle == Path("/etc/trtguard/registry-ca/registry-corp.pem")
    assert settings.ca_bundle.parent == Path(mounts["registry-ca"])
    assert volumes["registry-ca"]["configMap"]["name"] == "registry-ca"
    assert settings.timeouts.connect == 2


def test_no_registry_configuration_unless_asked() -> None:
    assert "--registry-config" not in flags(webhook_container(render())["args"])


def schema_properties(definition: dict[str, Any], definitions: dict[str, Any]) -> set[str]:
    if "$ref" in definition:
        definition = definitions[definition["$ref"].rsplit("/", 1)[1]]
    return set(definition["properties"])


def test_values_schema_mirrors_the_registry_configuration_model() -> None:
    """The chart checks registry.config at install time; it must accept exactly the fields the server does."""
    schema = json.loads(SCHEMA_PATH.read_text())
    definitions = schema["definitions"]
    config = schema["properties"]["registry"]["properties"]["config"]
    # The chart sets credentials_file itself, to the mounted Secret.
    assert schema_properties(config, definitions) == set(RegistryConfig.model_fields) - {"credentials_file"}
    defaults = config["properties"]["defaults"]
    assert schema_properties(defaults, definitions) == set(RegistryDefaults.model_fields)
    entry = config["properties"]["registries"]["additionalProperties"]
    assert schema_properties(entry, definitions) == set(RegistryEntry.model_fields)
    for name, model in (
        ("registryTimeouts", Timeouts),
        ("registryRetry", RetryPolicy),
        ("registryLimits", Limits),
    ):
        assert set(definitions[name]["properties"]) == set(model.model_fields), name

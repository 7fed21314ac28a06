"""The Deployment's `trtguard serve` command line against the server's settings model (the contract)."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

import pytest

from tests.charts.helm_chart import CI_VALUES, flags, render, webhook_container
from trtguard.cli import parse_args
from webhook.settings import ENV_PREFIX, ServeSettings, load_settings

pytestmark = pytest.mark.helm

SCENARIOS = [(), *((path,) for path in CI_VALUES)]


def under_a_mount(path: str, mounts: list[str]) -> bool:
    return any(PurePosixPath(path).is_relative_to(mount) for mount in mounts)


@pytest.mark.parametrize("values", SCENARIOS, ids=lambda v: v[0].name if v else "defaults")
def test_serve_flags_are_valid_settings(values: tuple[Path, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    container = webhook_container(render(*values, set_json={"server.otlpEndpoint": "http://otel:4318"}))
    given = flags(container["args"])
    # The Pod's environment: only what the chart sets (a database URL comes from a Secret at run time).
    for name in [name for name in os.environ if name.startswith(ENV_PREFIX)]:
        monkeypatch.delenv(name)
    for variable in container.get("env", []):
        if variable["name"].startswith(ENV_PREFIX):
            assert "secretKeyRef" in variable["valueFrom"]
            monkeypatch.setenv(variable["name"], "postgresql://trtguard:secret@db.example:5432/trtguard")
    # Through the real `trtguard serve` parser, into the settings the server would run with.
    try:
        parsed = vars(parse_args(container["args"]))
    except SystemExit:
        pytest.fail(f"trtguard serve rejects the chart's arguments: {container['args']}")
    assert {name.removeprefix("--").replace("-", "_") for name in given} <= set(parsed)
    settings = load_settings(
        {name: value for name, value in parsed.items() if name in ServeSettings.model_fields}
    )

    assert settings.host == "0.0.0.0"  # noqa: S104 - inside the Pod; the Service and NetworkPolicy front it
    assert settings.port == 8443
    assert settings.uses_tls
    assert settings.otlp_endpoint == "http://otel:4318"
    assert (settings.header_timeout, settings.body_timeout, settings.idle_timeout) == (5, 10, 100)
    assert settings.max_connections == 1000
    mounts = [m["mountPath"] for m in container["volumeMounts"]]
    for path in (settings.tls_cert, settings.tls_key, settings.registry_config):
        assert path is None or under_a_mount(str(path), mounts), path
    if not str(settings.policies).startswith("/etc/trtguard/policies"):
        pytest.fail(f"policies outside the image's policy folder: {settings.policies}")
    if settings.decision_log.startswith("sqlite:///"):
        assert under_a_mount(settings.decision_log.removeprefix("sqlite:///"), mounts)
    else:
        assert settings.decision_log.startswith("postgresql://")

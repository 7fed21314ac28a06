"""The Deployment's `trtguard serve` command line against the server's settings model (the contract)."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from tests.charts.helm_chart import CI_VALUES, flags, one, pod_spec, render, webhook_container
from trtguard.cli import parse_args
from webhook._settings import ENV_PREFIX, ServeSettings, load_settings

pytestmark = pytest.mark.helm

SCENARIOS = [(), *((path,) for path in CI_VALUES)]


def under_a_mount(path: str, mounts: list[str]) -> bool:
    return any(PurePosixPath(path).is_relative_to(mount) for mount in mounts)


DATABASE_URL = "postgresql://trtguard:secret@db.example:5432/trtguard"


def secret_file(docs: list[dict[str, Any]], container: dict[str, Any], path: str) -> tuple[str, str]:
    """The (Secret name, key) whose value the kubelet puts at ``path`` in ``container``."""
    volumes = {v["name"]: v for v in pod_spec(one(docs, "Deployment"))["volumes"]}
    for mount in container["volumeMounts"]:
        if PurePosixPath(path).parent == PurePosixPath(mount["mountPath"]):
            secret = volumes[mount["name"]]["secret"]
            [key] = [i["key"] for i in secret["items"] if i["path"] == PurePosixPath(path).name]
            return secret["secretName"], key
    raise AssertionError(f"{path} is on no mounted Secret")


@pytest.mark.parametrize("values", SCENARIOS, ids=lambda v: v[0].name if v else "defaults")
def test_serve_flags_are_valid_settings(
    values: tuple[Path, ...], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    docs = render(*values, set_json={"server.otlpEndpoint": "http://otel:4318"})
    container = webhook_container(docs)
    given = flags(container["args"])
    # The Pod's environment: only what the chart sets, and no secret in it.
    for name in [name for name in os.environ if name.startswith(ENV_PREFIX)]:
        monkeypatch.delenv(name)
    assert not [v for v in container.get("env", []) if v["name"].startswith(ENV_PREFIX)]
    args = list(container["args"])
    if "--decision-log-file" in given:
        # The database URL is a file of the Secret the values name; here it holds a stand-in URL.
        url_file = given["--decision-log-file"]
        assert secret_file(docs, container, url_file) == ("trtguard-decision-log", "url")
        (tmp_path / "url").write_text(DATABASE_URL + "\n")
        args[args.index(url_file)] = str(tmp_path / "url")
    # Through the real `trtguard serve` parser, into the settings the server would run with.
    try:
        parsed = vars(parse_args(args))
    except SystemExit:
        pytest.fail(f"trtguard serve rejects the chart's arguments: {args}")
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
        assert settings.decision_log == DATABASE_URL

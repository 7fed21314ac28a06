"""webhook/_settings.py: flags over TRTGUARD_* over the config file, and clear errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from verifier.base._errors import InputError
from webhook._settings import DEFAULT_DECISION_LOG, ServeSettings, load_settings


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("TRTGUARD_") and name != "TRTGUARD_SHARED_FIXTURES":
            monkeypatch.delenv(name)


def test_defaults_follow_the_contract() -> None:
    settings = load_settings({"policies": Path("p"), "insecure_http": True})
    assert settings.host == "127.0.0.1"
    assert settings.port == 8443
    assert settings.decision_log == DEFAULT_DECISION_LOG == "sqlite:///./trtguard-decisions.db"
    assert settings.default_timeout == 10
    assert settings.timeout_margin == 0.5
    assert settings.log_level == "info"
    assert settings.metrics_port is None
    assert settings.otlp_endpoint is None
    assert settings.decision_log_unavailable == "deny"
    assert not settings.uses_tls
    assert settings.reload_settle == 1
    assert (settings.header_timeout, settings.body_timeout, settings.idle_timeout) == (5, 10, 100)
    assert settings.max_connections == 1000


def test_flags_beat_environment_beats_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "trtguard.yaml"
    config.write_text(
        "policies: /etc/trtguard/policies\nport: 9000\nhost: 0.0.0.0\nlog-level: DEBUG\n"
        "sans: [a.svc, b.svc]\nself_signed: /tmp/ca\n"
    )
    monkeypatch.setenv("TRTGUARD_CONFIG", str(config))
    monkeypatch.setenv("TRTGUARD_PORT", "9100")
    monkeypatch.setenv("TRTGUARD_HOST", "10.0.0.1")
    settings = load_settings({"port": 9200, "host": None})
    assert settings.config == config
    assert settings.port == 9200  # flag
    assert settings.host == "10.0.0.1"  # environment, the flag was not given
    assert settings.policies == Path("/etc/trtguard/policies")  # config file
    assert settings.log_level == "debug"
    assert settings.sans == ("a.svc", "b.svc")
    assert settings.self_signed == Path("/tmp/ca")


def test_config_flag_beats_config_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.yaml").write_text("policies: from-a\ninsecure_http: true\n")
    (tmp_path / "b.yaml").write_text("policies: from-b\ninsecure_http: true\n")
    monkeypatch.setenv("TRTGUARD_CONFIG", str(tmp_path / "a.yaml"))
    assert load_settings({"config": tmp_path / "b.yaml"}).policies == Path("from-b")


def test_environment_names_and_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRTGUARD_POLICIES", "/p")
    monkeypatch.setenv("TRTGUARD_TLS_CERT", "/tls/tls.crt")
    monkeypatch.setenv("TRTGUARD_TLS_KEY", "/tls/tls.key")
    monkeypatch.setenv("TRTGUARD_DECISION_LOG", "postgresql://trtguard@db/trtguard")
    monkeypatch.setenv("TRTGUARD_DECISION_LOG_UNAVAILABLE", "spool")
    monkeypatch.setenv("TRTGUARD_DEFAULT_TIMEOUT", "4.5")
    monkeypatch.setenv("TRTGUARD_TIMEOUT_MARGIN", "0.25")
    monkeypatch.setenv("TRTGUARD_METRICS_PORT", "9090")
    monkeypatch.setenv("TRTGUARD_OTLP_ENDPOINT", "http://otel:4318")
    monkeypatch.setenv("TRTGUARD_LOG_LEVEL", "WARNING")
    monkeypatch.setenv("TRTGUARD_ATTESTATIONS", "/att")
    monkeypatch.setenv("TRTGUARD_REGISTRY_CONFIG", "/reg.yaml")
    monkeypatch.setenv("TRTGUARD_PASSWORD", "not a serve setting, used by other commands")
    settings = load_settings({})
    assert settings.tls_cert == Path("/tls/tls.crt")
    assert settings.decision_log_unavailable == "spool"
    assert settings.default_timeout == 4.5
    assert settings.timeout_margin == 0.25
    assert settings.metrics_port == 9090
    assert settings.otlp_endpoint == "http://otel:4318"
    assert settings.log_level == "warning"
    assert settings.attestations == Path("/att")
    assert settings.registry_config == Path("/reg.yaml")
    assert settings.uses_tls


def test_sans_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRTGUARD_SELF_SIGNED", "/tls")
    monkeypatch.setenv("TRTGUARD_SANS", "trtguard.trtguard.svc, trtguard.trtguard.svc.cluster.local")
    settings = load_settings({"policies": Path("p")})
    assert settings.sans == ("trtguard.trtguard.svc", "trtguard.trtguard.svc.cluster.local")
    assert settings.self_signed == Path("/tls")


def test_insecure_http_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRTGUARD_INSECURE_HTTP", "true")
    assert load_settings({"policies": Path("p")}).insecure_http


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({}, "--policies (or TRTGUARD_POLICIES, or 'policies' in the config file) is required"),
        ({"policies": "p"}, "TLS is required"),
        ({"policies": "p", "tls_cert": "c"}, "--tls-cert and --tls-key go together"),
        (
            {"policies": "p", "insecure_http": True, "self_signed": "d"},
            "choose one of --self-signed, --insecure-http",
        ),
        ({"policies": "p", "insecure_http": True, "port": "http"}, "--port / TRTGUARD_PORT / 'port'"),
        ({"policies": "p", "insecure_http": True, "port": 70000}, "less than or equal to 65535"),
        ({"policies": "p", "insecure_http": True, "default_timeout": 0}, "--default-timeout"),
        ({"policies": "p", "insecure_http": True, "decision_log": "mysql://x"}, "must start with sqlite:///"),
        ({"policies": "p", "insecure_http": True, "log_level": "loud"}, "--log-level"),
        (
            {"policies": "p", "insecure_http": True, "metrics_port": 8443},
            "--metrics-port must differ from --port",
        ),
        ({"policies": "p", "insecure_http": True, "decision_log_unavailable": "allow"}, "'deny' or 'spool'"),
        (
            {"policies": "p", "tls_cert": "c", "tls_key": "k", "sans": ("a.svc",)},
            "--san names go into the certificate that --self-signed makes",
        ),
        (
            {"policies": "p", "insecure_http": True, "sans": ("a.svc",)},
            "--san names go into the certificate that --self-signed makes",
        ),
    ],
)
def test_bad_settings_are_one_clear_error(flags: dict[str, object], expected: str) -> None:
    with pytest.raises(InputError) as raised:
        load_settings(flags)
    assert expected in raised.value.diagnostics()
    assert "Traceback" not in raised.value.diagnostics()


def test_unknown_config_key_is_named(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("policies: p\ninsecure_http: true\npolicy_dir: oops\n")
    with pytest.raises(InputError, match="'policy_dir' is not a setting"):
        load_settings({"config": config})


@pytest.mark.parametrize(
    ("content", "expected"),
    [("policies: [unclosed\n", "not valid YAML"), ("- a\n- b\n", "must be a mapping")],
)
def test_bad_config_file(tmp_path: Path, content: str, expected: str) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(content)
    with pytest.raises(InputError, match=expected):
        load_settings({"config": config})


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read the config file") as raised:
        load_settings({"config": tmp_path / "absent.yaml"})
    assert raised.value.location == str(tmp_path / "absent.yaml")


def test_settings_are_immutable() -> None:
    settings = ServeSettings(policies=Path("p"), insecure_http=True)
    with pytest.raises(Exception, match="frozen"):
        settings.port = 1  # type: ignore[misc]


def test_decision_log_url_from_a_file_as_a_mounted_secret_holds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "url"
    # `kubectl create secret --from-file` keeps the file's final newline.
    secret.write_text("postgresql://trtguard:s3cret@db.example:5432/trtguard\n")
    settings = load_settings({"policies": Path("p"), "insecure_http": True, "decision_log_file": secret})
    assert settings.decision_log == "postgresql://trtguard:s3cret@db.example:5432/trtguard"
    assert settings.decision_log_file == secret
    monkeypatch.setenv("TRTGUARD_DECISION_LOG_FILE", str(secret))
    assert load_settings({"policies": Path("p"), "insecure_http": True}).decision_log.startswith(
        "postgresql://"
    )


def test_decision_log_url_and_file_together_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "url"
    secret.write_text("postgresql://trtguard@db/trtguard")
    flags: dict[str, object] = {"policies": "p", "insecure_http": True, "decision_log_file": secret}
    monkeypatch.setenv("TRTGUARD_DECISION_LOG", "sqlite:///./other.db")
    with pytest.raises(InputError, match="the decision log URL is given twice"):
        load_settings(flags)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "cannot read the decision log URL from"),
        ("mysql://root:hunter2@db/x", "must hold one URL starting with sqlite:/// or postgresql://"),
        (b"\xff\xfe", "it is not UTF-8 text"),
    ],
)
def test_a_bad_decision_log_file_is_named_and_never_quoted(
    tmp_path: Path, content: str | bytes | None, expected: str
) -> None:
    secret = tmp_path / "url"
    if isinstance(content, str):
        secret.write_text(content)
    elif isinstance(content, bytes):
        secret.write_bytes(content)
    with pytest.raises(InputError) as raised:
        load_settings({"policies": "p", "insecure_http": True, "decision_log_file": secret})
    message = raised.value.diagnostics()
    assert expected in message and str(secret) in message
    assert "hunter2" not in message and "Traceback" not in message

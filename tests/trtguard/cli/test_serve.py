"""trtguard/cli/serve.py: every documented setting has its flag, and flags reach the settings model."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trtguard.cli import parse_args
from trtguard.cli.serve import _FIELDS
from verifier.base._errors import InputError
from webhook._settings import ServeSettings, load_settings
from webhook._tls import LOCAL_NAMES

ARCHITECTURE = Path(__file__).resolve().parents[3] / "docs" / "ARCHITECTURE.md"


def test_every_flag_maps_to_a_setting_and_back() -> None:
    assert set(_FIELDS) == set(ServeSettings.model_fields)


def test_the_contract_table_flags_exist(capsys: pytest.CaptureFixture[str]) -> None:
    """The Helm chart renders the flags and variables of docs/ARCHITECTURE.md: they must all be accepted."""
    section = ARCHITECTURE.read_text().split("## `trtguard serve`", 1)[1]
    flags = set(re.findall(r"`(--[a-z-]+)", section))
    variables = set(re.findall(r"`(TRTGUARD_[A-Z_]+)`", section))
    assert "--policies" in flags and "TRTGUARD_POLICIES" in variables
    with pytest.raises(SystemExit):
        parse_args(["serve", "--help"])
    help_text = capsys.readouterr().out
    for flag in flags:
        assert flag in help_text, flag
    fields = set(ServeSettings.model_fields)
    for variable in variables:
        assert variable.removeprefix("TRTGUARD_").lower() in fields, variable


def test_the_contract_names_every_san_of_the_self_signed_certificate() -> None:
    [row] = [
        line for line in ARCHITECTURE.read_text().splitlines() if line.startswith("| `--self-signed DIR`")
    ]
    sans = re.search(r"SANs: ([^)]*)\)", row)
    assert sans is not None
    assert [name.strip() for name in sans.group(1).split(",")] == [*LOCAL_NAMES, "`--san` names"]


def test_flags_are_parsed_into_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TRTGUARD_PORT", "TRTGUARD_SANS", "TRTGUARD_POLICIES"):
        monkeypatch.delenv(name, raising=False)
    args = parse_args(
        [
            "serve",
            "--policies",
            "p",
            "--self-signed",
            str(tmp_path),
            "--san",
            "a.svc",
            "--san",
            "b.svc",
            "--port",
            "9443",
            "--metrics-port",
            "9090",
            "--default-timeout",
            "4",
            "--timeout-margin",
            "0.25",
            "--decision-log-unavailable",
            "spool",
            "--log-level",
            "DEBUG",
        ]
    )
    settings = load_settings({name: getattr(args, name) for name in _FIELDS})
    assert settings.sans == ("a.svc", "b.svc")
    assert (settings.port, settings.metrics_port) == (9443, 9090)
    assert (settings.default_timeout, settings.timeout_margin) == (4.0, 0.25)
    assert settings.decision_log_unavailable == "spool"
    assert settings.log_level == "debug"


def test_bad_flag_value_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        parse_args(["serve", "--port", "many"])
    assert raised.value.code == 2
    assert "invalid int value" in capsys.readouterr().err


def test_registry_is_a_flag_of_serve_and_excludes_a_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`serve --registry` used to fail with "expected one argument": --registry was taken as a prefix of
    --registry-config. It is a flag of its own now, and no option is ever read from a prefix."""
    for name in ("TRTGUARD_ATTESTATIONS", "TRTGUARD_REGISTRY", "TRTGUARD_REGISTRY_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    base = ["serve", "--policies", "p", "--insecure-http"]
    settings = load_settings(
        {k: v for k, v in vars(parse_args([*base, "--registry"])).items() if k in _FIELDS}
    )
    assert settings.registry is True and settings.attestations is None
    both = vars(parse_args([*base, "--registry", "--attestations", str(tmp_path)]))
    with pytest.raises(InputError, match=r"--attestations \(an offline folder\) and the registries"):
        load_settings({k: v for k, v in both.items() if k in _FIELDS})
    with pytest.raises(SystemExit) as exited:
        parse_args([*base, "--registry-conf", "r.yaml"])
    assert exited.value.code == 2
    assert "unrecognized arguments: --registry-conf" in capsys.readouterr().err

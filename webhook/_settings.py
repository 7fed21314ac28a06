"""Settings of ``trtguard serve``: command-line flags, then ``TRTGUARD_*`` variables, then a YAML file.

One pydantic-settings model holds them all, so the Helm chart (environment), a config file and the command
line cannot disagree about names or types. :func:`load_settings` turns every validation problem into one
:class:`~verifier.base.InputError` that names the flag, the variable and the config key.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from verifier.base import InputError, decode, load_document

ENV_PREFIX = "TRTGUARD_"
DEFAULT_DECISION_LOG = "sqlite:///./trtguard-decisions.db"
_DECISION_LOG_SCHEMES = ("sqlite:///", "postgresql://", "postgres://")

LogLevel = Literal["debug", "info", "warning", "error"]


class ServeSettings(BaseSettings):
    """Everything ``trtguard serve`` can be told; see docs/ARCHITECTURE.md for the flag and variable names."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True)

    config: Path | None = None
    policies: Path
    attestations: Path | None = None
    # Evidence from the registries: the default without --attestations, said explicitly (as `check` says it).
    registry: bool = False
    registry_config: Path | None = None
    host: str = "127.0.0.1"
    port: int = Field(default=8443, ge=0, le=65535)
    tls_cert: Path | None = None
    tls_key: Path | None = None
    self_signed: Path | None = None
    sans: Annotated[tuple[str, ...], NoDecode] = ()
    insecure_http: bool = False
    decision_log: str = DEFAULT_DECISION_LOG
    # The URL read from a file instead (a mounted Secret): a PostgreSQL URL carries the database password,
    # which then stays out of the command line and the environment.
    decision_log_file: Path | None = None
    decision_log_unavailable: Literal["deny", "spool"] = "deny"
    decision_log_spool: Path = Path("trtguard-spool.db")
    # Open a decision log whose head does not verify, or that was reset, instead of refusing to start.
    accept_broken_log: bool = False
    default_timeout: float = Field(default=10.0, gt=0, le=60)
    timeout_margin: float = Field(default=0.5, ge=0, lt=30)
    metrics_port: int | None = Field(default=None, ge=0, le=65535)
    otlp_endpoint: str | None = None
    log_level: LogLevel = "info"
    reload_interval: float = Field(default=2.0, gt=0, le=3600)
    reload_settle: float = Field(default=1.0, ge=0, le=60)
    header_timeout: float = Field(default=5.0, gt=0, le=60)
    body_timeout: float = Field(default=10.0, gt=0, le=120)
    # Longer than Go's 90 s idle-connection timeout, so that the API server closes idle connections first and
    # never sends a request on one the webhook is closing at that moment (an EOF, counted as a failed call).
    idle_timeout: int = Field(default=100, ge=1, le=3600)
    max_connections: int = Field(default=1000, ge=1, le=100_000)

    @field_validator("sans", mode="before")
    @classmethod
    def _split_sans(cls, value: object) -> object:
        # The environment gives one string: "a.svc,b.svc" (spaces allowed).
        if isinstance(value, str):
            return tuple(name.strip() for name in value.split(",") if name.strip())
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower_level(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @field_validator("decision_log")
    @classmethod
    def _known_scheme(cls, value: str) -> str:
        if not value.startswith(_DECISION_LOG_SCHEMES):
            raise ValueError("must start with sqlite:/// or postgresql://")
        return value

    @model_validator(mode="before")
    @classmethod
    def _decision_log_from_file(cls, data: object) -> object:
        # Before field validation, so that the URL read from the file is checked like a given one.
        if not isinstance(data, dict) or data.get("decision_log_file") in (None, ""):
            return data
        if data.get("decision_log") is not None:
            raise ValueError(
                "the decision log URL is given twice: by --decision-log-file and by --decision-log (or"
                " TRTGUARD_DECISION_LOG, or decision-log in the config file); give one"
            )
        return {**data, "decision_log": read_decision_log_file(Path(data["decision_log_file"]))}

    @model_validator(mode="after")
    def _one_evidence_source(self) -> ServeSettings:
        # (--attestations with --registry-config is refused where the evidence source is made, as for check.)
        if self.attestations is not None and self.registry:
            raise ValueError(
                "--attestations (an offline folder) and the registries (--registry) are alternatives: "
                "give one"
            )
        return self

    @model_validator(mode="after")
    def _one_transport(self) -> ServeSettings:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("--tls-cert and --tls-key go together")
        chosen = [
            name
            for name, given in (
                ("--tls-cert/--tls-key", self.tls_cert is not None),
                ("--self-signed", self.self_signed is not None),
                ("--insecure-http", self.insecure_http),
            )
            if given
        ]
        if not chosen:
            raise ValueError(
                "TLS is required: give --tls-cert and --tls-key, or --self-signed DIR for a local CA; "
                "--insecure-http serves plain HTTP for local experiments only"
            )
        if len(chosen) > 1:
            raise ValueError(f"choose one of {', '.join(chosen)}")
        if self.sans and self.self_signed is None:
            # Only the certificate trtguard makes itself can carry them; silently dropping them misleads.
            raise ValueError(
                "--san names go into the certificate that --self-signed makes; with --tls-cert the names are "
                "those of the given certificate"
            )
        if self.metrics_port is not None and self.metrics_port == self.port and self.port != 0:
            raise ValueError("--metrics-port must differ from --port")
        return self

    @property
    def uses_tls(self) -> bool:
        """False only with ``--insecure-http``."""
        return not self.insecure_http

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,  # noqa: ARG003 - the base class's signature
        file_secret_settings: PydanticBaseSettingsSource,  # noqa: ARG003
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Flags (init arguments) over the environment over the ``--config`` file; no dotenv or secrets."""
        return init_settings, env_settings, _ConfigFileSource(settings_cls)


class _ConfigFileSource(PydanticBaseSettingsSource):
    """The YAML file named by ``--config`` or ``TRTGUARD_CONFIG`` (whichever won above)."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """Unused: :meth:`__call__` returns the whole file at once."""
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        path = self.current_state.get("config")
        if not path:
            return {}
        return read_config_file(Path(path))


def read_config_file(path: Path) -> dict[str, Any]:
    """The settings mapping in a YAML config file (snake_case keys)."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise InputError(
            f"cannot read the config file: {error.strerror}", location=str(path), hint="check --config"
        ) from None
    text = decode(raw, str(path))
    document = load_document(text, str(path), what="config file")
    data = None if document is None else document.data
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(
            "config file must be a mapping of setting names to values",
            location=str(path),
            hint="for example:  policies: /etc/trtguard/policies",
        )
    return {str(key).replace("-", "_"): value for key, value in data.items()}


def read_decision_log_file(path: Path) -> str:
    """The decision log URL in ``path`` (surrounding whitespace, such as a final newline, is ignored).

    Errors name the file but never quote it: the URL may carry a password.
    """
    try:
        url = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "it is not UTF-8 text"
        raise ValueError(f"cannot read the decision log URL from {path}: {reason}") from None
    if not url.startswith(_DECISION_LOG_SCHEMES):
        raise ValueError(f"{path} must hold one URL starting with sqlite:/// or postgresql://")
    return url


def load_settings(flags: Mapping[str, Any]) -> ServeSettings:
    """Settings from ``flags`` (``None`` means not given), the environment and the config file.

    Raises :class:`InputError` naming each bad setting by its flag, variable and config key.
    """
    given = {key: value for key, value in flags.items() if value is not None and value != ()}
    try:
        return ServeSettings(**given)
    except ValidationError as error:
        raise InputError(
            "invalid settings:\n  " + "\n  ".join(_describe(e) for e in error.errors()),
            hint="see `trtguard serve --help`; flags win over TRTGUARD_* variables, which win over --config",
        ) from None


def _describe(error: Mapping[str, Any]) -> str:
    location = error.get("loc") or ()
    message = str(error.get("msg", "invalid"))
    if not location:
        return message.removeprefix("Value error, ")
    name = str(location[0])
    flag = "--" + name.replace("_", "-")
    if error.get("type") == "extra_forbidden":
        return f"{name!r} is not a setting (config file key or flag)"
    if error.get("type") == "missing":
        return f"{flag} (or {ENV_PREFIX}{name.upper()}, or '{name}' in the config file) is required"
    return f"{flag} / {ENV_PREFIX}{name.upper()} / '{name}': {message.removeprefix('Value error, ')}"

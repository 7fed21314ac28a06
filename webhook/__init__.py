"""The admission server: one AdmissionReview in, one answer out (the codec, the admission flow, the FastAPI
routes, the uvicorn assembly, TLS, the policy set in force, observability). The command line imports the serve
settings, the server, its logging and change control's view of the decision log from here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from webhook._admission_history import DecisionLogHistory
    from webhook._logging import configure_logging
    from webhook._server import run
    from webhook._settings import DEFAULT_DECISION_LOG, load_settings

#: Where each public name lives.
_HOMES: dict[str, str] = {
    "DecisionLogHistory": "webhook._admission_history",
    "configure_logging": "webhook._logging",
    "run": "webhook._server",
    **dict.fromkeys(("DEFAULT_DECISION_LOG", "load_settings"), "webhook._settings"),
}

__all__ = [
    "DEFAULT_DECISION_LOG",
    "DecisionLogHistory",
    "configure_logging",
    "load_settings",
    "run",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

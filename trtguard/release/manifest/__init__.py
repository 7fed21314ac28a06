"""``trtguard manifest create`` and ``manifest import``: from the files to a signed engine build manifest, and
a flat legacy record read into one.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trtguard.release.manifest._create import CreateInputs, Environment, create_manifest
    from trtguard.release.manifest._draft import Draft
    from trtguard.release.manifest._files import parse_json, read_manifest_file, read_yaml, read_yaml_as
    from trtguard.release.manifest._flat import import_flat
    from trtguard.release.manifest._probe import Distribution
    from trtguard.release.manifest._settings import ManifestSettings

#: Where each public name lives.
_HOMES: dict[str, str] = {
    **dict.fromkeys(("CreateInputs", "Environment", "create_manifest"), "trtguard.release.manifest._create"),
    "Draft": "trtguard.release.manifest._draft",
    **dict.fromkeys(
        ("parse_json", "read_manifest_file", "read_yaml", "read_yaml_as"), "trtguard.release.manifest._files"
    ),
    "import_flat": "trtguard.release.manifest._flat",
    "Distribution": "trtguard.release.manifest._probe",
    "ManifestSettings": "trtguard.release.manifest._settings",
}

__all__ = [
    "CreateInputs",
    "Distribution",
    "Draft",
    "Environment",
    "ManifestSettings",
    "create_manifest",
    "import_flat",
    "parse_json",
    "read_manifest_file",
    "read_yaml",
    "read_yaml_as",
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

"""The connaisseur fixtures: real cosign ``.sig`` manifests, payload blobs and keys from Docker Hub.

They live in the shared fixtures folder (``shared_fixtures``, SOURCES.md there says where they come from).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CONNAISSEUR = Path("cosign") / "connaisseur-registry"
ALICE_ONLY = "sha256:071bf7a986f1ca9cb2a1f0bc8392822a7777f90d58f2d2c6f271913e08de7c81"
THREE_SIGNERS = "sha256:bfec161fecb0a887df7cb85e4da327c65986ccda7060cf3cd92171c6c90d7533"
KEYLESS = "sha256:31dc72a13a0c34b40eb95419d2b2fd67320c856baf3b72da518023ee8d370aee"


def fixture_manifest(shared: Path, digest: str) -> tuple[bytes, dict[str, Any]]:
    """The ``.sig`` manifest of the image ``digest``: its bytes and the parsed document."""
    data = (shared / CONNAISSEUR / "manifests" / f"{digest.replace(':', '-')}.sig.json").read_bytes()
    return data, json.loads(data)

"""Which evidence a command line names: an attestation folder, the registries, or an empty folder.

Kept apart from :mod:`verifier.registry.evidence` so that an offline ``trtguard check`` loads neither the
registry code nor its configuration models (start-up time, issue 15): the registry side is imported when a
registry is named.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from verifier.base import InputError
from verifier.evidence import EvidenceSource
from verifier.evidence_folder import LocalEvidence

if TYPE_CHECKING:
    from verifier.registry.client import RegistryClient

__all__ = ["evidence_source"]


def evidence_source(
    *, attestations: Path | None, registry_config: Path | None, registry: bool = False
) -> tuple[EvidenceSource, RegistryClient | None]:
    """The evidence a command line names, and the registry client to close when done (None: nothing to close).

    ``--attestations DIR`` is a folder (read now, so this blocks); ``--registry-config FILE`` or ``registry``
    means the registries; neither is an empty folder, which answers every question with "cannot be checked
    offline". Both are an :class:`InputError`: a folder and the registries would answer differently.
    """
    if attestations is not None and (registry_config is not None or registry):
        raise InputError(
            "--attestations (an offline folder) and the registries (--registry, --registry-config) are "
            "alternatives",
            location="--attestations",
            hint="check offline against a folder, or against the registries",
        )
    if attestations is not None or (registry_config is None and not registry):
        return LocalEvidence(attestations), None
    # The registry side (httpx, the configuration models, cosign's layouts) loads only here.
    from verifier.registry.client import RegistryClient  # noqa: PLC0415
    from verifier.registry.config import load_registry_config  # noqa: PLC0415
    from verifier.registry.evidence import RegistryEvidence  # noqa: PLC0415

    client = RegistryClient(load_registry_config(registry_config) if registry_config else None)
    return RegistryEvidence(client), client

"""Reading OCI registries: the distribution client, cosign's layouts, engine artifacts, registry evidence.

Import from the modules (``verifier.registry.client``, ``.config``, ``.evidence``, …); see ``README.md`` here
for the configuration file, the checks and the layouts. Writing to registries is the release tooling's
(``trtguard.release``).
"""

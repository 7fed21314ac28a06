"""OCI registries: the distribution client, cosign's signature layouts, engine artifacts, registry evidence.

Import from the modules (``verifier.registry.client``, ``.config``, ``.evidence``, …); see ``README.md`` here
for the configuration file, the checks and the layouts.
"""

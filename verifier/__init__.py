"""Everything that checks an artifact against a claim.

OCI references and registries, cosign-compatible keys and signatures, DSSE/in-toto attestations, engine
build manifests and TensorRT engine files. This package knows nothing about admission.
"""

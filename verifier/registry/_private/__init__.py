"""Internals of ``verifier.registry``."""

"""Internals of the engine verifier: the GPU child program and its supervisor."""

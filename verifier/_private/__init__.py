"""Internals: not part of the public API."""

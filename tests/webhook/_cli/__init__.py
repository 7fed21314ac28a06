"""Tests of the `webhook._cli` package."""

"""Tests of the `decisionlog` package."""

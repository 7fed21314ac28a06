"""Tests of the `webhook` package."""

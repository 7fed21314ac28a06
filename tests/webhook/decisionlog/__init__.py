"""Tests of the `webhook.decisionlog` package."""

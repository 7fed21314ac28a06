"""Errors of the decision log."""

from __future__ import annotations

from verifier.errors import TrtguardError


class DecisionLogError(TrtguardError):
    """The decision log cannot be opened, read or written as asked."""

    exit_code = 1


class DecisionLogUnavailable(DecisionLogError):
    """The store did not take the record (down, locked, too slow): the decision was not recorded."""

"""Errors of the decision log."""

from __future__ import annotations

from verifier.base import TrtguardError


class DecisionLogError(TrtguardError):
    """The decision log cannot be opened, read or written as asked."""

    exit_code = 1


class DecisionLogUnavailable(DecisionLogError):
    """The store did not take the record (down, locked, too slow): the decision was not recorded."""


class DecisionLogInDoubt(DecisionLogUnavailable):
    """The store took the record but did not confirm it in time: it may still land, and is then followed by an
    undelivered record naming its ``record_id`` (:mod:`decisionlog._undelivered`)."""


def describe(error: BaseException) -> str:
    """What went wrong, in words: a decision-log error's message, else the exception's text or type."""
    if isinstance(error, DecisionLogError):
        return error.message
    return str(error) or type(error).__name__

"""Typed errors with user-facing diagnostics.

Every error that trtguard reports to a person derives from :class:`TrtguardError`. It carries the message
(what is wrong), where it is (file, line, field, image or engine) and a hint (what to do). Command-line entry
points print :meth:`TrtguardError.diagnostics` instead of a traceback.
"""

from __future__ import annotations


class TrtguardError(Exception):
    """Base class of all errors that reach a user."""

    #: Process exit status a command-line entry point uses for this error.
    exit_code: int = 2

    def __init__(self, message: str, *, location: str | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.location = location
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.location}: {self.message}" if self.location else self.message

    def diagnostics(self) -> str:
        """The full text for a person: location, message and, where known, what to do.

        Messages quote names and values from the input. Every invisible or line-breaking character in them
        is written out (:func:`verifier.base.visible`) but the newlines that separate a message's own
        lines (a list of problems); the location, a file or a field, is written out whole.
        """
        # Imported here: a command that shows no error does not load it (start-up time, issue 15).
        from verifier.base._visible import visible  # noqa: PLC0415

        def lines(text: str) -> str:
            return "\n".join(map(visible, text.split("\n")))

        text = f"{visible(self.location)}: {lines(self.message)}" if self.location else lines(self.message)
        if self.hint:
            text += f"\n  hint: {lines(self.hint)}"
        return text


class InputError(TrtguardError):
    """A file, document or argument given by the user is malformed."""


class VerificationError(TrtguardError):
    """An artifact did not verify: bad signature, digest mismatch, claim not met."""

    exit_code = 1


class EvidenceUnavailable(TrtguardError):
    """Evidence (a signature, an attestation, a digest) could not be obtained.

    ``transient`` is true for failures that may go away on retry (a registry that is down, slow or
    rate-limited) and false for definitive answers (the registry says there is no such signature). Only
    definitive failures may be cached.
    """

    exit_code = 1

    def __init__(
        self,
        message: str,
        *,
        transient: bool,
        location: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, location=location, hint=hint)
        self.transient = transient

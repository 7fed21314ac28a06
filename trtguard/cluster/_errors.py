"""How a request to the API server fails: refused, unanswered (worth another try), past the audit's time."""

from __future__ import annotations

from verifier.base import TrtguardError

__all__ = ["ApiError", "AuditTimeout", "Unanswered"]


class ApiError(TrtguardError):
    """The API server refused a request, or could not be reached, after the retries; or what it answered
    is not one the audit reads (too large, a list that never ends)."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        location: str | None = None,
        hint: str = "check the kubeconfig, the RBAC and the API server",
    ) -> None:
        super().__init__(message, location=location, hint=hint)
        self.status = status


class AuditTimeout(ApiError):
    """The audit's own deadline (``--timeout``) passed: it stops, whatever is left to do."""

    def __init__(self, timeout: float, doing: str) -> None:
        super().__init__(
            f"the audit ran out of its {timeout:g} s (--timeout) {doing}",
            hint="give it longer (--timeout), audit one namespace at a time (--namespace), or check why the "
            "API server or the registries answer slowly",
        )


class Unanswered(ApiError):
    """No whole answer came (no connection, a timeout, a body cut off): worth asking again."""

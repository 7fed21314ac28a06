"""Who asks: the requester of an admission (``userInfo``) and the policy's sets of requesters.

The webhook reads the requester from the AdmissionRequest; ``trtguard check`` takes it from ``--as`` and
``--as-group``, filled in the way the API server fills in an impersonated user; without one it is unknown,
and a rule that depends on it cannot be checked (never passed).

Globs: ``*`` matches any run of characters and ``?`` one character, neither of them ``:``, so that
``system:serviceaccount:argocd:*`` names the service accounts of ``argocd`` and nothing with more segments.
Everything else matches itself (``[`` included). A service account ``namespace/name`` stands for the
username ``system:serviceaccount:namespace:name``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from pydantic import Field, model_validator

from policies._strict import StrictModel

__all__ = ["Requester", "RequesterRule", "RequesterSet", "describe_set", "glob_matches", "in_set"]

#: The username prefix of Kubernetes service accounts, and the groups the API server gives them.
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
_AUTHENTICATED = "system:authenticated"
_ANONYMOUS = "system:anonymous"


class RequesterSet(StrictModel):
    """Requesters of an admission (``userInfo``), by globs in which ``*`` and ``?`` never match ``:``."""

    usernames: list[str] | None = Field(default=None, min_length=1, description="username globs")
    groups: list[str] | None = Field(default=None, min_length=1, description="group globs")
    service_accounts: list[str] | None = Field(
        default=None,
        min_length=1,
        description="'namespace/name' globs (system:serviceaccount:namespace:name)",
    )

    @model_validator(mode="after")
    def _something(self) -> RequesterSet:
        if not (self.usernames or self.groups or self.service_accounts):
            raise ValueError("give usernames, groups or serviceAccounts")
        for text in self.service_accounts or []:
            if not re.fullmatch(r"[^/:]+/[^/:]+", text):
                raise ValueError(f"service account {text!r} is not 'namespace/name' (globs allowed in each)")
        return self


class RequesterRule(StrictModel):
    """Who may create or change the workloads a policy selects."""

    allowed: RequesterSet


@dataclass(frozen=True, slots=True)
class Requester:
    """The user (or service account) on whose behalf a request is made, with its groups."""

    username: str
    groups: tuple[str, ...] = ()

    @classmethod
    def impersonated(cls, username: str, groups: tuple[str, ...] = ()) -> Requester:
        """The requester the API server sees for ``kubectl --as USER --as-group GROUP``.

        A service account without ``--as-group`` gets ``system:serviceaccounts`` and
        ``system:serviceaccounts:<namespace>``; every requester but ``system:anonymous`` gets
        ``system:authenticated`` (the API server's impersonation filter does the same).
        """
        found = list(dict.fromkeys(groups))
        if not found and username.startswith(SERVICE_ACCOUNT_PREFIX):
            namespace = username[len(SERVICE_ACCOUNT_PREFIX) :].split(":", 1)[0]
            found = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
        if username != _ANONYMOUS and _AUTHENTICATED not in found:
            found.append(_AUTHENTICATED)
        return cls(username, tuple(found))

    def __str__(self) -> str:
        groups = f" (groups: {', '.join(self.groups)})" if self.groups else ""
        return f"{self.username or '<no username>'}{groups}"


@functools.lru_cache(maxsize=1024)
def _glob(pattern: str) -> re.Pattern[str]:
    parts = ("[^:]*" if c == "*" else "[^:]" if c == "?" else re.escape(c) for c in pattern)
    return re.compile("".join(parts))


def glob_matches(pattern: str, value: str) -> bool:
    """Whether ``value`` matches ``pattern`` (``*`` and ``?`` stop at ``:``)."""
    return _glob(pattern).fullmatch(value) is not None


def in_set(requester: Requester, allowed: RequesterSet) -> bool:
    """Whether the requester is one of ``allowed``: a username, a group or a service account matches."""
    if any(glob_matches(p, requester.username) for p in allowed.usernames or ()):
        return True
    if any(glob_matches(p, group) for p in allowed.groups or () for group in requester.groups):
        return True
    if requester.username.startswith(SERVICE_ACCOUNT_PREFIX):
        account = requester.username[len(SERVICE_ACCOUNT_PREFIX) :].split(":")
        if len(account) == 2:
            for pattern in allowed.service_accounts or ():
                namespace, name = pattern.split("/")
                if glob_matches(namespace, account[0]) and glob_matches(name, account[1]):
                    return True
    return False


def describe_set(allowed: RequesterSet) -> str:
    """``users a, b; groups c; service accounts ns/name`` for messages."""
    parts = []
    for label, values in (
        ("users", allowed.usernames),
        ("groups", allowed.groups),
        ("service accounts", allowed.service_accounts),
    ):
        if values:
            parts.append(f"{label} {', '.join(values)}")
    return "; ".join(parts)

"""What a policy evaluation produces: violations and the decision for one resource."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Action(StrEnum):
    """What a violation of a policy does."""

    DENY = "Deny"
    WARN = "Warn"
    AUDIT = "Audit"


@dataclass(frozen=True, slots=True)
class Violation:
    """One rule of one policy not met by one image or engine (or by the workload as a whole).

    ``error`` is true when the rule could not be checked at all (offline, registry down, out of time); its
    ``action`` then comes from the policy's ``onError`` rather than its ``action``.
    """

    policy: str
    rule: str
    message: str
    fix: str
    action: Action
    image: str | None = None
    engine: str | None = None
    path: str | None = None
    error: bool = False

    def one_line(self) -> str:
        """``policy/rule: [image|engine] message; fix`` on one line, for logs and admission messages."""
        subject = self.image or self.engine
        where = f" {subject}:" if subject else ""
        return f"{self.policy}/{self.rule}:{where} {self.message}; fix: {self.fix}"

    def to_json(self) -> dict[str, Any]:
        """The machine-readable form used by ``check --format json`` and the decision log."""
        data: dict[str, Any] = {
            "policy": self.policy,
            "rule": self.rule,
            "message": self.message,
            "fix": self.fix,
            "action": self.action.value,
            "error": self.error,
        }
        for key in ("image", "engine", "path"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        return data


@dataclass(frozen=True, slots=True)
class ArtifactRecord:
    """An image or engine the decision was about, with its digest where it is known.

    For an engine, ``name`` (the image volume's or annotation entry's name) and ``containers`` (those that
    may run it) say which engine of the workload it is, so that its successor is found whatever
    repository it comes from.
    """

    reference: str
    digest: str | None
    path: str
    name: str | None = None
    containers: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """JSON form for the decision log and check output."""
        data: dict[str, Any] = {"reference": self.reference, "digest": self.digest, "path": self.path}
        if self.name is not None:
            data["name"] = self.name
            data["containers"] = list(self.containers)
        return data


@dataclass(frozen=True, slots=True)
class AdmittedEngine:
    """An engine of a workload's last real admission, as the decision log recorded it."""

    reference: str
    #: The image volume's or annotation entry's name; None in records written before names were kept.
    name: str | None = None
    containers: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Decision:
    """The verdict for one resource under one policy set."""

    kind: str
    namespace: str | None
    name: str | None
    policy_revision: str
    matched_policies: tuple[str, ...] = ()
    violations: tuple[Violation, ...] = ()
    images: tuple[ArtifactRecord, ...] = ()
    engines: tuple[ArtifactRecord, ...] = ()
    notes: tuple[str, ...] = field(default=())
    unjudged: str | None = None
    """Why nothing was judged: the object names no image of a known workload, or trtguard does not know
    its kind and was not asked to judge it (its images are in ``images``, unchecked)."""

    @property
    def allowed(self) -> bool:
        """False as soon as one violation's action is Deny; Warn and Audit never deny."""
        return not any(v.action is Action.DENY for v in self.violations)

    @property
    def denials(self) -> tuple[Violation, ...]:
        """Violations whose action is Deny."""
        return tuple(v for v in self.violations if v.action is Action.DENY)

    @property
    def warnings(self) -> tuple[Violation, ...]:
        """Violations whose action is Warn."""
        return tuple(v for v in self.violations if v.action is Action.WARN)

    @property
    def audits(self) -> tuple[Violation, ...]:
        """Violations whose action is Audit (recorded, never shown to the user as a warning)."""
        return tuple(v for v in self.violations if v.action is Action.AUDIT)

    def to_json(self) -> dict[str, Any]:
        """One object per resource, as ``trtguard check --format json`` prints it."""
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "allowed": self.allowed,
            "violations": [v.to_json() for v in self.denials],
            "warnings": [v.one_line() for v in self.warnings],
            "audit": [v.to_json() for v in self.audits],
            "policies": list(self.matched_policies),
            "policy_revision": self.policy_revision,
            "images": [i.to_json() for i in self.images],
            "engines": [e.to_json() for e in self.engines],
            "notes": list(self.notes),
            **({"skipped": self.unjudged} if self.unjudged is not None else {}),
        }

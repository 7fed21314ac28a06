"""Violations: how they are worded, and a check that cannot answer turned into one; and the rule contract.

A rule either holds or yields a :class:`~policies.results.Violation`. Evidence that cannot be fetched
(:class:`~verifier.base.EvidenceUnavailable`: offline, a registry that fails, time running out) is a
violation under the policy's ``onError``; evidence that was fetched and refused
(:class:`~verifier.base.VerificationError`) is one under its ``action``. :meth:`Findings.check` does both
for every rule family.

The rule contract: each rule family's module exposes its rule, a :class:`WorkloadFamily`,
:class:`ImageFamily` or :class:`EngineFamily`: its ``name`` (the policy field it judges), ``applies``
(whether a policy sets that field: the rule's guard) and ``check``, one coroutine judging one subject
(:mod:`policies.evaluation`) into the :class:`Findings` it is handed. The evaluator applies them from one
ordered :class:`RuleTable` (``policies._judging.RULES``), as Kyverno's engine picks a handler per rule and
collects what it finds.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from policies.loader import CompiledPolicy
from policies.results import Action, Violation
from verifier.base import EvidenceUnavailable, TrtguardError, VerificationError, quick_init

if TYPE_CHECKING:
    from policies.evaluation import EngineSubject, Evaluation, ImageSubject, WorkloadSubject

__all__ = [
    "EngineFamily",
    "Findings",
    "ImageFamily",
    "Refusal",
    "RuleTable",
    "WorkloadFamily",
    "has_build_manifest",
    "unavailable",
    "violation",
]

T = TypeVar("T")


def violation(
    policy: CompiledPolicy,
    rule: str,
    message: str,
    fix: str,
    *,
    image: str | None = None,
    engine: str | None = None,
    path: str | None = None,
    error: bool = False,
    indeterminate: bool = False,
    unknown: Action | None = None,
) -> Violation:
    """A violation of ``rule``; ``error`` when it could not be checked (the policy's ``onError`` applies),
    ``indeterminate`` when its evidence cannot tell (``unknown``, else the policy's ``onIndeterminate``)."""
    spec = policy.spec
    action = spec.on_error if error else spec.action
    if indeterminate:
        action = unknown or spec.on_indeterminate
    return Violation(
        policy=policy.name,
        rule=rule,
        message=message,
        fix=fix,
        action=action,
        image=image,
        engine=engine,
        path=path,
        error=error,
        indeterminate=indeterminate and not error,
    )


def unavailable(
    policy: CompiledPolicy,
    rule: str,
    error: TrtguardError,
    *,
    image: str | None = None,
    engine: str | None = None,
    path: str | None = None,
) -> Violation:
    """The violation for a rule that could not be checked: the policy's ``onError`` applies."""
    return violation(
        policy,
        rule,
        f"could not be checked: {error.message}",
        error.hint or "retry when the registry is reachable",
        image=image,
        engine=engine,
        path=path,
        error=True,
    )


@quick_init
@dataclass(frozen=True, slots=True)
class Refusal:
    """How :meth:`Findings.check` words evidence that was found and refused (a ``VerificationError``)."""

    fix: str
    """What to do about it."""
    hint_first: bool = False
    """The error's own hint, when it has one, says what to do instead of ``fix``."""
    about: str | None = None
    """What was refused, put before the error's message (the subject's own evidence when None)."""
    error: bool = False
    """The refused evidence is not the subject's own (a baseline it is compared with): ``onError`` applies."""


class Findings:
    """What one policy finds about one image or engine: violations that name it and where it is used."""

    __slots__ = ("engine", "image", "path", "policy", "violations")

    def __init__(
        self,
        policy: CompiledPolicy,
        *,
        path: str | None,
        image: str | None = None,
        engine: str | None = None,
        violations: list[Violation] | None = None,
    ) -> None:
        self.policy = policy
        self.path = path
        self.image = image
        self.engine = engine
        self.violations: list[Violation] = [] if violations is None else violations

    def about(self, *, image: str) -> Findings:
        """The same findings, naming ``image`` from now on (a tag resolved to the digest that runs)."""
        return Findings(
            self.policy, path=self.path, image=image, engine=self.engine, violations=self.violations
        )

    def add(
        self,
        rule: str,
        message: str,
        fix: str,
        *,
        error: bool = False,
        indeterminate: bool = False,
        unknown: Action | None = None,
    ) -> None:
        """Record a violation of ``rule``; ``error`` when it could not be checked, ``indeterminate`` when
        its evidence cannot tell (then ``unknown``, else the policy's ``onIndeterminate``, decides)."""
        self.violations.append(
            violation(
                self.policy,
                rule,
                message,
                fix,
                image=self.image,
                engine=self.engine,
                path=self.path,
                error=error,
                indeterminate=indeterminate,
                unknown=unknown,
            )
        )

    def logged(self, rule: str, message: str, fix: str) -> None:
        """Record a failed check that a verification level only logs (Notation's ``permissive``, ``audit``):
        a warning, never a denial (an audit entry under a policy whose action is Audit), so that every
        output, the admission response and the decision log show it."""
        spec = self.policy.spec
        self.violations.append(
            Violation(
                policy=self.policy.name,
                rule=rule,
                message=message,
                fix=fix,
                action=Action.AUDIT if spec.action is Action.AUDIT else Action.WARN,
                image=self.image,
                engine=self.engine,
                path=self.path,
            )
        )

    def unavailable(self, rule: str, error: TrtguardError) -> None:
        """Record that ``rule`` could not be checked, for ``error``."""
        self.violations.append(
            unavailable(self.policy, rule, error, image=self.image, engine=self.engine, path=self.path)
        )

    async def check(
        self, rules: str | Sequence[str], question: Awaitable[T], *, refused: Refusal | None = None
    ) -> T | None:
        """The answer to ``question``, or None with a violation of each of ``rules`` recorded instead.

        ``EvidenceUnavailable`` is a violation under ``onError`` ("could not be checked"); a
        ``VerificationError`` is worded by ``refused``. Without ``refused`` a ``VerificationError`` goes on
        to the caller (the evaluator then confines it to this image or engine, under ``onError``). A caller
        that reads the answer asks a question that never answers None.
        """
        try:
            return await question
        except EvidenceUnavailable as error:
            for rule in _names(rules):
                self.unavailable(rule, error)
        except VerificationError as error:
            if refused is None:
                raise
            message = error.message if refused.about is None else f"{refused.about}: {error.message}"
            fix = (error.hint or refused.fix) if refused.hint_first else refused.fix
            for rule in _names(rules):
                self.add(rule, message, fix, error=refused.error)
        return None


def _names(rules: str | Sequence[str]) -> tuple[str, ...]:
    """The rule ids :meth:`Findings.check` records a violation of."""
    return (rules,) if isinstance(rules, str) else tuple(rules)


@dataclass(frozen=True, slots=True)
class WorkloadFamily:
    """A rule over the workload as a whole (``requester``), or over what the engine rules left unjudged."""

    name: str
    """The policy field it judges (``requester``): each family is registered once (:class:`RuleTable`)."""
    applies: Callable[[CompiledPolicy], bool]
    """Whether the policy sets that field: a rule that does not apply is not run."""
    check: Callable[[Evaluation, Findings, WorkloadSubject], Awaitable[None]]
    """Judge the workload; what it finds goes into the findings (about no one image or engine)."""


@dataclass(frozen=True, slots=True)
class ImageFamily:
    """A rule over each image of the workload (``images``)."""

    name: str
    applies: Callable[[CompiledPolicy], bool]
    check: Callable[[Evaluation, Findings, ImageSubject], Awaitable[None]]
    """Judge one image, into findings that name it."""


@dataclass(frozen=True, slots=True)
class EngineFamily:
    """A rule over each engine of the workload (``models.*``, ``changeControl``)."""

    name: str
    applies: Callable[[CompiledPolicy], bool]
    check: Callable[[Evaluation, Findings, EngineSubject], Awaitable[EngineSubject | None]]
    """Judge one engine, into findings that name it; the subject the rules after it judge (the build
    manifest rule adds the manifest it verified), or None when they cannot judge it (no manifest that can
    be judged): the engine's remaining rules are not run."""


def has_build_manifest(policy: CompiledPolicy) -> bool:
    """Whether ``policy`` has ``models.buildManifest``: when the engine rules over the manifest apply."""
    models = policy.spec.models
    return models is not None and models.build_manifest is not None


@dataclass(frozen=True, slots=True)
class RuleTable:
    """Every rule family, in the order the evaluator applies them to one policy."""

    workload: tuple[WorkloadFamily, ...]
    """First, over the workload."""
    images: tuple[ImageFamily, ...]
    """Then, in this order, over each image."""
    engines: tuple[EngineFamily, ...]
    """Then, in this order, over each engine the policy judges."""
    afterwards: tuple[WorkloadFamily, ...]
    """Last, over the workload again, once its engines are judged."""

    def families(self) -> tuple[str, ...]:
        """The name of every family, in order."""
        parts: tuple[tuple[WorkloadFamily | ImageFamily | EngineFamily, ...], ...] = (
            self.workload,
            self.images,
            self.engines,
            self.afterwards,
        )
        return tuple(rule.name for part in parts for rule in part)

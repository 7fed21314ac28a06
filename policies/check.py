"""``trtguard check``: the policy evaluator run offline over rendered manifests.

Inputs are files, directories (walked for ``*.yaml``, ``*.yml``, ``*.json``) and standard input, each holding
one or more YAML/JSON documents (``List`` kinds are flattened). Every document of every input is reported:

- a resource with nothing to judge (a Service, a Rollout that takes its template from a Deployment) is
  reported as skipped, with why;
- a resource of a kind trtguard does not know is reported with the images found in it, unchecked, and
  counted (``--unknown-kinds fail`` makes them fail the run);
- a malformed document (and a folder that is a Helm chart, or a file that looks like an unrendered template)
  is an input error with its location, and so is a resource that names another namespace than
  ``--namespace`` (kubectl refuses those too); any input error makes the run end with status 2, after every
  other document has been checked.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import multiprocessing
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from policies.evaluator import PolicyEvaluator
from policies.pinning import apply_patch, patch_for
from policies.requesters import Requester
from policies.results import Action, Decision
from policies.workload_model import iter_resources
from verifier.base import Deadline, Document, InputError, TrtguardError, decode, load_each_document

_INPUT_SUFFIXES = (".yaml", ".yml", ".json")
_MAX_INPUT = 256 * 1024 * 1024
_PATH_TOKEN = re.compile(r"([^.\[\]]+)|\[([^\]]*)\]")
# Helm's actions: its objects (.Values, .Release, …), its functions and control words, `$` variables and the
# trim marker. Other tools' placeholders ({{args.x}} of Argo, {{.Name}} of KServe) are not Helm's.
_TEMPLATE_ACTION = re.compile(
    r"\{\{-?\s*(?:-|\$|\.(?:Values|Release|Chart|Capabilities|Files|Template)\b|"
    r"(?:include|template|toYaml|tpl|if|else|end|range|with|define|required|default)\b)"
)


@dataclass(frozen=True, slots=True)
class Resource:
    """One Kubernetes object read from an input, with where it came from.

    Its ``repr`` leaves out the object: Python reprs the result of ``asyncio.run`` (a list of these) when it
    restores the Ctrl-C handler, and an input may be as large as the YAML reader's limits allow.
    """

    obj: dict[str, Any] = field(repr=False)
    source: str
    document: Document = field(repr=False)

    @property
    def line(self) -> int:
        """1-based line of the document in its source."""
        return self.document.line

    @property
    def kind(self) -> str:
        """The object's ``kind``."""
        return str(self.obj["kind"])

    def _metadata(self, key: str) -> str | None:
        metadata = self.obj.get("metadata")
        value = metadata.get(key) if isinstance(metadata, dict) else None
        return value if isinstance(value, str) else None

    @property
    def namespace(self) -> str | None:
        """``metadata.namespace`` when the object names one."""
        return self._metadata("namespace")

    @property
    def name(self) -> str | None:
        """``metadata.name`` (or ``generateName``) when present."""
        return self._metadata("name") or self._metadata("generateName")

    @property
    def title(self) -> str:
        """``Kind namespace/name`` for reports."""
        namespace = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {namespace}{self.name or '<unnamed>'}"

    def line_of(self, json_path: str | None) -> int:
        """Line of the value at a violation's JSON path (``spec.containers[0].image``) in the document."""
        if not json_path:
            return self.line
        parts: list[str | int] = []
        for name, index in _PATH_TOKEN.findall(json_path):
            if name:
                parts.append(name)
            else:
                parts.append(int(index) if index.isdigit() else index)
        # The document may be a List: its items' paths are relative to the item.
        offset = self.document.data is not self.obj and _item_prefix(self.document.data, self.obj)
        return self.document.line_of((*offset, *parts) if offset else tuple(parts))


def _item_prefix(data: Any, obj: Any) -> tuple[str | int, ...]:
    if isinstance(data, dict) and isinstance(data.get("items"), list):
        for index, item in enumerate(data["items"]):
            if item is obj:
                return ("items", index)
    return ()


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to one resource: a decision (``unjudged`` says why when nothing was judged), or the input
    error that kept it from being checked."""

    resource: Resource
    result: Decision | InputError

    @property
    def decision(self) -> Decision | None:
        """The decision, unless the resource could not be checked."""
        return self.result if isinstance(self.result, Decision) else None

    @property
    def error(self) -> InputError | None:
        """Why the resource could not be checked, if it could not."""
        return self.result if isinstance(self.result, InputError) else None

    @property
    def skipped(self) -> str | None:
        """Why nothing was judged, when nothing was."""
        return self.result.unjudged if isinstance(self.result, Decision) else None

    @property
    def unchecked(self) -> bool:
        """A resource of a kind trtguard does not know that names images (listed, not checked)."""
        return (
            isinstance(self.result, Decision)
            and self.result.unjudged is not None
            and bool(self.result.images)
        )


@dataclass
class CheckReport:
    """Every outcome plus the input problems met on the way.

    ``fail_unknown_kinds``: a resource of an unknown kind that names images fails the run (exit status 1).
    """

    outcomes: list[Outcome] = field(default_factory=list)
    problems: list[InputError] = field(default_factory=list)
    policy_revision: str = ""
    fail_unknown_kinds: bool = False

    @property
    def denied(self) -> int:
        """How many resources were denied."""
        return sum(1 for o in self.outcomes if o.decision is not None and not o.decision.allowed)

    @property
    def unchecked(self) -> int:
        """How many resources of unknown kinds name images that were not checked."""
        return sum(1 for o in self.outcomes if o.unchecked)

    @property
    def errors(self) -> int:
        """Input errors: documents that could not be read, and resources that could not be checked."""
        return len(self.problems) + sum(1 for o in self.outcomes if o.error is not None)

    @property
    def exit_code(self) -> int:
        """2 on any input error, else 1 if something was denied (or, with ``fail_unknown_kinds``, left
        unchecked), else 0."""
        if self.errors:
            return 2
        return 1 if self.denied or (self.fail_unknown_kinds and self.unchecked) else 0


def input_files(inputs: Sequence[str], problems: list[InputError] | None = None) -> list[str]:
    """Expand directories (sorted, recursive); ``-`` stays standard input.

    A directory that holds a ``Chart.yaml`` is a Helm chart, whose templates are not manifests yet: it is an
    input error in ``problems`` (when given) rather than a walk through unrendered files.
    """
    files: list[str] = []
    for item in inputs:
        path = Path(item)
        if item != "-" and path.is_dir():
            if (path / "Chart.yaml").is_file() and problems is not None:
                problems.append(
                    InputError(
                        "this is a Helm chart, not rendered manifests",
                        location=item,
                        hint=f"render it first: helm template RELEASE {item} | trtguard check … -",
                    )
                )
                continue
            files += [str(p) for p in sorted(path.rglob("*")) if p.is_file() and p.suffix in _INPUT_SUFFIXES]
        else:
            files.append(item)
    return files


def read_resources(
    inputs: Sequence[str], read_stdin: Callable[[int], bytes] | None, problems: list[InputError]
) -> Iterator[Resource]:
    """Every Kubernetes object in ``inputs``; problems are appended to ``problems`` and reading goes on,
    to the next input and to the next document of the same input.

    ``read_stdin(limit)`` reads standard input for ``-``; without it, ``-`` is an input error.
    """
    for item in input_files(inputs, problems):
        source = "<stdin>" if item == "-" else item
        try:
            if item == "-" and read_stdin is None:
                raise InputError("standard input (-) is not available here; name the files")
            raw = read_stdin(_MAX_INPUT + 1) if item == "-" and read_stdin else _read_file(Path(item))
            if len(raw) > _MAX_INPUT:
                raise InputError(f"input is larger than {_MAX_INPUT // (1024 * 1024)} MiB", location=source)
            text = decode(raw, source)
        except InputError as error:
            problems.append(error)
            continue
        for document in load_each_document(text, source):
            if isinstance(document, InputError):
                problems.append(_unrendered(document, text))
            else:
                yield from _resources(document, source, problems)


def _unrendered(error: InputError, text: str) -> InputError:
    """``error`` said plainly when the input holds Helm template actions: a chart template, not a manifest."""
    found = _TEMPLATE_ACTION.search(text)
    if found is None:
        return error
    line = text.count("\n", 0, found.start()) + 1
    return InputError(
        f"this looks like an unrendered Helm template (line {line} holds a {{{{ … }}}} action), so it is not "
        f"YAML yet: {error.message}",
        location=error.location,
        hint="run helm template first and check its output: helm template RELEASE CHART | trtguard check … -",
    )


def _read_file(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise InputError(f"cannot read: {error.strerror}", location=str(path)) from None


def _resources(document: Document, source: str, problems: list[InputError]) -> Iterator[Resource]:
    where = f"{source}:{document.line}"
    try:
        objects = list(iter_resources(document.data))
    except InputError as error:
        problems.append(InputError(error.message, location=where, hint=error.hint))
        return
    for obj in objects:
        if not isinstance(obj, dict) or not isinstance(obj.get("kind"), str) or not obj.get("apiVersion"):
            problems.append(
                InputError(
                    "not a Kubernetes object: apiVersion and kind are required",
                    location=where,
                    hint="check that the input is rendered Kubernetes YAML (e.g. `helm template` output)",
                )
            )
            continue
        yield Resource(obj=obj, source=source, document=document)


async def check(
    evaluator: PolicyEvaluator,
    resources: Sequence[Resource],
    *,
    namespace: str | None = None,
    unverifiable: Action | None = None,
    unknown_kinds: Literal["report", "judge"] = "report",
    concurrency: int = 32,
    requester: Requester | None = None,
    pin: bool = False,
) -> list[Outcome]:
    """Evaluate every resource; ``unverifiable`` overrides the action of rules that could not be checked.

    ``pin`` judges as the mutating webhook does (``check --fix``): each decision's ``pins`` say what
    ``pinDigest`` rules verified (:func:`fixed` applies them).

    ``requester`` is who would apply the resources (``--as``); without one, rules about the requester
    cannot be checked (``unverifiable`` decides what that does).

    A resource of a kind the policy set does not know is reported with the images found in it, unchecked;
    with ``unknown_kinds="judge"`` they are judged, as the webhook judges such a resource sent to it.

    ``namespace`` is where the resources are applied, as with ``kubectl apply --namespace``: a resource that
    names none is judged there, and one that names another is an input error (kubectl refuses it; for
    ``helm template`` output, render with ``--namespace`` instead). ``concurrency`` resources are evaluated
    at once when the evidence comes from the network; from memory, one after another (concurrency would
    only add scheduling).
    """

    async def one(resource: Resource) -> Outcome:
        if namespace is not None and resource.namespace is not None and resource.namespace != namespace:
            return Outcome(
                resource=resource,
                result=InputError(
                    f"{resource.title} names namespace {resource.namespace!r}, but the check is for "
                    f"namespace {namespace!r} (--namespace); kubectl would refuse to apply it there",
                    location=f"{resource.source}:{resource.line_of('metadata.namespace')}",
                    hint="render the manifests for that namespace (helm template --namespace NS), or check "
                    "without --namespace to judge each resource in the namespace it names",
                ),
            )
        decision = await evaluator.evaluate(
            resource.obj,
            namespace=None if resource.namespace else namespace,
            deadline=Deadline.never(),
            unknown_kinds=unknown_kinds,
            requester=requester,
            pin=pin,
            offload=not inline,
        )
        if unverifiable is not None:
            decision = replace(
                decision,
                violations=tuple(
                    replace(v, action=unverifiable) if v.error else v for v in decision.violations
                ),
            )
        return Outcome(resource=resource, result=decision)

    # From memory, one resource after another: no other work to go on with while one is read, so each is read
    # where it is judged rather than handed to a thread when large (counting its values first cost 4 % of
    # a resource).
    inline = not evaluator.evidence.concurrent_lookups
    outcomes: list[Outcome | None] = [None] * len(resources)
    pending = iter(enumerate(resources))

    async def worker() -> None:
        for index, resource in pending:
            outcomes[index] = await one(resource)

    workers = min(1 if inline else concurrency, len(resources))
    await asyncio.gather(*(worker() for _ in range(workers)))
    return [o for o in outcomes if o is not None]


#: Resources judged per task of :func:`check_in_processes`, at most: enough that a task's own event loop
#: costs nothing beside it; at least a quarter of each process's share, so that the processes end together.
_TASK = 250
_TASK_LEAST = 25
#: Fewer resources than this are judged in one process: starting others would cost more than it saves.
_FORK_AT = 200
#: What the processes forked by :func:`check_in_processes` judge, theirs from the fork (nothing is sent):
#: the evaluator, the resources, how many each task judges, the options of :func:`check`, and a flag for
#: each task, shared memory, that the process taking it up sets (which tasks a process that died had).
_forked: tuple[PolicyEvaluator, Sequence[Resource], int, dict[str, Any], Any] | None = None


def check_in_processes(
    evaluator: PolicyEvaluator, resources: Sequence[Resource], *, processes: int, **options: Any
) -> list[Outcome]:
    """:func:`check` (with ``options``), its resources shared among ``processes`` forked processes.

    Each resource's decision depends on that resource alone (no verdict is kept from one to the next), so
    the outcomes are those of :func:`check`, in the order of ``resources``; each process keeps its own cache
    of verified evidence. Judged here instead, one after another: with one process, fewer resources than
    :data:`_FORK_AT`, evidence from the network (``check`` asks for it concurrently), no ``fork`` on this
    system, or another thread running (what a fork copies of a thread's state would be inconsistent).
    A process that dies before its share is judged is a :class:`TrtguardError` (exit status 2), not a wait.
    """
    global _forked  # noqa: PLW0603 - handed to the forked processes by the fork itself
    if (
        processes < 2
        or len(resources) < _FORK_AT
        or evaluator.evidence.concurrent_lookups
        or "fork" not in multiprocessing.get_all_start_methods()
        or threading.active_count() > 1
    ):
        return asyncio.run(check(evaluator, resources, **options))
    size = min(_TASK, max(_TASK_LEAST, -(-len(resources) // (4 * processes))))
    tasks = range(0, len(resources), size)
    context = multiprocessing.get_context("fork")
    started = context.RawArray("b", len(tasks))
    _forked = (evaluator, resources, size, options, started)
    results: list[Decision | InputError] = []
    try:
        # An executor, not a Pool: a process that dies (killed, out of memory, a crash in C) breaks it, where
        # Pool.imap waits for that task forever. Its processes are forked at the first submit, before
        # the collector is turned off.
        with ProcessPoolExecutor(min(processes, len(tasks)), mp_context=context) as pool:
            parts = [pool.submit(_judge_part, start) for start in tasks]
            with _uncollected():
                try:
                    for part in parts:
                        results += part.result()
                except BrokenProcessPool:
                    raise _died(resources, tasks, parts, started) from None
    finally:
        _forked = None
    return [Outcome(resource=r, result=result) for r, result in zip(resources, results, strict=True)]


def _died(
    resources: Sequence[Resource],
    tasks: range,
    parts: Sequence[Future[list[Decision | InputError]]],
    started: Sequence[int],
) -> TrtguardError:
    """The error of a run whose process died: no report (some resources were never judged), and which
    resources were being judged when it did (each task taken up and not done; the others were stopped)."""
    lost = [i for i, part in enumerate(parts) if started[i] and part.exception() is not None]
    where = "; ".join(
        f"resources {tasks[i] + 1}-{min(tasks[i] + tasks.step, len(resources))} of {len(resources)} "
        f"(from {resources[tasks[i]].title}, {resources[tasks[i]].source}:{resources[tasks[i]].line})"
        for i in lost
    )
    return TrtguardError(
        "a checking process (--jobs) died (killed, out of memory, or crashed) "
        + (f"while judging one of: {where}" if where else "before it judged anything")
        + "; nothing was reported",
        hint="run again with --jobs 1 (one process, which says where it fails), or with fewer jobs if the "
        "machine ran out of memory",
    )


@contextlib.contextmanager
def _uncollected() -> Iterator[None]:
    """The decisions copied back from the processes, received without the cycle collector (they hold no
    cycles, yet it would rescan them over and over while they arrive); the processes were forked before."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _judge_part(start: int) -> list[Decision | InputError]:
    """The results of the forked resources from ``start`` on, one task's worth, in a forked process."""
    if _forked is None:
        raise RuntimeError("only called in a process forked by check_in_processes")
    evaluator, resources, size, options, started = _forked
    started[start // size] = 1
    outcomes = asyncio.run(check(evaluator, resources[start : start + size], **options))
    return [outcome.result for outcome in outcomes]


def fixed(outcome: Outcome) -> tuple[dict[str, Any], str | None]:
    """The resource with the digests its decision verified pinned (the webhook's ``/mutate`` patch), or as
    it was; with why it was left as it was when that is not simply for having nothing to pin (it could not
    be checked, its kind was not judged, it is denied)."""
    obj, decision = outcome.resource.obj, outcome.decision
    if outcome.error is not None:
        return obj, f"could not be checked ({outcome.error.message})"
    if decision is None or outcome.unchecked:
        return obj, "was not judged (a kind trtguard does not know; --unknown-kinds judge judges its images)"
    if not decision.allowed:
        return obj, "is denied, so nothing was pinned"
    if not decision.pins:
        return obj, None
    return apply_patch(obj, patch_for(obj, decision)), None


def error_lines(where: str, error: InputError) -> list[str]:
    """The table lines of a resource that could not be judged (``check`` and ``review`` print it so)."""
    return [f"ERROR  {where}: {error.message}", *([f"      fix: {error.hint}"] if error.hint else [])]


def problem_lines(problems: Iterable[InputError]) -> list[str]:
    """The table lines of input errors not about one resource (a file that did not read, a policy)."""
    lines: list[str] = []
    for problem in problems:
        first, *rest = problem.diagnostics().split("\n")
        lines += [f"ERROR  {first}", *rest]
    return lines

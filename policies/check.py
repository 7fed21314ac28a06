"""``trtguard check``: the policy engine run offline over rendered manifests.

Inputs are files, directories (walked for ``*.yaml``, ``*.yml``, ``*.json``) and standard input, each holding
one or more YAML/JSON documents (``List`` kinds are flattened). Documents that are not Pod-bearing kinds are
reported as skipped; malformed input is reported with its location and makes the run end with status 2, after
every other resource has been checked.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from policies.evaluator import PolicyEngine
from policies.requesters import Requester
from policies.results import Action, Decision
from policies.workload import NotAWorkload, iter_resources
from verifier.deadline import Deadline
from verifier.errors import InputError
from verifier.yamldoc import Document, decode, load_documents

_INPUT_SUFFIXES = (".yaml", ".yml", ".json")
_MAX_INPUT = 256 * 1024 * 1024
_PATH_TOKEN = re.compile(r"([^.\[\]]+)|\[([^\]]*)\]")


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
    """What happened to one resource: a decision, or the reason it was skipped."""

    resource: Resource
    decision: Decision | None = None
    skipped: str | None = None


@dataclass
class CheckReport:
    """Every outcome plus the input problems met on the way."""

    outcomes: list[Outcome] = field(default_factory=list)
    problems: list[InputError] = field(default_factory=list)
    policy_revision: str = ""

    @property
    def denied(self) -> int:
        """How many resources were denied."""
        return sum(1 for o in self.outcomes if o.decision is not None and not o.decision.allowed)

    @property
    def exit_code(self) -> int:
        """2 on any input problem, else 1 if something was denied, else 0."""
        if self.problems:
            return 2
        return 1 if self.denied else 0


def input_files(inputs: Sequence[str]) -> list[str]:
    """Expand directories (sorted, recursive); ``-`` stays standard input."""
    files: list[str] = []
    for item in inputs:
        path = Path(item)
        if item != "-" and path.is_dir():
            files += [str(p) for p in sorted(path.rglob("*")) if p.is_file() and p.suffix in _INPUT_SUFFIXES]
        else:
            files.append(item)
    return files


def read_resources(
    inputs: Sequence[str], read_stdin: Callable[[int], bytes] | None, problems: list[InputError]
) -> Iterator[Resource]:
    """Every Kubernetes object in ``inputs``; problems are appended to ``problems`` and reading goes on.

    ``read_stdin(limit)`` reads standard input for ``-``; without it, ``-`` is an input error.
    """
    for item in input_files(inputs):
        source = "<stdin>" if item == "-" else item
        try:
            if item == "-" and read_stdin is None:
                raise InputError("standard input (-) is not available here; name the files")
            raw = read_stdin(_MAX_INPUT + 1) if item == "-" and read_stdin else _read_file(Path(item))
            if len(raw) > _MAX_INPUT:
                raise InputError(f"input is larger than {_MAX_INPUT // (1024 * 1024)} MiB", location=source)
            for document in load_documents(decode(raw, source), source):
                yield from _resources(document, source, problems)
        except InputError as error:
            problems.append(error)


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
    engine: PolicyEngine,
    resources: Sequence[Resource],
    *,
    namespace: str | None = None,
    unverifiable: Action | None = None,
    concurrency: int = 32,
    requester: Requester | None = None,
) -> list[Outcome]:
    """Evaluate every resource; ``unverifiable`` overrides the action of rules that could not be checked.

    ``requester`` is who would apply the resources (``--as``); without one, rules about the requester
    cannot be checked (``unverifiable`` decides what that does).

    ``concurrency`` resources are evaluated at once when the evidence comes from the network; from memory,
    one after another (concurrency would only add scheduling).
    """

    async def one(resource: Resource) -> Outcome:
        try:
            decision = await engine.evaluate(
                resource.obj,
                namespace=None if resource.namespace else namespace,
                deadline=Deadline.never(),
                requester=requester,
            )
        except NotAWorkload as error:
            return Outcome(resource=resource, skipped=error.message)
        if unverifiable is not None:
            decision = replace(
                decision,
                violations=tuple(
                    replace(v, action=unverifiable) if v.error else v for v in decision.violations
                ),
            )
        return Outcome(resource=resource, decision=decision)

    outcomes: list[Outcome | None] = [None] * len(resources)
    pending = iter(enumerate(resources))

    async def worker() -> None:
        for index, resource in pending:
            outcomes[index] = await one(resource)

    workers = min(concurrency if engine.evidence.concurrent_lookups else 1, len(resources))
    await asyncio.gather(*(worker() for _ in range(workers)))
    return [o for o in outcomes if o is not None]

"""The files one admission request passes through: executed, on the raw path, on the reading path (issue 26).

One request (the demo's first scenario: a pinned, signed TensorRT image with a signed FP16 engine; the
bundled policies; an attestation folder; a SQLite decision log) is answered twice through the ASGI app in
process. The second answer is traced (``sys.setprofile`` and ``threading.setprofile``, a fresh default
executor so that its worker threads are traced) with the verified-evidence caches and the CEL data of the
manifests emptied, so that verification runs as on the first request for an image.

A file is *on the path* when control passes through it: one of its functions calls a function of another
project file (a leaf that only returns a value is looked up, not followed). Work handed to a thread
(``asyncio.to_thread``) counts as a call from the file that handed it over. The base (errors, deadline,
digests, references, files, validation, YAML, cache) is vocabulary and not counted; nor is the demo.

Three figures: the files *executed*; the *raw path*; and the *reading path*, what a newcomer reads: the
request's own modules (files directly in ``webhook/`` or ``policies/``) on the path, plus each unit they call
into, where a unit is a room (a folder below a top-level package, or the whole ``decisionlog`` package)
counted once, or a file directly in ``verifier/``. A room entered only from another room is inside it.
Issue 26 gates: reading path <= 12, raw path <= 27 (today: 12 and 35).

Usage, from the repository root: ``.venv/bin/python bench/admission_path.py [WORKDIR]`` (a fresh temporary
folder by default).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import httpx

from decisionlog import SQLiteStore
from policies.verified import VerifiedEvidence
from trtguard.demo._run import admission_review, scenarios
from trtguard.demo.material import make_material
from verifier.base._cache import ResultCache
from verifier.evidence_folder import LocalEvidence
from webhook._admission import Reviewer
from webhook._app import WebhookServices, create_app
from webhook._metrics import Metrics
from webhook._policy_store import PolicyStore
from webhook._settings import ServeSettings
from webhook._tracing import Tracing

ROOT = Path(__file__).resolve().parent.parent
#: Where project files live (relative to the root); the demo is the harness, not the request.
PACKAGES = ("verifier/", "policies/", "webhook/", "decisionlog/", "trtguard/")
HARNESS = ("trtguard/demo/",)
#: The base room: vocabulary every file uses, not counted on a path (today's files and the target folder).
BASE = (
    "verifier/base/_errors.py",
    "verifier/base/_deadline.py",
    "verifier/base/_digests.py",
    "verifier/base/_references.py",
    "verifier/base/_files.py",
    "verifier/base/_validation.py",
    "verifier/base/_yamldoc.py",
    "verifier/base/_cache.py",
    "verifier/base/",
)
#: The packages whose files directly inside are the request's own modules.
FLOW = ("webhook/", "policies/")
#: Issue 26's gates on the target tree.
READING_GATE, RAW_GATE = 12, 27

T = TypeVar("T")
Edge = tuple[str, str]


def unit(path: str) -> str:
    """What a file counts as on the reading path: its room (``a/b/``, or ``decisionlog/``) or itself."""
    parts = path.split("/")
    if parts[0] == "decisionlog":
        return "decisionlog/"
    return "/".join(parts[:2]) + "/" if len(parts) > 2 else path


def is_flow(path: str) -> bool:
    """Whether a file is one of the request's own modules (directly in ``webhook/`` or ``policies/``)."""
    return path.startswith(FLOW) and path.count("/") == 1


@dataclass(frozen=True)
class AdmissionPath:
    """The traced calls between project files (caller, callee), and the figures made of them."""

    edges: frozenset[Edge]

    @cached_property
    def executed(self) -> set[str]:
        """Every project file a function of which ran."""
        return {path for edge in self.edges for path in edge}

    @cached_property
    def raw(self) -> list[str]:
        """The files that call into another project file, base files left out."""
        return sorted({a for a, _ in self.edges if not a.startswith(BASE)})

    @cached_property
    def reading(self) -> list[str]:
        """The request's own modules on the path and the units they call into."""
        on_path = set(self.raw)
        found = {path for path in on_path if is_flow(path)}
        found |= {
            unit(b)
            for a, b in self.edges
            if is_flow(a) and a in on_path and not is_flow(b) and not b.startswith(BASE)
            if b in on_path or unit(b) != b
        }
        return sorted(found)

    def callees(self, caller: str) -> list[str]:
        """The files ``caller`` calls into."""
        return sorted(b for a, b in self.edges if a == caller)


class CallTracer:
    """Records which project file calls which, in every thread, while installed."""

    def __init__(self, root: Path) -> None:
        self.root = str(root) + "/"
        self.edges: set[Edge] = set()
        self._to_thread = asyncio.to_thread

    def project_file(self, filename: str) -> str | None:
        """The file's path relative to the root when it is a project file (not the harness), else None."""
        if not filename.startswith(self.root):
            return None
        relative = filename[len(self.root) :]
        return relative if relative.startswith(PACKAGES) and not relative.startswith(HARNESS) else None

    def _caller(self, frame: FrameType | None) -> str | None:
        while frame is not None:
            if (found := self.project_file(frame.f_code.co_filename)) is not None:
                return found
            frame = frame.f_back
        return None

    def profile(self, frame: FrameType, event: str, arg: object) -> None:
        """The ``sys.setprofile`` hook: a call into a project file from another one is an edge."""
        if event != "call" or (callee := self.project_file(frame.f_code.co_filename)) is None:
            return
        caller = self._caller(frame.f_back)
        if caller is not None and caller != callee:
            self.edges.add((caller, callee))

    async def to_thread(self, func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``asyncio.to_thread`` that records the hand-over as a call from the file that made it."""
        code = getattr(func, "__code__", None)
        target = self.project_file(code.co_filename) if code is not None else None
        caller = self._caller(sys._getframe(1))
        if caller is not None and target is not None and caller != target:
            self.edges.add((caller, target))
        return await self._to_thread(func, *args, **kwargs)

    @contextmanager
    def installed(self) -> Iterator[None]:
        """Trace every thread (and the hand-overs to threads) inside the block."""
        asyncio.to_thread = self.to_thread
        sys.setprofile(self.profile)
        threading.setprofile(self.profile)
        try:
            yield
        finally:
            sys.setprofile(None)
            threading.setprofile(None)
            asyncio.to_thread = self._to_thread


def empty_caches(verified: VerifiedEvidence) -> None:
    """Forget every verified result, so that the next request for an image verifies as the first one did."""
    for value in vars(verified).values():
        if isinstance(value, ResultCache):
            value.clear()
    # The CEL data of a manifest, kept across admissions: private, and nothing public drops it.
    verified._manifest_activations.clear()


async def trace_admission(work: Path, root: Path = ROOT) -> tuple[bool, AdmissionPath]:
    """Answer the demo's first request twice; trace the second with the caches emptied."""
    material = make_material(work)
    review = json.dumps(admission_review(scenarios(material)[0])).encode()
    policies = PolicyStore(material.policies, LocalEvidence(material.attestations))
    policies.load()
    store, metrics = SQLiteStore(work / "decisions.db"), Metrics()
    services = WebhookServices(policies, store, metrics, Reviewer(policies, store, metrics), Tracing(None))
    app = create_app(ServeSettings(policies=material.policies, insecure_http=True), services)
    tracer = CallTracer(root)
    await store.open()
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://webhook") as client:
            await client.post("/validate?timeout=10s", content=review)
            loaded = policies.current
            if loaded is None:
                raise RuntimeError("the policy store holds no policies after the first request")
            empty_caches(loaded.evaluator.verified)
            asyncio.get_running_loop().set_default_executor(concurrent.futures.ThreadPoolExecutor())
            with tracer.installed():
                answer = (await client.post("/validate?timeout=10s", content=review)).json()["response"]
    finally:
        await store.close()
    return bool(answer["allowed"]), AdmissionPath(frozenset(tracer.edges))


def report(allowed: bool, path: AdmissionPath) -> Iterable[str]:
    """The printed figures, line by line."""
    yield (
        f"allowed: {allowed}; files executed: {len(path.executed)}; "
        f"raw path: {len(path.raw)} (gate {RAW_GATE}); "
        f"reading path: {len(path.reading)} (gate {READING_GATE})"
    )
    yield from (f"  {caller} -> {', '.join(path.callees(caller))}" for caller in path.raw)
    yield "reading path: " + ", ".join(path.reading)


def main(argv: list[str] | None = None) -> int:
    """Trace one admission in ``WORKDIR`` (a fresh temporary folder when none is given) and print it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("workdir", type=Path, nargs="?", help="an empty folder for the demo material")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="admission-path-") as scratch:
        work = args.workdir or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        allowed, path = asyncio.run(trace_admission(work))
    for line in report(allowed, path):
        print(line)
    return 0 if allowed else 1


if __name__ == "__main__":
    sys.exit(main())

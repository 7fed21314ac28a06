"""Which decisions an evidence package is about: one rule, applied alike by the exporter and the verifier."""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from decisionlog import DecisionRecord
from policies.identity import WorkloadIdentity, identity_group
from verifier.base import ImageReference, InputError, is_sha256_hex, parse_sha256

SelectionKind = Literal["audit_id", "engine", "workload"]


@dataclass(frozen=True, slots=True)
class Selection:
    """The decisions to export: by engine audit ID, by engine digest, or by workload.

    A workload is ``NAMESPACE/KIND/NAME`` (:class:`~policies.identity.WorkloadIdentity`: API group, kind,
    namespace and name). ``NAMESPACE/NAME`` selects every workload of that name, whatever its kind: what
    packages exported before workloads were told apart by kind select, and verify as such; the exporter
    names the kind (:func:`trtguard.audit.workloads.resolve_workload`).
    """

    kind: SelectionKind
    value: str

    @classmethod
    def workload(cls, text: str) -> Selection:
        """``NAMESPACE/KIND/NAME`` or ``NAMESPACE/NAME``; raises :class:`InputError` for anything else."""
        parts = text.split("/")
        if len(parts) == 3:
            return cls("workload", str(WorkloadIdentity.parse(text, where="--workload")))
        if len(parts) != 2 or not all(parts):
            raise InputError(
                f"expected NAMESPACE/KIND/NAME or NAMESPACE/NAME, got {text!r}",
                location="--workload",
                hint="for example: --workload prod/Deployment/resnet50",
            )
        return cls("workload", text)

    @property
    def identity(self) -> WorkloadIdentity | None:
        """The one workload selected (None: not a workload selection, or one of a name of any kind)."""
        if self.kind != "workload" or self.value.count("/") != 2:
            return None
        return WorkloadIdentity.parse(self.value)

    @classmethod
    def engine(cls, text: str) -> Selection:
        """An engine digest, ``sha256:<hex>`` or bare hex."""
        try:
            return cls("engine", f"sha256:{parse_sha256(text.strip(), what='engine digest')}")
        except InputError as error:
            error.location = "--engine"
            raise

    @classmethod
    def audit_id(cls, text: str) -> Selection:
        """A build manifest's ``audit_id``."""
        if not text.strip():
            raise InputError("the audit ID is empty", location="--audit-id")
        return cls("audit_id", text)

    def rule(self) -> str:
        """The selection rule in words."""
        if self.kind == "workload":
            if self.identity is not None:
                return f"every decision about workload {self.value} (verdict or dry run)"
            return f"every decision about workload {self.value} (any kind, verdict or dry run)"
        if self.kind == "engine":
            return f"every real (not dry-run) admission of a workload naming engine {self.value}"
        return f"every decision naming an engine whose build manifest carries audit ID {self.value!r}"

    def matches(self, record: DecisionRecord, audit_engines: Collection[str] = ()) -> bool:
        """True when ``record`` is selected; ``audit_engines`` are the engines carrying the audit ID."""
        return self.matcher(audit_engines)(record)

    def matcher(self, audit_engines: Collection[str] = ()) -> Callable[[DecisionRecord], bool]:
        """:meth:`matches` for one record after another, the selection's value parsed once (an export asks
        of every record in the log)."""
        if self.kind == "workload":
            identity = self.identity
            if identity is not None:
                # The cheap fields first: most records of a log are about other workloads.
                return lambda record: (
                    record.name == identity.name
                    and record.namespace == identity.namespace
                    and record.workload == identity
                )
            namespace, _, name = self.value.partition("/")
            return lambda record: record.namespace == namespace and record.name == name
        if self.kind == "engine":
            digest = self.value
            return lambda record: record.allowed and not record.dry_run and digest in engine_digests(record)
        return lambda record: any(digest in audit_engines for digest in engine_digests(record))

    def data_matcher(self, audit_engines: Collection[str] = ()) -> Callable[[Mapping[str, Any]], bool]:
        """:meth:`matcher` of a record's JSON (:meth:`DecisionRecord.to_json`, as the chain check hands it
        to an export: ``decisionlog.DataSink``), the same rule on the same fields."""
        if self.kind == "workload":
            identity = self.identity
            if identity is not None:
                group = functools.lru_cache(maxsize=64)(identity_group)  # a log's few API versions and kinds
                return lambda data: (
                    data["name"] == identity.name
                    and data["namespace"] == identity.namespace
                    and data["kind"] == identity.kind
                    and group(data["api_version"], data["kind"]) == identity.group
                )
            namespace, _, name = self.value.partition("/")
            return lambda data: data["namespace"] == namespace and data["name"] == name
        if self.kind == "engine":
            digest = self.value
            return lambda data: (
                data["allowed"] and not data["dry_run"] and digest in artifacts_of(data["engines"], ())[0]
            )
        return lambda data: any(digest in audit_engines for digest in artifacts_of(data["engines"], ())[0])


def engine_digests(record: DecisionRecord) -> dict[str, str]:
    """The engines a record names: ``sha256:…`` digest → first reference (digest-less engines left out)."""
    return artifacts(record)[0]


def image_digests(record: DecisionRecord) -> dict[str, str]:
    """The images a record names other than its engines: ``sha256:…`` digest → first reference."""
    return artifacts(record)[1]


def undigested_engines(record: DecisionRecord) -> list[str]:
    """References of engines the record names without a digest (no evidence can be looked up for them)."""
    return artifacts(record)[2]


def artifacts(record: DecisionRecord) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """:func:`engine_digests`, :func:`image_digests` and :func:`undigested_engines` of ``record``, in one
    pass over its engines and images (what an export collects of every selected decision)."""
    return artifacts_of(record.engines, record.images)


def artifacts_of(
    engine_entries: Sequence[Mapping[str, Any]], image_entries: Sequence[Mapping[str, Any]]
) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """:func:`artifacts` of a record with these engines and images (of its JSON, say)."""
    engines: dict[str, str] = {}
    undigested: list[str] = []
    for engine in engine_entries:
        digest = _digest(engine)
        reference = engine.get("reference")
        if digest is None:
            undigested.append(str(reference))
        else:
            engines.setdefault(digest, reference if isinstance(reference, str) else digest)
    images: dict[str, str] = {}
    for image in image_entries:
        digest = _digest(image)
        if digest is not None and digest not in engines:
            reference = image.get("reference")
            images.setdefault(digest, reference if isinstance(reference, str) else digest)
    return engines, images, undigested


def _digest(engine: Mapping[str, Any]) -> str | None:
    """The recorded digest, else the one in the reference; ``None`` when neither is a SHA-256 digest."""
    digest = engine.get("digest")
    reference = engine.get("reference")
    if (digest is None or isinstance(digest, str)) and (reference is None or isinstance(reference, str)):
        # A workload's decisions name the same few artifacts again and again: each pair is resolved once.
        return _resolved(digest, reference)
    return _resolve(digest, reference)


@functools.lru_cache(maxsize=4096)
def _resolved(digest: str | None, reference: str | None) -> str | None:
    return _resolve(digest, reference)


def _resolve(digest: object, reference: object) -> str | None:
    if not isinstance(digest, str) and isinstance(reference, str):
        try:
            digest = ImageReference.parse(reference).digest
        except InputError:
            return None
    if isinstance(digest, str) and digest.startswith("sha256:") and is_sha256_hex(digest[7:]):
        return digest
    return None

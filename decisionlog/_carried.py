"""What change control must remember of records that rotation prunes: each workload's last admissions.

Change control compares an engine with those a policy confirmed in its last admission of the workload
(``webhook._admission_history``). Pruning deletes old records, so the last admission of a workload that was
not changed for a while would go with them, and a gated change would then have no baseline. The *carried
state* keeps it: for every workload (namespace, API group, kind, name: :mod:`policies.identity`) the newest
:data:`KEPT` real, delivered admissions that named engines, and the newest :data:`KEPT` of them that each
policy confirmed engines in (their ``record_id``, ``seq``, ``time``, ``uid`` and engines as recorded, with the
policies that confirmed each: ``confirmed_by``, absent for records written before it was recorded, which
count as confirmed by every policy).

The state after record ``n`` is a function of the chain alone: :meth:`CarriedState.fold` applies one record
after another, from the empty state at genesis. Each signed checkpoint of format 2 names the state before
and after its segment by :meth:`CarriedState.digest` (``prev_carried_hash``, ``carried_hash``), so the state
is covered by the operator's signatures as the records are (checkpoints of format 2 named a state keyed
without the API group, no longer read: :mod:`decisionlog._checkpoints`); an archived segment holds the
state it starts from, so it checks on its own. The store keeps the state as rows of ``trtguard_carried``: for
each checkpoint the workloads its segment changed (docs/decision-log-storage.md, "What rotation carries
forward").
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from decisionlog import _undelivered as undelivered
from decisionlog._body_json import canonical_object
from decisionlog._errors import DecisionLogError
from decisionlog._record import DecisionRecord, canonical_json, format_time
from policies.identity import WorkloadIdentity

#: Admissions kept per workload: the newest, and one before it should an undelivered record in a later
#: segment take the newest back (docs/decision-log-storage.md).
KEPT: Final = 2

#: ONNX models kept per policy and workload: the newest :data:`MAX_MODELS` models (by the newest admission
#: confirming one) keep their last confirmed builds; an older one is forgotten, as a workload that stopped
#: running it long ago (policies/README.md, "Change control").
MAX_MODELS: Final = 16

#: A workload: (namespace, API group, kind, name).
WorkloadKey = tuple[str, str, str, str]

#: The key of :attr:`CarriedWorkload.older_for` that stands for admissions whichever policy confirmed their
#: engines, or none (what ran last: change control compares with it too); no policy is named so.
ANY: Final = "*"


@dataclass(frozen=True, slots=True)
class CarriedAdmission:
    """One real, delivered admission of a workload that named engines, as change control reads it."""

    record_id: str
    seq: int
    time: str
    uid: str
    #: ``{"reference", "name", "containers"}`` of each engine, as the record holds them, and
    #: ``confirmed_by`` where the record says which policies confirmed it, ``confirmed`` where it says each
    #: one's model and manifest (:func:`carried_engines`).
    engines: tuple[Mapping[str, Any], ...]

    def to_json(self) -> dict[str, Any]:
        """The admission's JSON form (what is hashed and stored)."""
        return {
            "record_id": self.record_id,
            "seq": self.seq,
            "time": self.time,
            "uid": self.uid,
            "engines": [dict(engine) for engine in self.engines],
        }

    @property
    def order(self) -> tuple[str, int]:
        """Newest first sorts by decision time, then seq (records shipped from a spool land late)."""
        return self.time, self.seq

    @property
    def legacy(self) -> bool:
        """Written before records said which policies confirmed an engine (:func:`confirmed_engines`)."""
        return is_legacy(self.engines)

    @property
    def policies(self) -> frozenset[str]:
        """The policies that confirmed any of its engines (none for a legacy admission)."""
        return frozenset(p for engine in self.engines for p in _confirmers(engine) or ())

    def models(self, policy: str) -> frozenset[str]:
        """The models (``model``) of the engines ``policy`` confirmed in it that were recorded with one (a
        record written before models were keeps its admissions as it always did)."""
        return frozenset(
            model_key(engine)
            for engine in confirmed_engines(self.engines, policy)
            if isinstance(engine.get("model"), str) and not self.legacy
        )

    def confirms(self, policy: str | None) -> bool:
        """Whether it is an admission in which ``policy`` confirmed engines (a legacy one: by any); every
        admission for None."""
        return policy is None or self.legacy or policy in self.policies


@dataclass(frozen=True, slots=True)
class CarriedWorkload:
    """A workload's newest admissions (newest first); ``older``: earlier ones were not kept."""

    namespace: str
    group: str
    kind: str
    name: str
    admissions: tuple[CarriedAdmission, ...]
    #: A legacy admission (a baseline of every policy) was cut: what ran before those kept is not known.
    #: Every admission kept is newer than every legacy one cut (each reason to keep one counts them all).
    older: bool = False
    #: For each policy an admission that was cut had confirmed engines in, and for :data:`ANY` when one
    #: that is not legacy was cut, the order (time, seq) of the newest such admission, by key (written only
    #: when any): an admission kept for another policy may be older than it.
    older_for: tuple[tuple[str, tuple[str, int]], ...] = ()

    @property
    def key(self) -> WorkloadKey:
        """(namespace, API group, kind, name)."""
        return self.namespace, self.group, self.kind, self.name

    @property
    def identity(self) -> WorkloadIdentity:
        """The workload."""
        return WorkloadIdentity(self.group, self.kind, self.namespace, self.name)

    def cut_for(self, policy: str | None) -> tuple[str, int] | None:
        """The order of the newest cut admission (not legacy) that ``policy`` confirmed engines in (None: of
        any), if one was cut."""
        return dict(self.older_for).get(ANY if policy is None else policy)

    def to_json(self) -> dict[str, Any]:
        """The workload's JSON form (what is hashed and stored)."""
        data: dict[str, Any] = {
            "namespace": self.namespace,
            "group": self.group,
            "kind": self.kind,
            "name": self.name,
            "admissions": [admission.to_json() for admission in self.admissions],
            "older": self.older,
        }
        if self.older_for:
            data["older_for"] = {p: {"time": time, "seq": seq} for p, (time, seq) in self.older_for}
        return data


def carried_engines(record: DecisionRecord) -> tuple[Mapping[str, Any], ...]:
    """The engines of ``record`` change control reads (reference, name, containers, and ``confirmed_by``
    when the record has it), none if unnamed."""
    found = []
    for engine in record.engines:
        reference = engine.get("reference")
        if not isinstance(reference, str):
            continue  # an {"omitted": N} marker
        kept: dict[str, Any] = {"reference": reference, "name": engine.get("name")}
        containers = engine.get("containers")
        kept["containers"] = (
            [c for c in containers if isinstance(c, str)] if isinstance(containers, list) else []
        )
        if not isinstance(kept["name"], str):
            kept["name"] = None
        for key in ("model", "manifest"):  # the model a policy keeps the last build of, and its manifest
            if isinstance(engine.get(key), str):
                kept[key] = engine[key]
        confirmed = engine.get("confirmed_by")
        if isinstance(confirmed, list):
            # Sorted and each once: the state is the same whatever order the policies confirmed in.
            kept["confirmed_by"] = sorted({p for p in confirmed if isinstance(p, str)})
        builds = engine.get("confirmed")
        if isinstance(builds, dict):  # each confirming policy's own model and manifest (schema 7 on)
            kept["confirmed"] = {
                policy: {k: v for k, v in build.items() if k in ("model", "manifest") and isinstance(v, str)}
                for policy, build in sorted(builds.items())
                if isinstance(policy, str) and isinstance(build, dict)
            }
        found.append(kept)
    return tuple(found)


def as_confirmed_by(engine: Mapping[str, Any], policy: str) -> Mapping[str, Any]:
    """The engine (:func:`carried_engines`) as ``policy`` judged it: with the ``model`` and ``manifest`` of
    its own entry in ``confirmed`` (none there: no model, its own), where the record has ``confirmed``.

    Two policies that trust different signers read different manifests of one engine, which may name
    different models: each keeps its last build of a model by its own reading, never by another's. A
    record written before ``confirmed`` existed keeps the one ``model`` and ``manifest`` it has.
    """
    builds = engine.get("confirmed")
    if not isinstance(builds, Mapping):
        return engine
    own = builds.get(policy)
    view = {k: v for k, v in engine.items() if k not in ("model", "manifest", "confirmed")}
    if isinstance(own, Mapping):
        view.update({k: v for k, v in own.items() if k in ("model", "manifest") and isinstance(v, str)})
    return view


def model_key(engine: Mapping[str, Any]) -> str:
    """What an engine (:func:`carried_engines`) is a build of, for keeping each model's last build: its
    ``model``, else (recorded before models were) its reference, a model of its own."""
    model = engine.get("model")
    return f"model:{model}" if isinstance(model, str) else f"reference:{engine.get('reference')}"


def is_legacy(engines: Iterable[Mapping[str, Any]]) -> bool:
    """Whether ``engines`` (:func:`carried_engines`) are of a record written before records said which
    policies confirmed each engine: it then counts as confirmed by every policy, as trtguard read it when
    it wrote it (policies/README.md, "Change control")."""
    return not any(_confirmers(engine) is not None for engine in engines)


def confirmed_engines(
    engines: Iterable[Mapping[str, Any]], policy: str | None
) -> tuple[Mapping[str, Any], ...]:
    """Those of ``engines`` (:func:`carried_engines`) that ``policy`` confirmed: all of a legacy record's, and
    all for None."""
    engines = tuple(engines)
    if policy is None or is_legacy(engines):
        return engines
    return tuple(as_confirmed_by(e, policy) for e in engines if policy in (_confirmers(e) or ()))


def _confirmers(engine: Mapping[str, Any]) -> list[str] | None:
    """The engine's ``confirmed_by`` (None when it has none: a legacy record's)."""
    confirmed = engine.get("confirmed_by")
    return [p for p in confirmed if isinstance(p, str)] if isinstance(confirmed, list) else None


class CarriedState:
    """The carried state: workload → its newest admissions, folded record by record."""

    def __init__(self, workloads: Iterable[CarriedWorkload] = ()) -> None:
        self._workloads: dict[WorkloadKey, CarriedWorkload] = {w.key: w for w in workloads}

    def __len__(self) -> int:
        return len(self._workloads)

    def __iter__(self) -> Iterator[CarriedWorkload]:
        """The entries in the order their digest lists them (by namespace, API group, kind, name; UTF-16 code
        units)."""
        return iter(
            sorted(
                self._workloads.values(),
                key=lambda w: tuple(p.encode("utf-16-be", "surrogatepass") for p in w.key),
            )
        )

    def get(self, key: WorkloadKey) -> CarriedWorkload | None:
        """The workload's entry, if the state has one."""
        return self._workloads.get(key)

    def fold(
        self,
        seq: int,
        record: DecisionRecord,
        *,
        before: dict[WorkloadKey, CarriedWorkload | None] | None = None,
    ) -> WorkloadKey | None:
        """Apply record ``seq``; returns the workload whose entry changed, if any. ``before`` collects each
        workload's entry as it was before the first record about it (what a segment changed, for its rows).

        The workload is the record's namespace, API group (``DecisionRecord.api_group``), kind and name. A
        real (not dry-run) allow of a namespaced, named workload that names engines is one of its
        admissions: the :data:`KEPT` newest by (time, seq) are kept, and the :data:`KEPT` newest each policy
        confirmed engines in (:func:`_retained`). An undelivered record takes the allow it names back
        (identified by ``uid`` and the derived ``record_id``, docs/decision-log.md); a workload left with none
        while older admissions were dropped keeps an empty entry (``older``, ``older_for``): what ran there
        is then unknown, which change control reports rather than guess.
        """
        workload = record.workload
        if workload is None:
            return None
        key = (workload.namespace, workload.group, workload.kind, workload.name)
        current = self._workloads.get(key)
        if before is not None and key not in before:
            before[key] = current
        original = undelivered.original_id(record)
        if original is not None:
            if current is None:
                return None
            kept = tuple(
                a for a in current.admissions if not (a.record_id == original and a.uid == record.uid)
            )
            if kept == current.admissions:
                return None
            if kept or current.older or current.older_for:
                self._workloads[key] = CarriedWorkload(*key, kept, current.older, current.older_for)
            else:
                del self._workloads[key]
            return key
        if not record.allowed or record.dry_run:
            return None
        engines = carried_engines(record)
        if not engines:
            return None
        admission = CarriedAdmission(record.record_id, seq, format_time(record.time), record.uid, engines)
        admissions = sorted(
            (*(current.admissions if current else ()), admission), key=lambda a: a.order, reverse=True
        )
        kept, cut = _retained(admissions)
        older = (current.older if current else False) or any(a.legacy for a in cut)
        older_for = dict(current.older_for if current else ())
        for dropped in (a for a in cut if not a.legacy):  # legacy ones: ``older``
            for policy in (ANY, *dropped.policies):
                older_for[policy] = max(older_for.get(policy, dropped.order), dropped.order)
        self._workloads[key] = CarriedWorkload(*key, kept, older, tuple(sorted(older_for.items())))
        return key

    def to_json(self) -> list[dict[str, Any]]:
        """Every workload's entry, sorted by (namespace, API group, kind, name)."""
        return [workload.to_json() for workload in self]

    def digest(self) -> str:
        """Hex SHA-256 of the canonical JSON (RFC 8785) of ``{"workloads": to_json()}``."""
        return digest_of(self.to_json())


def _retained(
    admissions: list[CarriedAdmission],
) -> tuple[tuple[CarriedAdmission, ...], list[CarriedAdmission]]:
    """Of a workload's admissions (newest first), those kept and those cut: the :data:`KEPT` newest, and the
    :data:`KEPT` newest that each policy confirmed engines in (legacy ones count for every policy, also for
    those no admission names), so that a policy's baseline stays however often it did not apply since; and
    for each policy and each of its :data:`MAX_MODELS` newest models, the :data:`KEPT` newest in which it
    confirmed an engine of that model, so that a model left out of later admissions keeps its last build."""
    keep = set(range(min(KEPT, len(admissions))))
    named = sorted({p for a in admissions for p in a.policies})
    keep.update([i for i, a in enumerate(admissions) if a.legacy][:KEPT])
    for policy in named:
        mine = [i for i, a in enumerate(admissions) if a.confirms(policy)]
        keep.update(mine[:KEPT])
        by_model: dict[str, list[int]] = {}  # in order of each model's newest admission
        for i in mine:
            for model in sorted(admissions[i].models(policy)):
                by_model.setdefault(model, []).append(i)
        for found in list(by_model.values())[:MAX_MODELS]:
            keep.update(found[:KEPT])
    kept = tuple(a for i, a in enumerate(admissions) if i in keep)
    return kept, [a for i, a in enumerate(admissions) if i not in keep]


def digest_of(workloads: list[dict[str, Any]]) -> str:
    """Hex SHA-256 of the canonical JSON of ``{"workloads": workloads}`` (entries already sorted)."""
    return hashlib.sha256(canonical_json({"workloads": workloads})).hexdigest()


#: The digest of the empty state: ``prev_carried_hash`` of the first segment.
EMPTY_HASH: Final = digest_of([])


@dataclass(frozen=True, slots=True)
class Carried:
    """What a store carries of a workload's pruned records, as one snapshot.

    ``base_seq`` is the newest pruned checkpoint (0: nothing was pruned, and nothing is carried); ``stored``
    says whether the carried state through it is in the store (not when the log was pruned by a trtguard
    that did not carry it: what was pruned then is unknown). ``workloads`` are the entries found (one per
    API group and kind when those were not given).
    """

    base_seq: int
    stored: bool
    workloads: tuple[CarriedWorkload, ...] = ()


def carried_from_rows(base_seq: int, stored: bool, rows: Iterable[Any], *, where: str) -> Carried:
    """:class:`Carried` from the rows of ``_sql.carried_rows`` (namespace, API group, kind, name, content)."""
    found = []
    for namespace, group, kind, name, content in rows:
        if content is None:
            continue
        workload = workload_from_text(content, where=where)
        if workload.key != (namespace, group, kind, name):
            raise DecisionLogError(
                f"the carried row of {WorkloadIdentity(group, kind, namespace, name)} holds another "
                "workload's entry",
                location=where,
            )
        found.append(workload)
    return Carried(base_seq, stored, tuple(found))


def workload_from_json(data: object, *, where: str) -> CarriedWorkload:
    """A workload entry from its JSON form; raises :class:`DecisionLogError` when it is not one."""
    try:
        if not isinstance(data, dict) or set(data) - {"older_for"} != {
            "namespace",
            "group",
            "kind",
            "name",
            "admissions",
            "older",
        }:
            raise ValueError("not a carried workload")
        admissions = []
        for item in data["admissions"]:
            if not isinstance(item, dict) or set(item) != {"record_id", "seq", "time", "uid", "engines"}:
                raise ValueError("not a carried admission")
            engines = tuple(dict(e) for e in item["engines"] if isinstance(e, dict))
            if len(engines) != len(item["engines"]) or not all(
                isinstance(item[k], str) for k in ("record_id", "time", "uid")
            ):
                raise ValueError("malformed carried admission")
            if not isinstance(item["seq"], int) or isinstance(item["seq"], bool):
                raise TypeError("malformed carried admission")
            admissions.append(
                CarriedAdmission(item["record_id"], item["seq"], item["time"], item["uid"], engines)
            )
        namespace, group, kind, name = data["namespace"], data["group"], data["kind"], data["name"]
        if not all(isinstance(t, str) for t in (namespace, group, kind, name)) or not isinstance(
            data["older"], bool
        ):
            raise TypeError("malformed carried workload")
        workload = CarriedWorkload(
            namespace, group, kind, name, tuple(admissions), data["older"], _older_for(data)
        )
    except (TypeError, ValueError, KeyError) as error:
        raise DecisionLogError(f"malformed carried state: {error}", location=where) from None
    if workload.to_json() != data:
        raise DecisionLogError("malformed carried state: fields of the wrong type", location=where)
    return workload


def _older_for(data: dict[str, Any]) -> tuple[tuple[str, tuple[str, int]], ...]:
    """``older_for`` of a workload's JSON form (``{policy: {"time", "seq"}}``), by policy."""
    found = data.get("older_for", {})
    if not isinstance(found, dict):
        raise TypeError("malformed carried workload")
    orders = []
    for policy, order in found.items():
        if not isinstance(order, dict) or set(order) != {"time", "seq"} or not isinstance(order["time"], str):
            raise TypeError("malformed carried workload")
        if not isinstance(order["seq"], int) or isinstance(order["seq"], bool):
            raise TypeError("malformed carried workload")
        orders.append((policy, (order["time"], order["seq"])))
    return tuple(sorted(orders))


def workload_from_text(text: str, *, where: str) -> CarriedWorkload:
    """A workload entry as stored in ``trtguard_carried.content``: exactly the canonical JSON written, which
    its checkpoint's digest covers (and ``_sql.carried_pattern`` searches)."""
    return workload_from_json(canonical_object(text, what="a carried row", where=where), where=where)


def state_from_json(data: object, *, where: str) -> CarriedState:
    """A whole state from ``to_json()`` output (an archived segment's ``carried_before``)."""
    if not isinstance(data, list):
        raise DecisionLogError("malformed carried state: not a list", location=where)
    workloads = [workload_from_json(item, where=where) for item in data]
    state = CarriedState(workloads)
    if len(state) != len(workloads) or state.to_json() != data:
        raise DecisionLogError("malformed carried state: unsorted or repeated workloads", location=where)
    return state

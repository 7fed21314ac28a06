"""webhook._admission_history: change control answered from the decision log, alone and through the
webhook."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from decisionlog import DecisionRecord, SQLiteStore
from decisionlog import _undelivered as undelivered
from policies.identity import WorkloadIdentity
from policies.results import AdmittedEngine, AdmittingDecision
from tests.support.harness import ReviewFactory
from trtguard.demo.material import TENSORRT_IMAGE, Material
from verifier.base._deadline import Deadline
from verifier.base._errors import EvidenceUnavailable
from verifier.crypto._keys import generate_private_key
from verifier.evidence_folder import LocalEvidence
from webhook._admission import Reviewer
from webhook._admission_history import DecisionLogHistory
from webhook._metrics import Metrics
from webhook._policy_store import PolicyStore
from webhook._wire import parse_review_document

RESNET50 = WorkloadIdentity("apps", "Deployment", "prod", "resnet50")

RESNET = "registry.example.com/models/resnet50"


#: The ONNX model every engine here is a build of, unless a test says otherwise.
MODEL = "a" * 64


def _engine(reference: str, model: str = MODEL) -> dict[str, Any]:
    return {
        "reference": reference,
        "digest": reference.split("@")[1],
        "path": "spec.template.spec.volumes[0]",
        "model": model,
    }


def _record(**fields: Any) -> DecisionRecord:
    base: dict[str, Any] = {
        "uid": "u",
        "operation": "UPDATE",
        "kind": "Deployment",
        "api_version": "apps/v1",
        "allowed": True,
        "reason": "Allowed",
        "namespace": "prod",
        "name": "resnet50",
    }
    base.update(fields)
    return DecisionRecord(**base)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "decisions.db")
    await s.open()
    yield s
    await s.close()


async def _append(store: SQLiteStore, *records: DecisionRecord) -> None:
    for record in records:
        await store.append(record, deadline=Deadline.after(5))


async def test_last_engines_are_those_of_the_newest_real_admission_with_engines(store: SQLiteStore) -> None:
    v1, v2, v3 = (f"{RESNET}@sha256:{c * 64}" for c in "123")
    other = f"registry.example.com/models/bert@sha256:{'4' * 64}"
    named = {**_engine(v2), "name": "engine", "containers": ["server"]}
    admitting = _record(engines=(named, _engine(other, "b" * 64)))
    stateful = _record(engines=(_engine(v3),), kind="StatefulSet")
    await _append(
        store,
        # Decided before `admitting` (which is made first here): the newest by decision time counts.
        _record(operation="CREATE", engines=(_engine(v1),), time=admitting.time - timedelta(seconds=1)),
        admitting,
        *(_record() for _ in range(120)),  # scaling: no engine recorded; more than two pages to look through
        _record(engines=(_engine(v3),), allowed=False, reason="PolicyViolation"),  # denied
        _record(engines=(_engine(v3),), dry_run=True),  # a dry run admits nothing
        stateful,  # another workload of the same name
        _record(engines=(_engine(v3),), namespace="dev"),
        # A Deployment of another API group (a custom kind of the same name): another workload too.
        _record(engines=(_engine(v3),), api_version="serving.example.com/v1"),
    )
    history = DecisionLogHistory(store)
    # Each engine names the decision that admitted it, which change control records as its baseline's.
    by = AdmittingDecision(admitting.record_id, 2)
    assert await history.last_engines(RESNET50, Deadline.after(5), "change-control") == (
        AdmittedEngine(v2, "engine", ("server",), by, MODEL),
        AdmittedEngine(other, admitted_by=by, model="b" * 64),
    )
    unknown = WorkloadIdentity("apps", "Deployment", "prod", "other")
    assert await history.last_engines(unknown, Deadline.after(5), "change-control") == ()
    stateful_set = WorkloadIdentity("apps", "StatefulSet", "prod", "resnet50")
    assert await history.last_engines(stateful_set, Deadline.after(5), "change-control") == (
        AdmittedEngine(v3, admitted_by=AdmittingDecision(stateful.record_id, 125), model=MODEL),
    )


async def test_an_admission_whose_answer_was_not_delivered_is_not_the_last_admitted(
    store: SQLiteStore,
) -> None:
    v1, v2 = (f"{RESNET}@sha256:{c * 64}" for c in "12")
    delivered = _record(uid="u1", engines=(_engine(v1),))
    late = _record(uid="u2", engines=(_engine(v2),))
    await _append(store, delivered, late, undelivered.undelivered(late))
    history = DecisionLogHistory(store)
    assert await history.last_engines(RESNET50, Deadline.after(5), "change-control") == (
        AdmittedEngine(v1, admitted_by=AdmittingDecision(delivered.record_id, 1), model=MODEL),
    )


async def test_a_log_that_cannot_answer_is_unavailable_evidence(tmp_path: Path) -> None:
    history = DecisionLogHistory(SQLiteStore(tmp_path / "absent.db", read_only=True))
    with pytest.raises(EvidenceUnavailable, match="could not say which engines") as raised:
        await history.last_engines(RESNET50, Deadline.after(5), "change-control")
    assert raised.value.transient
    with pytest.raises(EvidenceUnavailable, match="ran out of time"):
        await history.last_engines(RESNET50, Deadline(time.monotonic() - 1), "change-control")


async def test_a_log_that_is_not_a_database_is_unavailable_evidence(tmp_path: Path) -> None:
    """A broken file answers change control with unavailable evidence (onError decides), not a crash."""
    path = tmp_path / "broken.db"
    path.write_bytes(b"this is not an SQLite file " * 200)
    history = DecisionLogHistory(SQLiteStore(path, read_only=True))
    with pytest.raises(EvidenceUnavailable, match="file is not a database") as raised:
        await history.last_engines(RESNET50, Deadline.after(5), "change-control")
    assert raised.value.transient


def _committee_policy(folder: Path) -> None:
    keys = "\n".join(
        f"    - name: {name}\n      publicKey: |\n"
        + "".join(
            f"        {line}\n" for line in generate_private_key().public_key().to_pem().decode().splitlines()
        )
        for name in ("alice", "bob")
    )
    (folder / "committee.yaml").write_text(
        "apiVersion: trtguard.dev/v1alpha1\nkind: TrustedKeys\nmetadata: {name: committee}\nspec:\n  keys:\n"
        + keys
    )
    (folder / "change-control.yaml").write_text(
        "apiVersion: trtguard.dev/v1alpha1\nkind: InferencePolicy\nmetadata: {name: change-control}\nspec:\n"
        "  match: {namespaces: [prod]}\n  models:\n    buildManifest: {keys: [platform/build-signer]}\n"
        "  changeControl:\n    gated: [FirstInt8]\n"
        "    approvals: {keys: [committee/alice, committee/bob], threshold: 2}\n"
    )


def _deployment(engine: str, volume: str = "engine") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "resnet50", "namespace": "prod"},
        "spec": {
            "selector": {"matchLabels": {"app": "resnet50"}},
            "template": {
                "metadata": {"labels": {"app": "resnet50"}},
                "spec": {
                    "containers": [
                        {
                            "name": "server",
                            "image": TENSORRT_IMAGE,
                            "volumeMounts": [{"name": volume, "mountPath": "/models"}],
                        }
                    ],
                    "volumes": [{"name": volume, "image": {"reference": engine}}],
                },
            },
        },
    }


def reviewing(
    policies: Path, material: Material, store: SQLiteStore
) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]:
    """A webhook reviewing AdmissionReviews under ``policies``, change control's history kept in ``store``."""
    loaded = PolicyStore(policies, LocalEvidence(material.attestations), history=DecisionLogHistory(store))
    loaded.load()
    reviewer = Reviewer(loaded, store, Metrics())

    async def review(body: dict[str, Any]) -> dict[str, Any]:
        answer = await reviewer.review(
            parse_review_document(body), api_timeout=30, started=time.perf_counter()
        )
        response: dict[str, Any] = answer["response"]
        return response

    return review


@pytest.mark.parametrize(
    ("repository", "volume"),
    [(RESNET, "engine"), (f"{RESNET}-next", "engine"), (f"{RESNET}-next", "engine-next")],
    ids=["same-repository", "repository-renamed", "repository-and-volume-renamed"],
)
async def test_change_control_in_the_webhook_compares_with_the_last_admitted_engine(
    demo_material: Material,
    tmp_path: Path,
    store: SQLiteStore,
    make_review: ReviewFactory,
    repository: str,
    volume: str,
) -> None:
    """An omitted ``previous`` cannot hide a gated change: the log knows what ran before, in the same
    container, whatever repository the new engine comes from."""
    folder = tmp_path / "policies"
    shutil.copytree(demo_material.policies, folder)
    _committee_policy(folder)
    # Two builds of one model, published under one repository.
    fp16 = f"{RESNET}@{demo_material.engines['fp16'].split('@')[1]}"
    int8 = f"{repository}@{demo_material.engines['int8-calibrated'].split('@')[1]}"
    review = reviewing(folder, demo_material, store)
    first = await review(make_review(obj=_deployment(fp16)))
    assert first["allowed"], first
    update = make_review(obj=_deployment(int8, volume), old=_deployment(fp16), operation="UPDATE")
    second = await review(update)
    assert not second["allowed"]
    message = second["status"]["message"]
    assert f"gated changes [FirstInt8] (against last admitted engine {fp16})" in message
    violations = json.loads(second["auditAnnotations"]["violations"])
    assert any(v["rule"] == "changeControl" for v in violations)


async def test_a_model_left_out_of_later_admissions_keeps_its_last_build(store: SQLiteStore) -> None:
    """Each model's last confirmed build, newest first; one recorded without a model counts in the newest
    admission only (records written before models were)."""
    lm1, lm2, embedder, legacy = (f"{RESNET}@sha256:{c * 64}" for c in "1234")
    lm, emb = "a" * 64, "b" * 64
    unnamed = {k: v for k, v in _engine(legacy).items() if k != "model"}
    oldest = _record(engines=(unnamed,))  # decided first: records are newest by decision time
    first = _record(engines=(_engine(lm1, lm), _engine(embedder, emb)))
    second = _record(engines=(_engine(lm2, lm), _engine(embedder, emb)))
    without = _record(engines=(_engine(embedder, emb),))  # the language model left out
    await _append(store, oldest, first, second, without)
    found = await DecisionLogHistory(store).last_engines(RESNET50, Deadline.after(5), "change-control")
    assert [(e.reference, e.model, e.admitted_by) for e in found] == [
        (embedder, emb, AdmittingDecision(without.record_id, 4)),
        (lm2, lm, AdmittingDecision(second.record_id, 3)),
    ]


async def test_each_policy_keeps_the_models_by_its_own_reading(store: SQLiteStore) -> None:
    """Attack 24 (a): two policies that read different manifests of one engine keep its model each by its
    own (``confirmed``); one recorded model (the first judge's) would file the embedder under the language
    model for the platform policy, and lose that model's last build when an UPDATE dropped it. A record
    without ``confirmed`` keeps its one model for every policy, as before."""
    lm, embedder = (f"{RESNET}@sha256:{c * 64}" for c in "12")
    x, w = "a" * 64, "b" * 64

    def confirmed(reference: str, team: str, platform: str) -> dict[str, Any]:
        return {
            **_engine(reference, team),
            "confirmed_by": ["team", "platform"],
            "confirmed": {"team": {"model": team}, "platform": {"model": platform}},
        }

    first = _record(engines=(confirmed(lm, x, x), confirmed(embedder, x, w)))
    dropped = _record(engines=(confirmed(embedder, x, w),))
    await _append(store, first, dropped)
    history = DecisionLogHistory(store)
    platform = await history.last_engines(RESNET50, Deadline.after(5), "platform")
    assert [(e.reference, e.model) for e in platform] == [(embedder, w), (lm, x)]
    team = await history.last_engines(RESNET50, Deadline.after(5), "team")
    assert [(e.reference, e.model) for e in team] == [(embedder, x)]
    old = _record(engines=({**_engine(lm, x), "confirmed_by": ["team", "platform"]},))
    await _append(store, old)
    platform = await history.last_engines(RESNET50, Deadline.after(5), "platform")
    assert [(e.reference, e.model) for e in platform] == [(lm, x), (embedder, w)]


class _Counting:
    """A store that counts the records its queries return (the work of a look-up, not its time)."""

    def __init__(self, store: SQLiteStore) -> None:
        self.store, self.read = store, 0
        self.description = store.description

    async def query(self, query: Any) -> Any:
        found = await self.store.query(query)
        self.read += len(found)
        return found

    async def carried(self, *args: Any, **kwargs: Any) -> Any:
        return await self.store.carried(*args, **kwargs)


async def test_the_records_a_look_up_reads_stay_bounded_as_history_grows(store: SQLiteStore) -> None:
    """Attack 24 (g): every no-op UPDATE of a workload made each later look-up read one record more. A
    policy keeps its newest MAX_MODELS models, so reading stops once the admissions read hold that many."""
    engines = tuple(_engine(f"{RESNET}@sha256:{i:064x}", f"{i:064x}") for i in range(20))
    engines = tuple({**e, "confirmed_by": ["cc"]} for e in engines)
    reads, done = [], 0
    for total in (100, 400, 1600):
        while done < total:
            await _append(store, _record(uid=f"u{done}", engines=engines))
            done += 1
        counting = _Counting(store)
        found = await DecisionLogHistory(counting).last_engines(  # type: ignore[arg-type]
            RESNET50, Deadline.after(30), "cc"
        )
        assert len(found) == 20
        reads.append(counting.read)
    assert reads[0] == reads[1] == reads[2] <= 8, reads


async def test_a_look_up_past_its_bound_cannot_tell_rather_than_allow(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A policy with one model whose history holds more live records than a look-up may read: an older
    model's last build could be past the bound, so the log cannot tell (the policy's onError decides)."""
    monkeypatch.setattr(DecisionLogHistory, "MAX_RECORDS", 10)
    old, lm = (f"{RESNET}@sha256:{c * 64}" for c in "12")
    await _append(store, _record(engines=({**_engine(old, "b" * 64), "confirmed_by": ["cc"]},)))
    for i in range(10):
        await _append(store, _record(uid=f"u{i}", engines=({**_engine(lm), "confirmed_by": ["cc"]},)))
    with pytest.raises(EvidenceUnavailable, match="within the 10 newest live records") as raised:
        await DecisionLogHistory(store).last_engines(RESNET50, Deadline.after(5), "cc")
    assert not raised.value.transient

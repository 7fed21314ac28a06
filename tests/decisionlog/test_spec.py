"""docs/decision-log.md, checked with an implementation written from that page alone.

``canonical`` and ``check_chain`` below follow the page ("The hash chain") and nothing else: they import
none of trtguard's chain or record code and use neither ``json.dumps`` nor ``rfc8785``. They are run on a log
the webhook's own admission flow wrote (records with non-ASCII and control characters among them), read
the ways the page says an auditor reads one: ``trtguard audit query --format json`` with the head from
``trtguard audit verify --format json``, and an evidence package's ``records.jsonl``, whose records must be
the canonical bytes themselves. A row changed in the database breaks the chain where trtguard says it does.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import hashlib
import io
import json
import sqlite3
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest

from decisionlog import SQLiteStore, open_store
from tests.support.harness import pod, review
from trtguard.audit.package import Selection, export_evidence_package
from trtguard.cli import main
from trtguard.demo.material import OFF_LIST_IMAGE, TENSORRT_IMAGE, Material
from verifier.crypto._keys import generate_private_key
from verifier.evidence_folder import LocalEvidence
from webhook._admission import Reviewer
from webhook._metrics import Metrics
from webhook._policy_store import PolicyStore
from webhook._wire import parse_review_document

GENESIS = "0" * 64
_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


# --- from docs/decision-log.md alone ------------------------------------------------------------------


def canonical(value: Any) -> str:
    """C(value): RFC 8785 for objects, arrays, strings, integers, booleans and null."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        assert -(2**53) < value < 2**53, "the page says integers stay within ±2^53"
        return str(value)
    if isinstance(value, str):
        out = []
        for char in value:
            if char in _SHORT:
                out.append(_SHORT[char])
            elif ord(char) < 0x20:
                out.append(f"\\u{ord(char):04x}")
            else:
                out.append(char)
        return '"' + "".join(out) + '"'
    if isinstance(value, list):
        return "[" + ",".join(canonical(item) for item in value) + "]"
    if isinstance(value, dict):
        keys = sorted(value, key=lambda key: key.encode("utf-16-be"))
        return "{" + ",".join(canonical(key) + ":" + canonical(value[key]) for key in keys) + "}"
    raise AssertionError(f"the page allows no {type(value).__name__} in a record")


def record_hash(prev_hash: str, record: dict[str, Any]) -> str:
    text = '{"prev_hash":"' + prev_hash + '","record":' + canonical(record) + "}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_chain(lines: list[dict[str, Any]], head_seq: int, head_hash: str) -> int | None:
    """The seq of the first record where the chain does not hold (head_seq + 1: the head differs)."""
    expected_prev = GENESIS
    for number, line in enumerate(lines, start=1):
        if line["seq"] != number or line["prev_hash"] != expected_prev:
            return number
        if record_hash(line["prev_hash"], line["record"]) != line["hash"]:
            return number
        expected_prev = line["hash"]
    if (len(lines), expected_prev) != (head_seq, head_hash):
        return len(lines) + 1
    return None


# --- the log ------------------------------------------------------------------------------------------


def _cli(*argv: object) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        status = main([str(a) for a in argv])
    return status, out.getvalue()


async def _write_log(material: Material, path: Path) -> None:
    store = SQLiteStore(path)
    await store.open()
    policies = PolicyStore(material.policies, LocalEvidence(material.attestations))
    policies.load()
    reviewer = Reviewer(policies, store, Metrics())
    odd = 'résumé ✓ \u2028 \x7f \x01\t\n "q" \\ \U0001f680'
    for obj in (
        pod("resnet", TENSORRT_IMAGE, engine=material.engines["fp16"]),
        pod("bert", OFF_LIST_IMAGE),  # denied: violations and a message
        pod(odd, TENSORRT_IMAGE, engine=material.engines["int8-uncalibrated"]),
        pod("resnet", TENSORRT_IMAGE, engine=material.engines["int8-calibrated"]),
    ):
        body = review(obj=obj)
        body["request"]["userInfo"]["groups"] = ["ml", odd]
        await reviewer.review(parse_review_document(body), api_timeout=10, started=time.perf_counter())
    await store.close()


@pytest.fixture
def log(demo_material: Material, tmp_path: Path) -> Path:
    path = tmp_path / "decisions.db"
    asyncio.run(_write_log(demo_material, path))
    return path


def _read(log: Path) -> tuple[list[dict[str, Any]], int, str]:
    url = f"sqlite:///{log}"
    _, out = _cli("audit", "query", "--decision-log", url, "--format", "json", "--no-verify")
    # Lines end in "\n" alone: a record may hold U+2028, which str.splitlines() would also split on.
    lines = [json.loads(line) for line in out.split("\n") if line]
    _, out = _cli("audit", "verify", "--decision-log", url, "--format", "json")
    head = json.loads(out)
    return lines, head["head_seq"], head["head_hash"]


def test_the_specification_recomputes_a_real_log(log: Path) -> None:
    lines, head_seq, head_hash = _read(log)
    assert [line["record"]["format"] for line in lines] == [2, 2, 2, 2]
    assert any("\x01" in line["record"]["name"] for line in lines)
    assert check_chain(lines, head_seq, head_hash) is None


def test_a_changed_row_breaks_the_chain_where_trtguard_says(log: Path) -> None:
    with sqlite3.connect(log) as conn:
        conn.execute("DROP TRIGGER IF EXISTS trtguard_decisions_no_update")
        conn.execute(
            "UPDATE trtguard_decisions SET body = replace(body, '\"allowed\":false', '\"allowed\":true') "
            "WHERE seq = 2"
        )
    lines, head_seq, head_hash = _read(log)
    assert check_chain(lines, head_seq, head_hash) == 2
    status, out = _cli("audit", "verify", "--decision-log", f"sqlite:///{log}", "--format", "json")
    assert status == 1 and json.loads(out)["first_break"]["seq"] == 2


def test_a_record_removed_from_the_end_shows_against_the_recorded_head(log: Path) -> None:
    lines, head_seq, head_hash = _read(log)
    assert check_chain(lines[:-1], head_seq, head_hash) == len(lines)


def test_an_evidence_package_holds_the_canonical_bytes(
    log: Path, tmp_path: Path, demo_material: Material
) -> None:
    async def export() -> None:
        store = open_store(f"sqlite:///{log}", read_only=True)
        await store.open()
        try:
            await export_evidence_package(
                store,
                Selection.workload("prod/resnet"),
                policies=[demo_material.policies],
                evidence=None,
                key=generate_private_key(),
                output=tmp_path / "package.tar.gz",
            )
        finally:
            await store.close()

    asyncio.run(export())
    with tarfile.open(tmp_path / "package.tar.gz") as archive:
        member = archive.extractfile("decisions/records.jsonl")
        assert member is not None
        raw_lines = [raw for raw in member.read().split(b"\n") if raw]
    previous = None
    for raw in raw_lines:
        line = json.loads(raw)
        # The record's bytes in the line are C(record) itself.
        start = raw.index(b'"record": ') + len(b'"record": ')
        assert raw[start:-1].decode() == canonical(line["record"])
        assert record_hash(line["prev_hash"], line["record"]) == line["hash"]
        assert previous is None or line["prev_hash"] == previous
        previous = line["hash"]


# --- docs/decision-log-storage.md, "What rotation carries forward", from that section alone ------------

KEPT_ADMISSIONS = 2
KEPT_MODELS = 16
Key = tuple[str, str, str, str]


def api_group(record: dict[str, Any]) -> str:
    """The section's group of a record: before the last "/" of api_version; extensions is apps for three."""
    group = record["api_version"].rpartition("/")[0]
    moved = group == "extensions" and record["kind"] in ("Deployment", "ReplicaSet", "DaemonSet")
    return "apps" if moved else group


def fold(state: dict[Key, dict[str, Any]], seq: int, record: dict[str, Any]) -> None:
    """The section's fold: one record applied to the carried state."""
    if record["namespace"] is None or record["name"] is None:
        return
    key = (record["namespace"], api_group(record), record["kind"], record["name"])
    entry = state.get(key)
    if record["reason"] == "AnswerNotDelivered" and record["allowed"] is False:
        mine = record["record_id"]
        original = f"{int(mine[:16], 16) ^ 0xFFFFFFFFFFFFFFFF:016x}{mine[16:]}"
        if entry is None:
            return
        kept = [
            a for a in entry["admissions"] if not (a["uid"] == record["uid"] and a["record_id"] == original)
        ]
        if kept or entry["older"] or entry.get("older_for"):
            state[key] = {**entry, "admissions": kept}
        else:
            del state[key]
        return
    if record["allowed"] is not True or record["dry_run"] is not False:
        return
    engines = [
        {
            "reference": e["reference"],
            "name": e.get("name") if isinstance(e.get("name"), str) else None,
            "containers": [c for c in e["containers"] if isinstance(c, str)]
            if isinstance(e.get("containers"), list)
            else [],
            **{k: e[k] for k in ("model", "manifest") if isinstance(e.get(k), str)},
            **(
                {"confirmed_by": sorted({p for p in e["confirmed_by"] if isinstance(p, str)})}
                if isinstance(e.get("confirmed_by"), list)
                else {}
            ),
            **(
                {
                    "confirmed": {
                        p: {k: v for k, v in b.items() if k in ("model", "manifest") and isinstance(v, str)}
                        for p, b in sorted(e["confirmed"].items())
                        if isinstance(b, dict)
                    }
                }
                if isinstance(e.get("confirmed"), dict)
                else {}
            ),
        }
        for e in record["engines"]
        if isinstance(e.get("reference"), str)
    ]
    if not engines:
        return
    admission = {
        "record_id": record["record_id"],
        "seq": seq,
        "time": record["time"],
        "uid": record["uid"],
        "engines": engines,
    }
    admissions = sorted(
        [*(entry["admissions"] if entry else []), admission],
        key=lambda a: (a["time"], a["seq"]),
        reverse=True,
    )
    keep = set(range(len(admissions))[:KEPT_ADMISSIONS])
    keep.update([i for i, a in enumerate(admissions) if legacy(a)][:KEPT_ADMISSIONS])
    for policy in {p for a in admissions for p in confirmers(a)}:
        mine = [i for i, a in enumerate(admissions) if confirms(a, policy)]
        keep.update(mine[:KEPT_ADMISSIONS])
        models: dict[str, list[int]] = {}
        for i in mine:
            for model in sorted(
                {
                    model
                    for e in admissions[i]["engines"]
                    if (model := policy_model(e, policy)) is not None and policy in e.get("confirmed_by", [])
                }
            ):
                models.setdefault(model, []).append(i)
        for found in list(models.values())[:KEPT_MODELS]:
            keep.update(found[:KEPT_ADMISSIONS])
    older_for = dict(entry.get("older_for", {}) if entry else {})
    for dropped in (a for i, a in enumerate(admissions) if i not in keep and not legacy(a)):
        for policy in ("*", *confirmers(dropped)):
            order = {"time": dropped["time"], "seq": dropped["seq"]}
            newest = older_for.get(policy, order)
            older_for[policy] = max(newest, order, key=lambda o: (o["time"], o["seq"]))
    state[key] = {
        "namespace": key[0],
        "group": key[1],
        "kind": key[2],
        "name": key[3],
        "admissions": [a for i, a in enumerate(admissions) if i in keep],
        "older": bool(entry and entry["older"])
        or any(legacy(a) for i, a in enumerate(admissions) if i not in keep),
        **({"older_for": older_for} if older_for else {}),
    }


def legacy(admission: dict[str, Any]) -> bool:
    """The section's legacy admission: none of its engines has confirmed_by."""
    return not any("confirmed_by" in e for e in admission["engines"])


def confirmers(admission: dict[str, Any]) -> set[str]:
    """The policies named in the confirmed_by of an admission's engines."""
    return {p for e in admission["engines"] for p in e.get("confirmed_by", [])}


def confirms(admission: dict[str, Any], policy: str) -> bool:
    return legacy(admission) or policy in confirmers(admission)


def policy_model(engine: dict[str, Any], policy: str) -> str | None:
    """The section's model of an engine for a policy: its entry in ``confirmed`` where the engine has one."""
    if "confirmed" in engine:
        model = engine["confirmed"].get(policy, {}).get("model")
        return model if isinstance(model, str) else None
    model = engine.get("model")
    return model if isinstance(model, str) else None


def entries(state: dict[Key, dict[str, Any]]) -> list[dict[str, Any]]:
    return [state[key] for key in sorted(state, key=lambda k: tuple(p.encode("utf-16-be") for p in k))]


def state_digest(state: dict[Key, dict[str, Any]]) -> str:
    return hashlib.sha256(canonical({"workloads": entries(state)}).encode("utf-8")).hexdigest()


def test_the_specification_recomputes_what_rotation_carries(
    demo_material: Material, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log the webhook wrote (non-ASCII names, an undelivered record, a dry run), rotated by `audit
    rotate`: every archived segment's checkpoint, carried state and fold check as the page says."""
    from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415

    from decisionlog import DecisionRecord, RecordQuery  # noqa: PLC0415
    from decisionlog import _undelivered as undelivered  # noqa: PLC0415
    from verifier.base._deadline import Deadline  # noqa: PLC0415
    from verifier.crypto._keys import encrypt_private_key  # noqa: PLC0415

    path = tmp_path / "decisions.db"
    asyncio.run(_write_log(demo_material, path))

    async def more() -> None:
        store = SQLiteStore(path)
        await store.open()
        [last] = await store.query(RecordQuery(newest_first=True, limit=1))
        await store.append(undelivered.undelivered(last.record), deadline=Deadline.after(5))
        # Names whose order differs between code points and UTF-16 code units (U+FFFF, U+1F680).
        for name in ("\uffff", "\U0001f680 résumé", "plain"):
            engine = {"reference": demo_material.engines["fp16"], "name": None, "containers": ["server"]}
            record = DecisionRecord(
                uid=name,
                operation="CREATE",
                kind="Pod",
                api_version="v1",
                allowed=True,
                reason="Allowed",
                namespace="prod",
                name=name,
                engines=(engine,),
            )
            await store.append(record, deadline=Deadline.after(5))
        # Two workloads called train (a Volcano Job is not a batch/v1 Job), one called legacy (two versions
        # of one group; extensions served the apps Deployments).
        for api_version, kind, name in (
            ("batch/v1", "Job", "train"),
            ("batch.volcano.sh/v1alpha1", "Job", "train"),
            ("extensions/v1beta1", "Deployment", "legacy"),
            ("apps/v1beta2", "Deployment", "legacy"),
        ):
            engine = {"reference": demo_material.engines["fp16"], "name": "engine", "containers": ["server"]}
            record = DecisionRecord(
                uid=f"{api_version} {name}",
                operation="CREATE",
                kind=kind,
                api_version=api_version,
                allowed=True,
                reason="Allowed",
                namespace="prod",
                name=name,
                engines=(engine,),
            )
            await store.append(record, deadline=Deadline.after(5))
        # Engines that name the policies that confirmed them: a policy's last admission is kept however many
        # admissions it confirmed nothing in came after (scoped), and its cut ones are said (scoped-twice).
        for name, confirmed in (
            *(("scoped", c) for c in (["release"], [], [])),
            *(("scoped-twice", c) for c in (["release"], ["release", "base"], ["release"])),
        ):
            engine = {
                "reference": demo_material.engines["fp16"],
                "name": "engine",
                "containers": ["server"],
                "confirmed_by": confirmed,
            }
            record = DecisionRecord(
                uid=f"{name} {len(confirmed)}",
                operation="UPDATE",
                kind="Deployment",
                api_version="apps/v1",
                allowed=True,
                reason="Allowed",
                namespace="prod",
                name=name,
                engines=(engine,),
            )
            await store.append(record, deadline=Deadline.after(5))
        # Schema 7: each confirming policy's own model and manifest of an engine (``confirmed``).
        for i, (team, platform) in enumerate((("1a", "2b"), ("1a", "3c"))):
            read_twice: dict[str, Any] = {
                "reference": demo_material.engines["fp16"],
                "name": "engine",
                "containers": ["server"],
                "confirmed_by": ["platform", "team"],
                "model": team * 32,
                "confirmed": {"team": {"model": team * 32}, "platform": {"model": platform * 32}},
            }
            record = DecisionRecord(
                uid=f"two readers {i}",
                operation="UPDATE",
                kind="Deployment",
                api_version="apps/v1",
                allowed=True,
                reason="Allowed",
                namespace="prod",
                name="two-readers",
                engines=(read_twice,),
            )
            await store.append(record, deadline=Deadline.after(5))
        await store.close()

    asyncio.run(more())
    key = generate_private_key()
    key_file = tmp_path / "checkpoint.key"
    key_file.write_bytes(encrypt_private_key(key, b"pw"))
    monkeypatch.setenv("TRTGUARD_PASSWORD", "pw")
    url = f"sqlite:///{path}"
    archive = tmp_path / "archive"
    status, _ = _cli(
        "audit",
        "rotate",
        "--decision-log",
        url,
        "--key",
        key_file,
        "--archive",
        archive,
        "--segment-records",
        "2",
    )
    assert status == 0
    public = serialization.load_pem_public_key(key.public_key().to_pem())
    assert isinstance(public, ec.EllipticCurvePublicKey)

    state: dict[Key, dict[str, Any]] = {}
    previous = hashlib.sha256(b'{"workloads":[]}').hexdigest()
    files = sorted(archive.glob("decisions-*.jsonl.gz"))
    assert len(files) == 10
    for file in files:
        with gzip.open(file, "rb") as handle:
            lines = [json.loads(raw) for raw in handle.read().split(b"\n") if raw]
        statement, signature = lines[0]["checkpoint"], base64.b64decode(lines[0]["signature"])
        assert statement["type"] == "trtguard.dev/decision-log-checkpoint/v3"
        public.verify(signature, canonical(statement).encode("utf-8"), ec.ECDSA(hashes.SHA256()))
        assert statement["prev_carried_hash"] == previous == state_digest(state)
        assert lines[1] == {"carried_before": entries(state)}
        for line in lines[2:]:
            fold(state, line["seq"], line["record"])
        assert statement["carried_hash"] == state_digest(state)
        previous = statement["carried_hash"]
    # The newer admission of resnet was taken back by the undelivered record: the one before it is carried.
    [resnet] = [e for e in entries(state) if e["name"] == "resnet"]
    assert [a["seq"] for a in resnet["admissions"]] == [1]
    assert [(e["group"], len(e["admissions"])) for e in entries(state) if e["name"] == "train"] == [
        ("batch", 1),
        ("batch.volcano.sh", 1),
    ]
    legacy = [(e["group"], len(e["admissions"])) for e in entries(state) if e["name"] == "legacy"]
    assert legacy == [("apps", 2)]
    [readers] = [e for e in entries(state) if e["name"] == "two-readers"]
    assert readers["admissions"][0]["engines"][0]["confirmed"] == {
        "platform": {"model": "3c" * 32},
        "team": {"model": "1a" * 32},
    }
    [scoped] = [e for e in entries(state) if e["name"] == "scoped"]
    assert [a["engines"][0]["confirmed_by"] for a in scoped["admissions"]] == [[], [], ["release"]]
    assert "older_for" not in scoped and not scoped["older"]
    [twice] = [e for e in entries(state) if e["name"] == "scoped-twice"]
    assert [a["engines"][0]["confirmed_by"] for a in twice["admissions"]] == [
        ["release"],
        ["base", "release"],
    ]
    # The first was cut: the newest cut admission `release` confirmed is named, by its time and seq.
    assert sorted(twice["older_for"]) == ["*", "release"] and not twice["older"]
    assert twice["older_for"]["release"]["seq"] == twice["admissions"][1]["seq"] - 1
    assert twice["older_for"]["*"] == twice["older_for"]["release"]
    names = [e["name"] for e in entries(state)]
    assert names.index("\U0001f680 résumé") < names.index("\uffff")
    status, out = _cli("audit", "history", "prod/resnet", "--decision-log", url, "--format", "json")
    assert json.loads(out)["carried"] == [resnet]

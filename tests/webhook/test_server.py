"""webhook/_server.py: ``trtguard serve`` as a process: reloads, crashes, deadlines, shared PostgreSQL.

Each test starts its own server over real TLS and talks to it as the API server does.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import signal
import sqlite3
import ssl
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from decisionlog import PostgresStore, RecordQuery, SQLiteStore
from tests.support.harness import (
    ApiServerClient,
    PodFactory,
    ReviewFactory,
    StartWebhook,
    TcpProxy,
    Verifier,
    WaitUntil,
    WebhookProcess,
)
from trtguard.demo.material import OFF_LIST_IMAGE, TENSORRT_IMAGE, UNPINNED_IMAGE, Material
from webhook._tls import make_self_signed

SERVICE = "trtguard.trtguard.svc"
_T = TypeVar("_T")
TRTGUARD = Path(sys.executable).with_name("trtguard")


def _serve_args(material: Material, policies: Path | None = None, *extra: str) -> list[str]:
    return [
        "--policies",
        str(policies or material.policies),
        "--attestations",
        str(material.attestations),
        "--self-signed",
        "tls",
        "--san",
        SERVICE,
        "--decision-log",
        "sqlite:///decisions.db",
        *extra,
    ]


def _metric(text: str, name: str, **labels: str) -> float:
    label_text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    pattern = "^" + re.escape(f"{name}{{{label_text}}}" if labels else name) + r" ([0-9.e+-]+)$"
    match = re.search(pattern, text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


async def test_policy_reload_swaps_good_sets_and_keeps_the_old_one_when_broken(
    demo_material: Material,
    tmp_path: Path,
    webhook_process: StartWebhook,
    make_pod: PodFactory,
    make_review: ReviewFactory,
    verify_admission_response: Verifier,
    wait_until: WaitUntil,
) -> None:
    policies = tmp_path / "policies"
    shutil.copytree(demo_material.policies, policies)
    server = webhook_process(*_serve_args(demo_material, policies, "--reload-interval", "0.2"))
    # The engine runs where it was built; only the signed nginx sidecar is off the allow-list.
    obj = make_pod("p", TENSORRT_IMAGE, engine=demo_material.engines["fp16"], extra_images=(OFF_LIST_IMAGE,))

    async with server.client() as client:

        async def verdict() -> dict[str, Any]:
            body = make_review(obj=obj)
            return verify_admission_response(body["request"]["uid"], await client.post(body))

        async def readyz() -> dict[str, Any]:
            detail: dict[str, Any] = (await client.get("/readyz")).json()
            return detail

        first = await readyz()
        revision = first["policies"]["revision"]
        assert not (await verdict())["allowed"]

        # A broken edit: the previous set stays in force, and that is visible.
        target = policies / "trusted-base-images.yaml"
        good_text = target.read_text()
        target.write_text(good_text + "\n  oops: [unclosed\n")
        detail = await wait_until(
            lambda: _with(readyz(), lambda d: d if d["policies"]["last_reload_error"] else None), within=15
        )
        assert detail["ready"] is True
        assert detail["policies"]["revision"] == revision
        assert "trusted-base-images.yaml" in detail["policies"]["last_reload_error"]["message"]
        metrics = (await client.get("/metrics")).text
        assert _metric(metrics, "trtguard_policy_reloads_total", result="failure") == 1
        assert _metric(metrics, "trtguard_policy_reload_failing") == 1
        assert not (await verdict())["allowed"]  # judged by the old set

        # A good edit goes live atomically: the allow-list finding becomes a warning.
        target.write_text(good_text.replace("action: Deny", "action: Warn"))
        detail = await wait_until(
            lambda: _with(readyz(), lambda d: d if d["policies"]["revision"] != revision else None), within=15
        )
        assert detail["policies"]["last_reload_error"] is None
        answer = await verdict()
        assert answer["allowed"], answer
        assert any("trusted-tensorrt-images" in w for w in answer["warnings"])
        metrics = (await client.get("/metrics")).text
        assert _metric(metrics, "trtguard_policy_reload_failing") == 0
        assert _metric(metrics, "trtguard_policy_reloads_total", result="success") >= 1
        assert _metric(metrics, "trtguard_policy_revision_info", revision=detail["policies"]["revision"]) == 1
    records = [r for r in server.log_records() if r["message"].startswith("policy reload failed")]
    assert len(records) == 1, "a broken set is reported once, not on every poll"


async def _with(awaitable: Awaitable[_T], pick: Callable[[_T], Any]) -> Any:
    return pick(await awaitable)


def _fresh_client_context(ca: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca))
    context.set_alpn_protocols(["http/1.1"])
    return context


async def _handshake_ok(port: int, ca: Path) -> bool:
    # A new connection each time: a pooled one would skip the handshake.
    try:
        _, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=_fresh_client_context(ca), server_hostname=SERVICE
        )
    except ssl.SSLError:
        return False
    writer.close()
    return True


async def test_a_renewed_certificate_is_served_without_a_restart(
    demo_material: Material, tmp_path: Path, webhook_process: StartWebhook, wait_until: WaitUntil
) -> None:
    first = make_self_signed(tmp_path / "ca-one", sans=[SERVICE])
    second = make_self_signed(tmp_path / "ca-two", sans=[SERVICE])
    mounted = tmp_path / "secret"
    mounted.mkdir()
    shutil.copy(first.cert, mounted / "tls.crt")
    shutil.copy(first.key, mounted / "tls.key")
    server = webhook_process(
        "--policies",
        str(demo_material.policies),
        "--attestations",
        str(demo_material.attestations),
        "--tls-cert",
        str(mounted / "tls.crt"),
        "--tls-key",
        str(mounted / "tls.key"),
        "--decision-log",
        "sqlite:///decisions.db",
        "--reload-interval",
        "0.2",
    )
    assert await _handshake_ok(server.port, first.ca_cert)
    assert not await _handshake_ok(server.port, second.ca_cert)
    pid = server.pid

    shutil.copy(second.key, mounted / "tls.key")
    shutil.copy(second.cert, mounted / "tls.crt")
    await wait_until(lambda: _handshake_ok(server.port, second.ca_cert), within=15)
    assert not await _handshake_ok(server.port, first.ca_cert)
    assert server.pid == pid and server.returncode is None

    async with httpx.AsyncClient(verify=_fresh_client_context(second.ca_cert)) as client:
        response = await client.get(
            f"https://127.0.0.1:{server.port}/metrics", extensions={"sni_hostname": SERVICE}
        )
    assert _metric(response.text, "trtguard_tls_reloads_total", result="success") == 1


async def test_sigkill_mid_burst_loses_no_answered_decision(
    demo_material: Material,
    tmp_path: Path,
    webhook_process: StartWebhook,
    make_pod: PodFactory,
    make_review: ReviewFactory,
    verify_admission_response: Verifier,
) -> None:
    """Every request that got an answer is in the log, and the chain verifies, after a SIGKILL."""
    server = webhook_process(*_serve_args(demo_material))
    answered: dict[str, bool] = {}
    failed = 0
    enough = asyncio.Event()

    async def one(client: ApiServerClient, n: int) -> None:
        nonlocal failed
        image = TENSORRT_IMAGE if n % 2 else OFF_LIST_IMAGE
        body = make_review(obj=make_pod(f"burst-{n}", image, engine=demo_material.engines["fp16"]))
        try:
            response = await client.post(body)
        except httpx.HTTPError:
            failed += 1
            return
        answered[body["request"]["uid"]] = verify_admission_response(body["request"]["uid"], response)[
            "allowed"
        ]
        if len(answered) >= 150:
            enough.set()

    async with server.client() as client:
        queue = list(range(600))

        async def worker() -> None:
            while queue:
                await one(client, queue.pop())

        workers = [asyncio.create_task(worker()) for _ in range(16)]
        await asyncio.wait_for(enough.wait(), 120)
        server.kill()
        await asyncio.gather(*workers)
    assert failed > 0, "the kill interrupted the burst"
    assert server.returncode == -signal.SIGKILL

    store = SQLiteStore(tmp_path / "decisions.db", read_only=True)
    report = await store.verify()
    assert report.ok, report.summary()
    logged = {r.record.uid: r.record.allowed for r in await store.query(RecordQuery())}
    missing = set(answered) - set(logged)
    assert not missing, f"{len(missing)} answered decisions are not in the log"
    assert all(logged[uid] == allowed for uid, allowed in answered.items()), "log and answers agree"

    # The restarted server continues the same chain.
    again = webhook_process(*_serve_args(demo_material))
    async with again.client() as client:
        body = make_review(obj=make_pod("after", TENSORRT_IMAGE, engine=demo_material.engines["fp16"]))
        verify_admission_response(body["request"]["uid"], await client.post(body))
    after = await store.verify()
    assert after.ok, after.summary()
    assert after.records == report.records + 1


async def test_sigterm_under_load_closes_the_log_so_a_copy_of_the_file_alone_verifies(
    demo_material: Material,
    tmp_path: Path,
    webhook_process: StartWebhook,
    make_pod: PodFactory,
    make_review: ReviewFactory,
    verify_admission_response: Verifier,
) -> None:
    """Issue 31: uvicorn re-raised SIGTERM before the store was closed, so the head file was not written and
    the WAL not checkpointed: ``decisions.db`` alone could be a file without tables. A clean stop closes the
    store: the file alone holds every answered decision and verifies, and the head file names its head.
    """
    server = webhook_process(*_serve_args(demo_material))
    head_file = tmp_path / "decisions.db.head"
    started_head = json.loads(head_file.read_text())
    answered: set[str] = set()
    enough = asyncio.Event()
    stopping = False

    async with server.client() as client:

        async def worker(w: int) -> None:
            n = 0
            while not stopping:
                n += 1
                body = make_review(obj=make_pod(f"term-{w}-{n}", TENSORRT_IMAGE))
                try:
                    response = await client.post(body)
                except httpx.HTTPError:
                    return
                if response.status_code != 200:
                    return
                uid = body["request"]["uid"]
                verify_admission_response(uid, response)
                answered.add(uid)
                if len(answered) >= 200:
                    enough.set()

        workers = [asyncio.create_task(worker(w)) for w in range(8)]
        await asyncio.wait_for(enough.wait(), 120)
        status = await asyncio.to_thread(server.stop)  # SIGTERM, then wait
        stopping = True
        await asyncio.gather(*workers)
    assert status == 0, server.log_text()

    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copyfile(tmp_path / "decisions.db", copy / "decisions.db")
    store = SQLiteStore(copy / "decisions.db", read_only=True)
    report = await store.verify()
    assert report.ok, report.summary()
    logged = {r.record.uid for r in await store.query(RecordQuery())}
    assert answered <= logged, f"{len(answered - logged)} answered decisions are not in the copy"
    stopped_head = json.loads(head_file.read_text())
    assert stopped_head["seq"] == report.records > started_head["seq"]
    verify = await asyncio.create_subprocess_exec(
        str(TRTGUARD),
        "audit",
        "verify",
        "--decision-log",
        "sqlite:///decisions.db",
        cwd=copy,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output = (await asyncio.wait_for(verify.communicate(), 60))[0].decode()
    assert verify.returncode == 0, output
    assert f"{report.records} records" in output


@pytest.mark.postgres
async def test_sigterm_closes_the_spool_so_a_copy_of_the_spool_file_alone_holds_every_spooled_record(
    demo_material: Material,
    tmp_path: Path,
    webhook_process: StartWebhook,
    pg_url: str,
    pg_proxy: TcpProxy,
    make_pod: PodFactory,
    make_review: ReviewFactory,
    verify_admission_response: Verifier,
) -> None:
    """Issue 31: with PostgreSQL down the answered records wait in the spool; SIGTERM closes it (and the
    pool), so the spool file copied alone, without its WAL, holds them all."""
    await pg_proxy.stop()
    server = webhook_process(
        *_serve_args(demo_material)[:-1],
        pg_proxy.url(pg_url.rsplit("/", 1)[1]),
        "--decision-log-unavailable",
        "spool",
        "--decision-log-spool",
        "spool.db",
    )
    spooled: set[str] = set()
    async with server.client() as client:
        for n in range(5):
            body = make_review(obj=make_pod(f"spooled-{n}", TENSORRT_IMAGE))
            verify_admission_response(body["request"]["uid"], await client.post(body, api_timeout=5))
            spooled.add(body["request"]["uid"])
    assert await asyncio.to_thread(server.stop) == 0, server.log_text()
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copyfile(tmp_path / "spool.db", copy / "spool.db")
    conn = sqlite3.connect(copy / "spool.db")
    try:
        bodies = [json.loads(row[0]) for row in conn.execute("SELECT body FROM trtguard_spool")]
    finally:
        conn.close()
    assert {body["uid"] for body in bodies} == spooled


@pytest.fixture
async def blackhole_registry() -> AsyncIterator[str]:
    """A registry host that accepts connections and never answers."""
    connections: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        await reader.read()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    for writer in connections:
        writer.transport.abort()
    server.close()
    await server.wait_closed()


async def test_a_registry_that_never_answers_is_a_timely_denial(
    demo_material: Material,
    tmp_path: Path,
    webhook_process: StartWebhook,
    blackhole_registry: str,
    make_pod: PodFactory,
    make_review: ReviewFactory,
    verify_admission_response: Verifier,
) -> None:
    config = tmp_path / "registries.yaml"
    config.write_text(f'registries:\n  "{blackhole_registry}":\n    plain_http: true\n')
    server = webhook_process(
        "--policies",
        str(demo_material.policies),
        "--registry-config",
        str(config),
        "--self-signed",
        "tls",
        "--san",
        SERVICE,
        "--decision-log",
        "sqlite:///decisions.db",
    )
    image = f"{blackhole_registry}/inference/server@sha256:{'ab' * 32}"
    body = make_review(obj=make_pod("hang", image, engine=demo_material.engines["fp16"]))
    async with server.client() as client:
        started = time.perf_counter()
        response = await client.post(body, api_timeout=2)
        elapsed = time.perf_counter() - started
    answer = verify_admission_response(body["request"]["uid"], response)
    assert elapsed < 2.0, f"answered after {elapsed:.2f} s, past the API server's 2 s"
    assert answer["allowed"] is False
    assert answer["status"]["code"] == 403
    message = answer["status"]["message"]
    assert "could not be checked" in message or "ran out of time" in message


async def test_broken_policies_at_startup_are_a_clear_error(tmp_path: Path) -> None:
    policies = tmp_path / "p.yaml"
    policies.write_text(
        "apiVersion: trtguard.dev/v1alpha1\nkind: InferencePolicy\nmetadata: {name: x}\nspec: [\n"
    )
    process = await asyncio.create_subprocess_exec(
        str(TRTGUARD),
        "serve",
        "--policies",
        str(policies),
        "--insecure-http",
        "--decision-log",
        f"sqlite:///{tmp_path}/d.db",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 2
    text = stderr.decode()
    assert "trtguard: error:" in text and "p.yaml" in text
    assert "Traceback" not in text


async def test_a_port_in_use_is_a_clear_error(demo_material: Material, tmp_path: Path) -> None:
    holder = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = holder.sockets[0].getsockname()[1]
    try:
        process = await asyncio.create_subprocess_exec(
            str(TRTGUARD),
            "serve",
            *_serve_args(demo_material),
            "--port",
            str(port),
            cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, stderr = await asyncio.wait_for(process.communicate(), 60)
    finally:
        holder.close()
    assert process.returncode == 2
    text = stderr.decode()
    assert f"--port: cannot listen on 127.0.0.1:{port}" in text
    assert "address already in use" in text
    assert "Traceback" not in text


@pytest.mark.parametrize("damage", ["empty", "garbage"])
async def test_a_log_that_cannot_be_opened_is_reported_before_anything_listens(
    demo_material: Material, tmp_path: Path, damage: str, webhook_process: StartWebhook
) -> None:
    (tmp_path / "decisions.db").write_bytes(b"" if damage == "empty" else b"\xa5" * 8192)
    process = await asyncio.create_subprocess_exec(
        str(TRTGUARD),
        "serve",
        *_serve_args(demo_material),
        "--port",
        "0",
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    text = stderr.decode()
    assert process.returncode == 1, text
    assert "listening" not in stdout.decode()
    assert "sqlite:///decisions.db" in text and "--port" not in text and "Traceback" not in text
    if damage == "empty":
        assert "empty (0 bytes)" in text and "--accept-broken-log" in text
    else:
        assert "cannot open the decision log: file is not a database" in text
        return
    # Told to go on, it starts a new chain in its place.
    server = webhook_process(*_serve_args(demo_material), "--accept-broken-log", workdir=tmp_path)
    async with server.client() as client:
        assert (await client.get("/readyz")).status_code == 200


async def test_insecure_http_serves_plain_http(
    demo_material: Material,
    webhook_process: StartWebhook,
    make_pod: PodFactory,
    make_review: ReviewFactory,
    verify_admission_response: Verifier,
) -> None:
    server = webhook_process(
        "--policies",
        str(demo_material.policies),
        "--attestations",
        str(demo_material.attestations),
        "--insecure-http",
        "--decision-log",
        "sqlite:///decisions.db",
    )
    assert server.scheme == "http"
    async with server.client() as client:
        body = make_review(obj=make_pod("plain", UNPINNED_IMAGE))
        answer = verify_admission_response(body["request"]["uid"], await client.post(body))
    assert answer["allowed"] is False


@pytest.mark.postgres
async def test_two_replicas_share_one_postgresql_chain(
    demo_material: Material,
    tmp_path: Path,
    webhook_process: StartWebhook,
    pg_url: str,
    make_pod: PodFactory,
    make_review: ReviewFactory,
    verify_admission_response: Verifier,
) -> None:
    replicas = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        replicas.append(
            webhook_process(
                "--policies",
                str(demo_material.policies),
                "--attestations",
                str(demo_material.attestations),
                "--self-signed",
                "tls",
                "--san",
                SERVICE,
                "--decision-log",
                pg_url,
                workdir=tmp_path / name,
            )
        )
    uids: list[str] = []

    async def burst(replica: WebhookProcess) -> None:
        async with replica.client() as client:
            for n in range(60):
                body = make_review(
                    obj=make_pod(f"r{n}", TENSORRT_IMAGE, engine=demo_material.engines["fp16"])
                )
                verify_admission_response(body["request"]["uid"], await client.post(body))
                uids.append(body["request"]["uid"])

    await asyncio.gather(*(burst(r) for r in replicas))
    store = PostgresStore(pg_url, read_only=True)
    await store.open()
    try:
        report = await store.verify()
        assert report.ok, report.summary()
        assert report.records == 120
        assert {r.record.uid for r in await store.query(RecordQuery())} == set(uids)
    finally:
        await store.close()


@pytest.mark.postgres
async def test_postgresql_down_denies_or_spools_as_configured(
    demo_material: Material,
    tmp_path: Path,
    webhook_process: StartWebhook,
    pg_url: str,
    pg_proxy: TcpProxy,
    make_pod: PodFactory,
    make_review: ReviewFactory,
    verify_admission_response: Verifier,
    wait_until: WaitUntil,
) -> None:
    database = pg_url.rsplit("/", 1)[1]
    url = pg_proxy.url(database)
    common = [
        "--policies",
        str(demo_material.policies),
        "--attestations",
        str(demo_material.attestations),
        "--self-signed",
        "tls",
        "--san",
        SERVICE,
        "--decision-log",
        url,
        "--reload-interval",
        "0.2",
    ]
    await pg_proxy.stop()
    (tmp_path / "deny").mkdir()
    (tmp_path / "spool").mkdir()
    deny = webhook_process(*common, workdir=tmp_path / "deny")
    spool = webhook_process(
        *common,
        "--decision-log-unavailable",
        "spool",
        "--decision-log-spool",
        "spool.db",
        workdir=tmp_path / "spool",
    )
    good = make_pod("ok", TENSORRT_IMAGE, engine=demo_material.engines["fp16"])

    async with deny.client() as client:
        assert (await client.get("/readyz")).status_code == 503
        body = make_review(obj=good)
        answer = verify_admission_response(body["request"]["uid"], await client.post(body, api_timeout=5))
        assert (answer["allowed"], answer["status"]["reason"]) == (False, "DecisionLogUnavailable")

    spooled: list[str] = []
    async with spool.client() as client:
        assert (await client.get("/readyz")).status_code == 200
        for _ in range(3):
            body = make_review(obj=good)
            answer = verify_admission_response(body["request"]["uid"], await client.post(body, api_timeout=5))
            assert answer["allowed"], answer
            spooled.append(body["request"]["uid"])
        assert (await client.get("/readyz")).json()["decision_log"]["spooled"] == 3

        await pg_proxy.start()
        await wait_until(
            lambda: _with(client.get("/readyz"), lambda r: r.json()["decision_log"]["spooled"] == 0),
            within=30,
        )
    async with deny.client() as client:
        # Unready, the replica got no requests; its own health check brought it back (schema and all).
        await wait_until(lambda: _with(client.get("/readyz"), lambda r: r.status_code == 200), within=30)
        body = make_review(obj=good)
        recovered = body["request"]["uid"]
        answer = verify_admission_response(recovered, await client.post(body, api_timeout=5))
        assert answer["allowed"], answer
    store = PostgresStore(pg_url, read_only=True)
    await store.open()
    try:
        assert (await store.verify()).ok
        # The spool was shipped before the recovered replica's decision was made.
        assert [r.record.uid for r in await store.query(RecordQuery())] == [*spooled, recovered]
    finally:
        await store.close()
    records = json.dumps(deny.log_records())
    assert "decision not recorded; denying" in records


async def test_a_policy_file_emptied_and_rewritten_under_load_never_admits_what_it_denies(
    demo_material: Material,
    tmp_path: Path,
    webhook_process: StartWebhook,
    make_pod: PodFactory,
    make_review: ReviewFactory,
    verify_admission_response: Verifier,
    wait_until: WaitUntil,
) -> None:
    """Issue 10, item 7: truncating one library file and writing it back 1.5 s later admitted 40 Pods.

    The Pod is denied by trusted-base-images.yaml alone (its nginx sidecar is off the allow-list).
    """
    policies = tmp_path / "policies"
    shutil.copytree(demo_material.policies, policies)
    server = webhook_process(*_serve_args(demo_material, policies, "--reload-interval", "0.1"))
    obj = make_pod("p", TENSORRT_IMAGE, engine=demo_material.engines["fp16"], extra_images=(OFF_LIST_IMAGE,))
    verdicts: list[bool] = []
    stop = asyncio.Event()

    async def stream(client: ApiServerClient) -> None:
        while not stop.is_set():
            body = make_review(obj=obj)
            verdicts.append(
                verify_admission_response(body["request"]["uid"], await client.post(body))["allowed"]
            )

    async with server.client() as client:
        revision = (await client.get("/readyz")).json()["policies"]["revision"]
        workers = [asyncio.create_task(stream(client)) for _ in range(4)]
        await asyncio.sleep(0.3)
        target = policies / "trusted-base-images.yaml"
        content = target.read_bytes()
        judged = len(verdicts)
        with target.open("wb"):
            pass  # truncated, as an editor or `cp` does before writing
        await asyncio.sleep(1.5)

        async def truncation_seen_under_load() -> bool:
            # the emptied file was read (a failed reload), and Pods were judged meanwhile: on a loaded
            # machine the 1.5 s alone may hold neither
            failure = (await client.get("/readyz")).json()["policies"]["last_reload_error"]
            return failure is not None and len(verdicts) - judged >= 20

        await wait_until(truncation_seen_under_load, within=30)
        target.write_bytes(content)
        await wait_until(
            lambda: _with(
                client.get("/readyz"),
                lambda r: (
                    r.json()["policies"]["last_reload_error"] is None
                    and r.json()["policies"]["revision"] == revision
                ),
            ),
            within=15,
        )
        await asyncio.sleep(0.3)
        stop.set()
        await asyncio.gather(*workers)
        metrics = (await client.get("/metrics")).text
    assert len(verdicts) > 20
    assert not any(verdicts), f"{sum(verdicts)} of {len(verdicts)} Pods admitted that the full set denies"
    # The emptied file was a failed reload, visible as such, not a quiet smaller set.
    assert _metric(metrics, "trtguard_policy_reloads_total", result="failure") >= 1
    assert _metric(metrics, "trtguard_policy_reload_failing") == 0


@pytest.mark.parametrize("log", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
async def test_every_answered_request_is_recorded_whatever_it_held(
    log: str,
    request: pytest.FixtureRequest,
    demo_material: Material,
    tmp_path: Path,
    webhook_process: StartWebhook,
    make_pod: PodFactory,
    make_review: ReviewFactory,
    verify_admission_response: Verifier,
) -> None:
    """Issue 10, item 11: a "\\ud800" escape in a request failed the decision-log write, and a review with a
    uid but no kind was answered but never recorded. Each answer here has its record, and the chain verifies.
    """
    url = "sqlite:///decisions.db" if log == "sqlite" else str(request.getfixturevalue("pg_url"))
    server = webhook_process(
        "--policies",
        str(demo_material.policies),
        "--attestations",
        str(demo_material.attestations),
        "--self-signed",
        "tls",
        "--san",
        SERVICE,
        "--decision-log",
        url,
    )
    surrogate_name = make_review(obj=make_pod("web-\ud800", OFF_LIST_IMAGE))
    surrogate_uid = make_review(obj=make_pod("plain", OFF_LIST_IMAGE), uid="uid-\udc80-" + "7" * 8)
    nul_namespace = make_review(obj=make_pod("nul", OFF_LIST_IMAGE, namespace="prod-\x00x"))
    huge_image = make_review(obj=make_pod("huge", "nvcr.io/nvidia/tensorrt:" + "a" * 200_000))
    no_kind = make_review(obj=make_pod("no-kind", OFF_LIST_IMAGE))
    del no_kind["request"]["kind"]
    no_anything: dict[str, Any] = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "only-a-uid-\ud800\x00"},
    }
    bodies = [surrogate_name, surrogate_uid, nul_namespace, huge_image, no_kind, no_anything]
    answers: dict[str, dict[str, Any]] = {}
    async with server.client() as client:
        for body in bodies:
            uid = body["request"]["uid"]
            answers[uid] = verify_admission_response(uid, await client.post(body))
    assert not any(answer["allowed"] for answer in answers.values()), answers
    assert answers[no_kind["request"]["uid"]]["status"]["reason"] == "BadRequest"
    assert answers[no_anything["request"]["uid"]]["status"]["code"] == 400

    reader: SQLiteStore | PostgresStore = (
        SQLiteStore(tmp_path / "decisions.db", read_only=True)
        if log == "sqlite"
        else PostgresStore(url, read_only=True)
    )
    await reader.open()
    try:
        records = {stored.record.uid: stored.record for stored in await reader.query(RecordQuery())}
        report = await reader.verify()
    finally:
        await reader.close()
    assert report.ok, report.summary()
    assert len(records) == len(bodies)
    mark = "\ufffd"
    assert records[surrogate_name["request"]["uid"]].name == f"web-{mark}\\ud800"
    assert f"uid-{mark}\\udc80-77777777" in records
    assert records[nul_namespace["request"]["uid"]].namespace == f"prod-{mark}\\u0000x"
    huge = records[huge_image["request"]["uid"]]
    assert huge.message is not None and huge.message.endswith("more characters not recorded]")
    bare = records[f"only-a-uid-{mark}\\ud800{mark}\\u0000"]
    assert (bare.reason, bare.kind, bare.operation) == ("BadRequest", "", "")
    kindless = records[no_kind["request"]["uid"]]
    assert (kindless.reason, kindless.kind, kindless.name, kindless.namespace) == (
        "BadRequest",
        "",
        "no-kind",
        "prod",
    )
    assert "request.kind is missing" in (kindless.message or "")
    verify = await asyncio.create_subprocess_exec(
        str(TRTGUARD),
        "audit",
        "verify",
        "--decision-log",
        url,
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output = (await asyncio.wait_for(verify.communicate(), 60))[0].decode()
    assert verify.returncode == 0, output
    assert f"{len(bodies)} records" in output
    assert not [r for r in server.log_records() if r["level"] == "error"], server.log_text()

"""Inputs built to exhaust a running ``trtguard serve``: a YAML alias bomb hot-reloaded as a policy file, and
a CEL expression that is cheap to write and expensive to evaluate.

A real server over TLS, probed the way the kubelet and the API server would while the bomb is read.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from typing import Any

from tests.policies.cel.test_cost import costly_expression
from tests.support.harness import PodFactory, ReviewFactory, StartWebhook, Verifier, WaitUntil, WebhookProcess
from trtguard.demo.material import TENSORRT_IMAGE, Material

SERVICE = "trtguard.trtguard.svc"
#: What a probe may take while a reload is refused (the kubelet's default probe timeout is 1 s).
PROBE_LATENCY = 0.5


def serve_args(material: Material, policies: Path) -> list[str]:
    return [
        "--policies",
        str(policies),
        "--attestations",
        str(material.attestations),
        "--self-signed",
        "tls",
        "--san",
        SERVICE,
        "--decision-log",
        "sqlite:///decisions.db",
        "--reload-interval",
        "0.2",
    ]


def cel_workers(server: WebhookProcess) -> int:
    """How many CEL worker processes (policies.cel.sandbox) the server runs now."""
    found = 0
    for status in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(status.read_text().rsplit(")", 1)[1].split()[1])
            command = (status.parent / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        found += parent == server.pid and b"policies.cel.worker" in command
    return found


def peak_rss(server: WebhookProcess) -> int:
    """The server's peak resident memory so far, in bytes (VmHWM)."""
    for line in Path(f"/proc/{server.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/PID/status")


async def test_a_hot_reloaded_scalar_alias_bomb_is_refused_without_stalling_the_probes(
    demo_material: Material, tmp_path: Path, webhook_process: StartWebhook, wait_until: WaitUntil
) -> None:
    policies = tmp_path / "policies"
    shutil.copytree(demo_material.policies, policies)
    server = webhook_process(*serve_args(demo_material, policies))
    async with server.client() as client:
        revision = (await client.get("/readyz")).json()["policies"]["revision"]
        before = peak_rss(server)
        bomb = policies / "bomb.yaml"
        bomb.write_text(
            "apiVersion: trtguard.dev/v1alpha1\nkind: InferencePolicy\nmetadata: {name: bomb}\nspec:\n"
            f"  images:\n    - name: a\n      x-anchor: &a {'x' * 60_000}\n"
            f"      requireDigest: [{', '.join(['*a'] * 150_000)}]\n"
        )
        slowest = 0.0

        async def probed() -> dict[str, Any] | None:
            nonlocal slowest
            for path in ("/healthz", "/readyz"):
                start = time.monotonic()
                response = await client.get(path)
                slowest = max(slowest, time.monotonic() - start)
                assert response.status_code == 200
            detail: dict[str, Any] = response.json()
            return detail if detail["policies"]["last_reload_error"] else None

        detail = await wait_until(probed, within=15, interval=0.02)
        assert detail is not None and detail["ready"] is True
        assert detail["policies"]["revision"] == revision  # the previous set stays in force
        message = detail["policies"]["last_reload_error"]["message"]
        assert f"{bomb}:8: the document holds more than 16777216 characters of text" in message
        assert len(message) < 1000
        for _ in range(10):  # and the server stays responsive afterwards
            await probed()
    assert slowest < PROBE_LATENCY, f"a probe took {slowest:.2f} s"
    assert peak_rss(server) - before < 100 * 1024 * 1024, "the refused reload grew the server's memory"


COSTLY_POLICY = """\
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: costly-expression}
spec:
  match: {namespaces: [prod]}
  action: Warn
  onError: Deny
  models:
    buildManifest: {keys: [platform/build-signer]}
    rules:
      expressions:
        - {name: costly, cel: 'EXPRESSION', message: the note is read twice}
"""


async def test_an_expensive_expression_is_a_timely_denial_and_blocks_nobody(
    demo_material: Material,
    tmp_path: Path,
    webhook_process: StartWebhook,
    make_pod: PodFactory,
    make_review: ReviewFactory,
    verify_admission_response: Verifier,
) -> None:
    policies = tmp_path / "policies"
    shutil.copytree(demo_material.policies, policies)
    (policies / "costly.yaml").write_text(COSTLY_POLICY.replace("EXPRESSION", costly_expression()))
    server = webhook_process(*serve_args(demo_material, policies))
    engine = demo_material.engines["fp16"]
    normal = make_pod("normal", TENSORRT_IMAGE, engine=engine)
    costly = make_pod("costly", TENSORRT_IMAGE, engine=engine)
    costly["metadata"]["annotations"] = {"note": "x" * 65_536}
    async with server.client(timeout_seconds=10) as client:

        async def judge(obj: dict[str, Any]) -> tuple[dict[str, Any], float]:
            body = make_review(obj=obj)
            start = time.monotonic()
            response = await client.post(body)
            return verify_admission_response(body["request"]["uid"], response), time.monotonic() - start

        answer, _ = await judge(normal)
        assert answer["allowed"], answer  # the evidence is now cached
        alone = [(await judge(normal))[1] for _ in range(3)]  # this machine's pace, measured now
        # Both CEL workers started (they start when first needed): starting one is a second or more on a
        # loaded machine, and would be counted against the Pod that happens to need it.
        for _ in range(20):
            if cel_workers(server) == 2:
                break
            await asyncio.gather(judge(normal), judge(normal))
        assert cel_workers(server) == 2
        before = peak_rss(server)
        slowest_probe = 0.0

        async def probe() -> None:
            nonlocal slowest_probe
            while True:
                start = time.monotonic()
                assert (await client.get("/healthz")).status_code == 200
                slowest_probe = max(slowest_probe, time.monotonic() - start)
                await asyncio.sleep(0.02)

        prober = asyncio.create_task(probe())
        (denied, denied_after), (allowed, allowed_after) = await asyncio.gather(judge(costly), judge(normal))
        prober.cancel()
    assert not denied["allowed"]
    assert "the note is read twice (the expression could not be evaluated" in denied["status"]["message"]
    assert denied_after < 10
    # Not blocked: the normal Pod is answered at about its own pace (a loaded machine slows both alike:
    # 2.4 s seen against a fixed 1.0 s), far sooner than the costly one's evaluation budget.
    assert allowed["allowed"] and allowed_after < max(1.0, 4 * max(alone)), (allowed_after, alone)
    assert slowest_probe < PROBE_LATENCY, f"a probe took {slowest_probe:.2f} s"
    assert peak_rss(server) - before < 100 * 1024 * 1024

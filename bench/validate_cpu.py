"""CPU per ``POST /validate`` in-process: the ASGI app called directly (no TLS, no HTTP client, no load
generator), so the figure is trtguard's own work per request.

The request is ``bench/webhook_latency.py``'s (a Pod of 3 containers and 1 engine, the bundled library
policies, admitted), each with a fresh uid; the decision log is SQLite with ``?synchronous=normal`` (no fsync
per commit, which costs wall time, not CPU). Printed per request: CPU of the whole process (the event loop
and the decision log's writer thread), CPU of the event loop's thread alone, and wall time.

Usage: ``.venv/bin/python bench/validate_cpu.py [--requests N]``
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import sys
import tempfile
import time
import uuid
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import webhook_latency as webhook_bench
from trtguard.demo.material import make_material
from webhook.app import create_app
from webhook.server import Built, build
from webhook.settings import ServeSettings

Message = MutableMapping[str, Any]


def measure(requests: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        material = make_material(root)
        template = webhook_bench._review_body(material, root).read_text()
        settings = ServeSettings(
            policies=material.policies,
            attestations=material.attestations,
            insecure_http=True,
            decision_log=f"sqlite:///{root / 'decisions.db'}?synchronous=normal",
        )
        built = build(settings, out=io.StringIO())
        return asyncio.run(_drive(settings, built, template, requests))


async def _drive(settings: ServeSettings, built: Built, template: str, requests: int) -> dict[str, float]:
    app = create_app(settings, built.services, owns_store=False)
    await built.services.store.open()

    async def one() -> list[Message]:
        body = template.replace(webhook_bench.UID_PLACEHOLDER, str(uuid.uuid4())).encode()
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/validate",
            "raw_path": b"/validate",
            "query_string": b"timeout=10s",
            "root_path": "",
            "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))],
            "client": ("127.0.0.1", 40000),
            "server": ("127.0.0.1", 8443),
        }
        messages = [{"type": "http.request", "body": body, "more_body": False}]
        sent: list[Message] = []

        async def receive() -> Message:
            if messages:
                return messages.pop()
            await asyncio.Event().wait()  # the client never disconnects
            raise AssertionError("unreachable")

        async def send(message: Message) -> None:
            sent.append(message)

        await app(scope, receive, send)
        return sent

    try:
        answer = await one()
        review = json.loads(answer[1]["body"])
        assert answer[0]["status"] == 200 and review["response"]["allowed"] is True, review
        for _ in range(300):  # warm: verified evidence cached, the log's first pages written
            await one()
        process, thread, wall = time.process_time(), time.thread_time(), time.perf_counter()
        for _ in range(requests):
            await one()
        return {
            "requests": requests,
            "cpu_us_per_request": (time.process_time() - process) / requests * 1e6,
            "event_loop_thread_cpu_us_per_request": (time.thread_time() - thread) / requests * 1e6,
            "wall_us_per_request": (time.perf_counter() - wall) / requests * 1e6,
        }
    finally:
        await built.services.store.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    figures = measure(args.requests)
    print(json.dumps({key: round(value, 1) for key, value in figures.items()}))


if __name__ == "__main__":
    main()

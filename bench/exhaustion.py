"""Objects built to stall admission (issue 24, items 9 and 10, and the GPU-fit attacks F4): how long a
real ``trtguard serve`` takes to answer each, and how long an unrelated review sent at the same time waits.

The heavy objects: a Pod with 1,500 init containers sharing an emptyDir (one of them copies the engine
there), a kind trtguard does not know holding 5,000 pod specs, and the same shapes at the workload limits
(499 init containers, 100 pod specs), which are judged in full. The unrelated review is the Pod of
``bench/webhook_latency.py`` (three containers, one engine; admitted).

Against a second server whose policies add the GPU-fit template
(``policies/workload_model/_templates/gpu-fit.yaml``),
node selections built to make GPU fit slow: a Pod (10 KB) whose required node affinity has 20 terms, each
admitting every compute capability up to 998.998 past a product label's ``NotIn``; a Volcano Job of 20
tasks, each of 5 containers mounting an engine volume of their own, under one term of 50 ``Gt``/``Lt``
expressions (judged in full); and one of 100 tasks x 100 containers x 50 expressions (past the container
limit); and a Pod (112 KB) whose server mounts 100 image volumes of one engine, beside 499 containers
each running an image of its own and sharing an emptyDir with it (every one a reader of the engine, so each
runtime rule once made a violation per volume and image: 99,800, a 70 MB answer). There the unrelated Pod
is confined to the engine's GPU (``nodeSelector``), so it is admitted too.

Measured for each heavy object, against one server over TLS (the bundled policies, demo keys and
attestations, an SQLite decision log), in the same run:
  1. baseline: the unrelated review alone, one after another (``--alone`` times);
  2. the heavy review on one connection and, while it is unanswered, unrelated reviews one after another
     on another: the heavy review's answer time, size and verdict, and the unrelated reviews' latencies.

``--before REF`` runs the same against the code of a git revision (``git archive`` into a temporary
folder, served with ``PYTHONPATH`` pointing there, with this checkout's virtual environment), e.g.
``--before main``; the figures of both are printed one after the other.

``--only TEXT`` measures only the heavy objects whose name contains ``TEXT``.

Usage: ``.venv/bin/python bench/exhaustion.py [--before main] [--alone 50] [--timeout 10] [--only TEXT]``
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench import webhook_latency as webhook_bench
from trtguard.demo.material import TENSORRT_IMAGE, Material, make_material
from webhook._tls import make_self_signed

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "policies" / "workload_model" / "_templates"
#: How long the client waits for any one answer (the code before issue 24 took minutes on some).
ANSWER_TIMEOUT = 300.0


def _inits(material: Material, count: int) -> dict[str, Any]:
    containers = [
        {
            "name": f"init-{i}",
            "image": TENSORRT_IMAGE,
            "volumeMounts": [{"name": "scratch", "mountPath": "/out"}]
            + ([{"name": "engine", "mountPath": "/in"}] if i == 0 else []),
        }
        for i in range(count)
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"inits-{count}", "namespace": "prod"},
        "spec": {
            "initContainers": containers,
            "containers": [
                {
                    "name": "server",
                    "image": TENSORRT_IMAGE,
                    "volumeMounts": [{"name": "scratch", "mountPath": "/m"}],
                }
            ],
            "volumes": [
                {"name": "engine", "image": {"reference": material.engines["fp16"]}},
                {"name": "scratch", "emptyDir": {}},
            ],
        },
    }


def _unknown(count: int) -> dict[str, Any]:
    shard = {"template": {"spec": {"containers": [{"name": "server", "image": TENSORRT_IMAGE}]}}}
    return {
        "apiVersion": "shards.example.com/v1",
        "kind": "ShardedServer",
        "metadata": {"name": f"shards-{count}", "namespace": "prod"},
        "spec": {"shards": [{"name": f"shard-{i}", **shard} for i in range(count)]},
    }


def _wide_terms(count: int) -> list[dict[str, Any]]:
    """Node selector terms each admitting every compute capability up to 998.998 (the 26.7 s Pod of F4)."""
    return [
        {
            "matchExpressions": [
                {
                    "key": "nvidia.com/gpu.product",
                    "operator": "NotIn",
                    "values": [f"GPU-{t}-{i}" for i in range(5)],
                },
                {"key": "nvidia.com/gpu.compute.major", "operator": "Gt", "values": ["0"]},
                {"key": "nvidia.com/gpu.compute.major", "operator": "Lt", "values": ["999"]},
                {"key": "nvidia.com/gpu.compute.minor", "operator": "Gt", "values": ["0"]},
                {"key": "nvidia.com/gpu.compute.minor", "operator": "Lt", "values": ["999"]},
            ]
        }
        for t in range(count)
    ]


def _affinity(terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


def _gpu_pod(material: Material, terms: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"terms-{terms}", "namespace": "prod"},
        "spec": {
            "containers": [
                {
                    "name": "server",
                    "image": TENSORRT_IMAGE,
                    "volumeMounts": [{"name": "engine", "mountPath": "/m"}],
                }
            ],
            "volumes": [{"name": "engine", "image": {"reference": material.engines["fp16"]}}],
            "affinity": _affinity(_wide_terms(terms)),
        },
    }


def _gpu_volcano(material: Material, tasks: int, containers: int, expressions: int) -> dict[str, Any]:
    """A Volcano Job whose every container mounts an engine volume of its own, under one term of
    ``expressions`` bounds on the compute capability."""
    bounds = [
        {
            "key": "nvidia.com/gpu.compute.major" if i % 2 else "nvidia.com/gpu.compute.minor",
            "operator": "Gt" if i % 4 < 2 else "Lt",
            "values": [str(i if i % 4 < 2 else 900 + i)],
        }
        for i in range(expressions)
    ]
    engine = material.engines["fp16"]
    spec = {
        "containers": [
            {
                "name": f"c{i}",
                "image": TENSORRT_IMAGE,
                "volumeMounts": [{"name": f"e{i}", "mountPath": f"/e{i}"}],
            }
            for i in range(containers)
        ],
        "volumes": [{"name": f"e{i}", "image": {"reference": engine}} for i in range(containers)],
        "affinity": _affinity([{"matchExpressions": bounds}]),
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": f"volcano-{tasks}x{containers}x{expressions}", "namespace": "prod"},
        "spec": {"tasks": [{"name": f"t{i}", "template": {"spec": spec}} for i in range(tasks)]},
    }


def _many_volumes(material: Material, volumes: int, containers: int) -> dict[str, Any]:
    """A Pod whose server mounts ``volumes`` image volumes of one engine and an emptyDir it shares with
    ``containers`` others, each running an image of its own (pinned, unknown to every policy)."""
    shared = {"name": "share", "mountPath": "/s"}
    server = {
        "name": "server",
        "image": TENSORRT_IMAGE,
        "volumeMounts": [{"name": f"e{i}", "mountPath": f"/m/{i}"} for i in range(volumes)] + [shared],
    }
    others = [
        {
            "name": f"c{i}",
            "image": f"registry.example.com/inference/x@sha256:{hashlib.sha256(str(i).encode()).hexdigest()}",
            "volumeMounts": [shared],
        }
        for i in range(containers)
    ]
    engine = material.engines["fp16"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"volumes-{volumes}x{containers}", "namespace": "prod"},
        "spec": {
            "nodeSelector": {"nvidia.com/gpu.compute.major": "9", "nvidia.com/gpu.compute.minor": "0"},
            "containers": [server, *others],
            "volumes": [{"name": f"e{i}", "image": {"reference": engine}} for i in range(volumes)]
            + [{"name": "share", "emptyDir": {}}],
        },
    }


def _confined(review: bytes) -> bytes:
    """The unrelated review with its Pod placed on the engine's GPU (H200: compute capability 9.0)."""
    body = json.loads(review)
    body["request"]["object"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-H200"}
    return json.dumps(body).encode()


def _review(obj: dict[str, Any]) -> bytes:
    group, _, version = str(obj["apiVersion"]).rpartition("/")
    kind = {"group": group, "version": version, "kind": obj["kind"]}
    request = {
        "uid": webhook_bench.UID_PLACEHOLDER,
        "kind": kind,
        "resource": {**kind, "resource": obj["kind"].lower() + "s"},
        "requestKind": kind,
        "name": obj["metadata"]["name"],
        "namespace": "prod",
        "operation": "CREATE",
        "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
        "object": obj,
        "oldObject": None,
        "dryRun": False,
    }
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    ).encode()


class Client:
    """One keep-alive TLS connection to ``/validate``."""

    def __init__(self, port: int, context: ssl.SSLContext, timeout: float) -> None:
        self.port, self.context, self.timeout = port, context, timeout
        self.link: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        #: The size of the last answer, in bytes.
        self.size = 0

    async def post(self, template: bytes) -> tuple[float, dict[str, Any]]:
        """Seconds to the answer, and the AdmissionReview response."""
        if self.link is None:
            self.link = await webhook_bench._connect(self.port, self.context)
        body = template.replace(webhook_bench.UID_PLACEHOLDER.encode(), str(uuid.uuid4()).encode())
        head = (
            f"POST /validate?timeout={self.timeout:g}s HTTP/1.1\r\n"
            f"Host: {webhook_bench.SERVICE}:{self.port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        started = time.perf_counter()
        status, answer = await asyncio.wait_for(
            webhook_bench._exchange(*self.link, head, body), ANSWER_TIMEOUT
        )
        elapsed = time.perf_counter() - started
        self.size = len(answer)
        response = json.loads(answer)["response"] if status == 200 else {"http": status}
        return elapsed, response

    def close(self) -> None:
        if self.link is not None:
            self.link[1].close()


def _figures(latencies: list[float]) -> str:
    if not latencies:
        return "none answered"
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return (
        f"n={len(ordered):<4} p50 {1000 * statistics.median(ordered):8.1f} ms  p99 {1000 * p99:8.1f} ms  "
        f"max {1000 * ordered[-1]:8.1f} ms"
    )


def _verdict(response: dict[str, Any]) -> str:
    if "http" in response:
        return f"HTTP {response['http']}"
    reason = (response.get("status") or {}).get("reason") or ""
    message = (response.get("status") or {}).get("message") or ""
    return f"{'allowed' if response.get('allowed') else 'denied'} {reason} {message[:90]}".strip()


async def _scenario(
    port: int, context: ssl.SSLContext, heavy: bytes, unrelated: bytes, alone: int, api_timeout: float
) -> dict[str, Any]:
    quiet = Client(port, context, api_timeout)
    for _ in range(10):  # warm-up: the connection, the verified-evidence cache
        await quiet.post(unrelated)
    baseline = [(await quiet.post(unrelated))[0] for _ in range(alone)]
    busy, other = Client(port, context, api_timeout), Client(port, context, api_timeout)
    await other.post(unrelated)  # the connection is open before the heavy review is sent
    heavy_task = asyncio.ensure_future(busy.post(heavy))
    during: list[float] = []
    while not heavy_task.done():
        elapsed, _ = await other.post(unrelated)
        during.append(elapsed)
    heavy_seconds, heavy_response = await heavy_task
    for client in (quiet, busy, other):
        client.close()
    return {
        "heavy": (heavy_seconds, _verdict(heavy_response)),
        "size": busy.size,
        "alone": baseline,
        "during": during,
    }


def _serve(
    material: Material, policies: Path, folder: Path, tls: Any, code: Path | None
) -> tuple[subprocess.Popen[str], int]:
    trtguard = Path(sys.executable).with_name("trtguard")
    command = [
        str(trtguard),
        "serve",
        "--policies",
        str(policies),
        "--attestations",
        str(material.attestations),
    ]
    command += ["--port", "0", "--tls-cert", str(tls.cert), "--tls-key", str(tls.key)]
    command += ["--decision-log", f"sqlite:///{folder / f'decisions-{policies.name}.db'}"]
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = str(code)
    return webhook_bench._start(command, folder / f"serve-{policies.name}.log", folder, env)


def _checkout(revision: str, folder: Path) -> Path:
    """The code of ``revision``, exported (not checked out: the working tree is left alone)."""
    target = folder / "code"
    target.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return target


def run(label: str, code: Path | None, args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="trtguard-exhaustion-"))
    material = make_material(folder / "material")
    tls = make_self_signed(folder / "tls", sans=[webhook_bench.SERVICE])
    unrelated = webhook_bench._review_body(material, folder).read_bytes()
    gpu_policies = folder / "policies-gpu"
    shutil.copytree(material.policies, gpu_policies)
    shutil.copy(TEMPLATES / "gpu-fit.yaml", gpu_policies / "gpu-fit.yaml")
    servers = {
        material.policies: (
            unrelated,
            {
                "Pod, 1,500 init containers": _review(_inits(material, 1500)),
                "Pod, 499 init containers": _review(_inits(material, 499)),
                "unknown kind, 5,000 pod specs": _review(_unknown(5000)),
                "unknown kind, 100 pod specs": _review(_unknown(100)),
            },
        ),
        gpu_policies: (
            _confined(unrelated),
            {
                "GPU fit: Pod, 20 node affinity terms": _review(_gpu_pod(material, 20)),
                "GPU fit: Volcano Job, 20 tasks x 5 engine containers x 50 expressions": _review(
                    _gpu_volcano(material, 20, 5, 50)
                ),
                "GPU fit: Volcano Job, 100 tasks x 100 containers x 50 expressions": _review(
                    _gpu_volcano(material, 100, 100, 50)
                ),
                "runtime rules: Pod, 100 volumes of one engine x 500 images sharing an emptyDir": _review(
                    _many_volumes(material, 100, 499)
                ),
            },
        ),
    }
    context = ssl.create_default_context(cafile=str(tls.ca_cert))
    context.set_alpn_protocols(["http/1.1"])
    print(f"\n{label}   (?timeout={args.timeout:g}s; {os.cpu_count()} CPUs; work files in {folder})")
    for policies, (baseline, heavies) in servers.items():
        process, port = _serve(material, policies, folder, tls, code)
        try:
            for name, body in heavies.items():
                if args.only is not None and args.only not in name:
                    continue
                result = asyncio.run(_scenario(port, context, body, baseline, args.alone, args.timeout))
                seconds, verdict = result["heavy"]
                answer = f"{result['size'] / 1024:,.0f} KB"
                print(f"  {name} ({len(body) // 1024} KB): answered in {seconds:.2f} s ({answer}): {verdict}")
                print(f"    unrelated review alone:        {_figures(result['alone'])}")
                print(f"    unrelated review meanwhile:    {_figures(result['during'])}")
        finally:
            webhook_bench._stop(process)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--before", metavar="REF", help="also measure the code of this git revision (e.g. main)"
    )
    parser.add_argument("--alone", type=int, default=50, help="unrelated reviews in each baseline (50)")
    parser.add_argument(
        "--timeout", type=float, default=10.0, help="the API server's ?timeout= in seconds (10)"
    )
    parser.add_argument("--only", metavar="TEXT", help="measure only the heavy objects whose name holds TEXT")
    args = parser.parse_args()
    run("this checkout", None, args)
    if args.before is not None:
        with tempfile.TemporaryDirectory(prefix="trtguard-before-") as scratch:
            run(f"before: {args.before}", _checkout(args.before, Path(scratch)), args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

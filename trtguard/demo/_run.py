"""The scripted demo behind the README's first command (``make demo``).

It generates keys and signed material, starts ``trtguard serve`` with the bundled example policies, a
self-signed certificate and an SQLite decision log, then plays the API server: it sends five real
AdmissionReviews over TLS (one admitted Pod and four that the policies deny) and prints each verdict with its
message. It ends by checking the decision log's hash chain, exporting the evidence package of the admitted
engine (signed with a key of its own) and writing that package's HTML report, whose path it prints.

It also writes the five Pods to ``pods.yaml`` and the first one's AdmissionReview to ``review.json`` in its
folder, for trying the running webhook with ``trtguard review`` and ``curl`` (``--keep-running`` prints both
commands).

Usage: ``python -m trtguard.demo [--workdir DIR] [--port N] [--keep-running]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import queue
import re
import signal
import ssl
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final, TextIO, cast

import httpx
import yaml

from decisionlog import SQLiteStore
from policies.requesters import Requester
from trtguard.admission_review import admission_review as wrap
from trtguard.audit.package import Selection, export_evidence_package
from trtguard.audit.report import write_report
from trtguard.demo.material import (
    OFF_LIST_IMAGE,
    SIDECAR_IMAGES,
    TENSORRT_IMAGE,
    UNPINNED_IMAGE,
    Material,
    make_material,
)
from verifier.base import InputError, TrtguardError
from verifier.crypto import generate_private_key
from verifier.evidence_folder import LocalEvidence

SERVICE: Final = "trtguard.trtguard.svc"
NAMESPACE: Final = "prod"
START_TIMEOUT: Final = 90.0


@dataclass(frozen=True, slots=True)
class Scenario:
    """One AdmissionReview the demo sends, and the verdict it expects."""

    title: str
    name: str
    image: str
    engine: str
    allowed: bool
    expect: str
    """A phrase the answer's message must contain (empty for an admission)."""


def scenarios(material: Material) -> list[Scenario]:
    """The five requests of the demo."""
    return [
        Scenario(
            "Pinned, signed TensorRT image with a signed FP16 engine",
            "resnet50-fp16",
            TENSORRT_IMAGE,
            material.engines["fp16"],
            True,
            "",
        ),
        Scenario(
            "TensorRT image by tag only, not pinned by digest",
            "resnet50-unpinned",
            UNPINNED_IMAGE,
            material.engines["fp16"],
            False,
            "not pinned by digest",
        ),
        Scenario(
            "Image outside the allow-list of TensorRT images",
            "resnet50-nginx",
            OFF_LIST_IMAGE,
            material.engines["fp16"],
            False,
            "not allowed by any image rule",
        ),
        Scenario(
            "Engine whose build manifest carries no signature",
            "resnet50-unsigned",
            TENSORRT_IMAGE,
            material.engines["unsigned"],
            False,
            "build manifest not signed",
        ),
        Scenario(
            "INT8 engine without calibration evidence",
            "resnet50-int8",
            TENSORRT_IMAGE,
            material.engines["int8-uncalibrated"],
            False,
            "no calibration evidence",
        ),
    ]


def pod(scenario: Scenario) -> dict[str, Any]:
    """The scenario's Pod (three containers, the engine mounted as an image volume)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": scenario.name, "namespace": NAMESPACE, "labels": {"app": "resnet50"}},
        "spec": {
            "containers": [
                {
                    "name": "server",
                    "image": scenario.image,
                    "volumeMounts": [{"name": "engine", "mountPath": "/models", "readOnly": True}],
                },
                {"name": "metrics", "image": SIDECAR_IMAGES[0]},
                {"name": "logs", "image": SIDECAR_IMAGES[1]},
            ],
            "volumes": [
                {"name": "engine", "image": {"reference": scenario.engine, "pullPolicy": "IfNotPresent"}}
            ],
        },
    }


def admission_review(scenario: Scenario) -> dict[str, Any]:
    """The AdmissionReview v1 that kube-apiserver would send for the scenario's Pod."""
    return wrap(pod(scenario), requester=DEMO_USER)


def write_manifests(cases: Sequence[Scenario], workdir: Path) -> tuple[Path, Path]:
    """The demo's Pods as one manifest file (for ``trtguard review`` and ``check``), and the first one's
    AdmissionReview as a file (for ``curl``); returns both paths."""
    manifests, review = workdir / "pods.yaml", workdir / "review.json"
    manifests.write_text(yaml.safe_dump_all([pod(case) for case in cases], sort_keys=False))
    review.write_text(json.dumps(admission_review(cases[0]), indent=2) + "\n")
    return manifests, review


@dataclass
class _Server:
    process: subprocess.Popen[str]
    url: str
    ca: Path
    log: Path


@contextlib.contextmanager
def _serve(material: Material, workdir: Path, out: TextIO, port: int = 0) -> Iterator[_Server]:
    log = workdir / "serve.log"
    command = [
        sys.executable, "-m", "trtguard", "serve",
        "--policies", str(material.policies),
        "--attestations", str(material.attestations),
        "--self-signed", str(workdir / "tls"), "--san", SERVICE,
        "--decision-log", f"sqlite:///{workdir / 'decisions.db'}",
        "--port", str(port),
    ]  # fmt: skip
    with log.open("w") as stderr:
        process = subprocess.Popen(command, cwd=workdir, stdout=subprocess.PIPE, stderr=stderr, text=True)
    try:
        url, ca = _wait_for_start(process, log)
        print(f"trtguard serve is listening on {url} (CA {ca}; logs in {log})", file=out, flush=True)
        yield _Server(process, url, ca, log)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_for_start(
    process: subprocess.Popen[str], log: Path, timeout: float = START_TIMEOUT
) -> tuple[str, Path]:
    """The URL and CA file that ``trtguard serve`` prints once it listens; gives up after ``timeout`` s."""
    stdout = cast(IO[str], process.stdout)  # opened with stdout=PIPE
    # A thread reads the lines, so that a server that prints nothing cannot block the wait beyond `timeout`
    # (and it keeps draining the pipe afterwards, so the server never blocks on a full one).
    lines: queue.SimpleQueue[str] = queue.SimpleQueue()
    threading.Thread(target=_pump, args=(stdout, lines), name="demo-serve-stdout", daemon=True).start()
    ca: Path | None = None
    deadline = time.monotonic() + timeout
    while (remaining := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=remaining)
        except queue.Empty:
            break
        if not line:
            raise TrtguardError(
                f"trtguard serve stopped (exit {process.wait()}) before it listened",
                location=str(log),
                hint="read the log above for why",
            )
        if "CA certificate for clients" in line:
            ca = Path(line.rsplit(": ", 1)[1].strip())
        if "admission webhook listening on " in line and ca is not None:
            return line.rsplit(" ", 1)[1].strip(), ca
    raise TrtguardError(f"trtguard serve did not start within {timeout:.0f} s", location=str(log))


def _pump(stream: IO[str], lines: queue.SimpleQueue[str]) -> None:
    """Every line of ``stream``, then ``""`` at its end."""
    for line in stream:
        lines.put(line)
    lines.put("")


#: Who the demo's requests come from.
DEMO_USER = Requester.impersonated("demo@example.com")


async def _send(server: _Server, cases: Sequence[Scenario], out: TextIO) -> int:
    context = ssl.create_default_context(cafile=str(server.ca))
    context.set_alpn_protocols(["http/1.1"])
    port = server.url.rsplit(":", 1)[1]
    unexpected = 0
    async with httpx.AsyncClient(verify=context, http2=False, timeout=30.0) as client:
        for number, case in enumerate(cases, start=1):
            review = admission_review(case)
            # As kube-apiserver does: the Service name as SNI and Host, the CA from caBundle, ?timeout=.
            response = await client.post(
                f"https://127.0.0.1:{port}/validate?timeout=10s",
                content=json.dumps(review).encode(),
                headers={"content-type": "application/json", "host": f"{SERVICE}:443"},
                extensions={"sni_hostname": SERVICE},
            )
            answer = response.json()["response"]
            print(f"\n{number}. {case.title}", file=out)
            print(f"   image {case.image}\n   engine {case.engine}", file=out)
            if answer["allowed"]:
                print("   -> ALLOWED", file=out)
                for warning in answer.get("warnings", []):
                    print(f"      warning: {warning}", file=out)
            else:
                status = answer["status"]
                print(f"   -> DENIED ({status['code']} {status['reason']})", file=out)
                # One finding per paragraph: the message joins them as "N policy violations: (1) … | (2) …".
                for finding in re.split(r"^\d+ policy violations: |\s\|\s(?=\(\d+\) )", status["message"]):
                    if finding:
                        print(
                            textwrap.fill(
                                finding, width=110, initial_indent="      ", subsequent_indent="        "
                            ),
                            file=out,
                        )
            matched = answer["allowed"] == case.allowed and (
                case.allowed or case.expect in answer["status"]["message"]
            )
            if not matched:
                unexpected += 1
                print(f"   !! expected {'an admission' if case.allowed else repr(case.expect)}", file=out)
    return unexpected


def run(workdir: Path, *, keep_running: bool = False, port: int = 0, out: TextIO | None = None) -> int:
    """Play the demo in ``workdir`` with the webhook on 127.0.0.1:``port`` (0: a free one); returns 0 when
    every verdict was the expected one."""
    out = out or sys.stdout
    workdir = workdir.resolve()
    if workdir.exists() and not workdir.is_dir():
        raise InputError("--workdir names a file, not a folder", location=str(workdir))
    try:
        workdir.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # a file of that name, or a folder nothing can be created in
        raise InputError(f"cannot make the demo folder: {error.strerror}", location=str(workdir)) from None
    print(f"trtguard demo: generating keys, signed engines and attestations in {workdir}", file=out)
    bin_dir = Path(sys.executable).parent
    print(
        f"  the trtguard command is {bin_dir / 'trtguard'} (`. {bin_dir / 'activate'}` puts it on PATH)",
        file=out,
    )
    material = make_material(workdir)
    print(f"  bundled policies with the demo keys: {material.policies}", file=out, flush=True)
    cases = scenarios(material)
    manifests, review = write_manifests(cases, workdir)
    with _serve(material, workdir, out, port) as server:
        unexpected = asyncio.run(_send(server, cases, out))
        report = asyncio.run(SQLiteStore(workdir / "decisions.db", read_only=True).verify())
        print(f"\nDecision log sqlite:///{workdir / 'decisions.db'}: {report.summary()}", file=out)
        print(
            f"  see it with: trtguard audit tail --decision-log sqlite:///{workdir / 'decisions.db'}",
            file=out,
        )
        verified = _write_evidence_report(material, workdir, out)
        if keep_running:
            print(f"\nThe webhook keeps running at {server.url}; Ctrl-C stops it. Try it:", file=out)
            print(f"  trtguard review {manifests} --server {server.url} --ca {server.ca}", file=out)
            print(
                f"  curl --cacert {server.ca} -H 'content-type: application/json' --data @{review} "
                f"{server.url}/validate",
                file=out,
                flush=True,
            )
            with contextlib.suppress(KeyboardInterrupt):
                server.process.wait()
    if unexpected or not report.ok or not verified:
        reasons = [f"{unexpected} unexpected verdict(s)"] if unexpected else []
        reasons += [] if report.ok else ["the decision log's hash chain did not verify"]
        reasons += [] if verified else ["the evidence package of the demo's decisions did not verify"]
        print(f"\ndemo FAILED: {'; '.join(reasons)}", file=out)
        return 1
    return 0


def _write_evidence_report(material: Material, workdir: Path, out: TextIO) -> bool:
    """Export the admitted engine's evidence package and write its report; True when it verified."""
    key = generate_private_key()
    (workdir / "evidence-exporter.pub").write_bytes(key.public_key().to_pem())
    package, page = workdir / "evidence.tar.gz", workdir / "evidence-report.html"
    engine = material.engines["fp16"].rsplit("@", 1)[1]

    async def export() -> None:
        store = SQLiteStore(workdir / "decisions.db", read_only=True)
        await store.open()
        try:
            await export_evidence_package(
                store,
                Selection.engine(engine),
                policies=[material.policies],
                evidence=LocalEvidence(material.attestations),
                key=key,
                output=package,
                overwrite=True,
            )
        finally:
            await store.close()

    asyncio.run(export())
    view = write_report(package, key.public_key(), page, overwrite=True)
    state = "verified" if view.verified else "FAILED verification"
    print(f"\nEvidence package of the admitted engine: {package} ({state})", file=out)
    print(f"  its report: {page}", file=out)
    print(
        f"  open it in a browser, or check the package: trtguard evidence verify {package} --key "
        f"{workdir / 'evidence-exporter.pub'}",
        file=out,
    )
    return view.verified


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point of ``python -m trtguard.demo``."""
    parser = argparse.ArgumentParser(prog="python -m trtguard.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path(".trtguard-demo"),
        help="where the demo writes (./.trtguard-demo)",
    )
    parser.add_argument("--keep-running", action="store_true", help="leave the webhook running afterwards")
    parser.add_argument(
        "--port", type=int, default=0, help="the webhook's port on 127.0.0.1 (default 0: a free one)"
    )
    args = parser.parse_args(argv)
    try:
        return run(args.workdir, keep_running=args.keep_running, port=args.port)
    except TrtguardError as error:
        print(f"trtguard demo: error: {error.diagnostics()}", file=sys.stderr)
        return error.exit_code

"""``trtguard serve`` imports at start-up every module an admission may verify with (attack 37a F4).

The package front doors are lazy: without this, the signature formats' modules (Notation, Sigstore bundles,
RFC 3161, OpenPGP, scans, model signing) were first imported by the first admission that needed them, whose
import failure (a broken or partial install) became an evaluation error that a policy's ``onError: Warn``
would admit, and whose import cost fell on that admission. Each case runs in a fresh interpreter: this
process's ``sys.modules`` holds whatever earlier tests imported.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from trtguard.demo.material import Material

#: What the first admission of each signature format imported after start-up before the fix: recorded by
#: running the demo material's admissions (cosign DSSE, Notation and Sigstore code through
#: ``verifier.signatures``) and by following the imports the other formats make on first use (OpenPGP
#: signatures, SBOMs and scans, model signatures).
FIRST_USE: tuple[str, ...] = (
    "cbor2",
    "rfc3161_client",
    "rfc3161_client.verify",
    "cryptography.hazmat.asn1",
    "cryptography.hazmat.backends.openssl.backend",
    "verifier.crypto._der",
    "verifier.signatures._bundle",
    "verifier.signatures._classic",
    "verifier.signatures._rekor",
    "verifier.signatures._timestamp",
    "verifier.signatures._verify",
    "verifier.signatures.notation",
    "verifier.signatures.notation._envelope",
    "verifier.signatures.notation._tstoken",
    "verifier.signatures.notation._verify",
    "verifier.model_signing._signature",
    "verifier.model_signing._trust",
    "verifier.scans._cyclonedx",
    "verifier.scans._spdx",
    "verifier.scans._cosign",
    "pysequoia",
    "pysequoia.packet",
)

_ADMISSIONS = """
import asyncio, io, json, sys
from pathlib import Path
import httpx
from tests.support.harness import pod, review
from trtguard.demo.material import OFF_LIST_IMAGE, TENSORRT_IMAGE, UNPINNED_IMAGE
from webhook._app import create_app
from webhook._server import build
from webhook._settings import ServeSettings

material, engines = Path(sys.argv[1]), json.loads(sys.argv[2])
first_use = json.loads(sys.argv[3])


async def main() -> None:
    settings = ServeSettings(
        policies=material / "policies", attestations=material / "attestations", insecure_http=True,
        decision_log="sqlite:///decisions.db",
    )
    built = build(settings, out=io.StringIO())
    app = create_app(settings, built.services)
    async with app.router.lifespan_context(app):
        started = set(sys.modules)
        missing = [name for name in first_use if name not in started]
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
            for namespace in ("prod", "default"):
                workloads = [pod("p", image, namespace=namespace)
                             for image in (OFF_LIST_IMAGE, TENSORRT_IMAGE, UNPINNED_IMAGE)]
                workloads += [pod("e", TENSORRT_IMAGE, namespace=namespace, engine=engine)
                              for engine in engines]
                for workload in workloads:
                    for path in ("/validate", "/mutate"):
                        answer = await client.post(path, content=json.dumps(review(obj=workload)))
                        assert answer.status_code == 200, answer.text
    new = sorted(
        name for name in set(sys.modules) - started
        if name.split(".")[0] not in sys.stdlib_module_names
    )
    print(json.dumps({"missing": missing, "new": new}))


asyncio.run(main())
"""

_BROKEN = """
import sys
from importlib.abc import MetaPathFinder


class Unimportable(MetaPathFinder):
    # A broken or partial install: the module is there in name only.
    def find_spec(self, name, path=None, target=None):
        if name == sys.argv[1] or name.startswith(sys.argv[1] + "."):
            if sys.argv[2] == "syntax":  # a file that is there but broken
                raise SyntaxError(f"{name} is broken (test)")
            raise ImportError(f"{name} is broken (test)", name=name)
        return None


sys.meta_path.insert(0, Unimportable())
from trtguard.cli import main

sys.exit(main(sys.argv[3:]))
"""


def test_start_up_imports_what_the_first_admissions_would(demo_material: Material, tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _ADMISSIONS,
            str(demo_material.policies.parent),
            json.dumps(sorted(demo_material.engines.values())),
            json.dumps(FIRST_USE),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert found == {"missing": [], "new": []}


@pytest.mark.parametrize(
    ("module", "breaks", "named"),
    [
        ("cbor2", "import", "cannot import cbor2 ("),
        # httpx imports its HTTP stack on the registry client's first connection (attack 37c F1)
        ("httpcore", "import", "cannot import httpcore ("),
        ("certifi", "import", "cannot import certifi ("),
        # a module that raises something else than ImportError is reported alike (attack 37c F2)
        ("verifier.scans._spdx", "syntax", "cannot import verifier.scans._spdx ("),
    ],
)
async def test_a_verification_module_that_does_not_import_stops_serve_before_it_listens(
    demo_material: Material, tmp_path: Path, module: str, breaks: str, named: str
) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _BROKEN,
        module,
        breaks,
        "serve",
        "--policies",
        str(demo_material.policies),
        "--attestations",
        str(demo_material.attestations),
        "--insecure-http",
        "--port",
        "0",
        "--decision-log",
        "sqlite:///decisions.db",
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    text = stderr.decode()
    assert process.returncode == 2, text
    assert "listening" not in stdout.decode()
    assert "trtguard: error:" in text and named in text and "hint:" in text
    if module == "cbor2":
        assert "which admissions need through verifier.signatures" in text
    assert "Traceback" not in text
    # Nothing was listening, so nothing was decided: the log was never opened.
    assert not (tmp_path / "decisions.db").exists()

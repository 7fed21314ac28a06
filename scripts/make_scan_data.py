"""Regenerate the real scanner outputs in tests/data (601-607) with the tools of the dev extra.

The outputs are what `pip-audit` and `cyclonedx-py` write; only their inputs are fixed here. Two facts of
this sandbox shape them, and both are recorded in tests/data/README.md:

* PyPI's per-version JSON API (which `pip-audit`'s default service reads) is not reachable, so the default
  service skips every package: 602 and 604 are real "audited nothing, found nothing" outputs.
* The OSV API is not reachable either, so the vulnerability runs ask a stand-in on 127.0.0.1 that answers
  OSV's ``/v1/query`` from 601: three real advisory records copied from pypa/advisory-database and
  github/advisory-database (the commits are in the file). It matches a query by package name (PEP 503) and
  by the record's ``versions`` list or ``ECOSYSTEM`` range, as OSV does.

Usage: ``.venv/bin/python scripts/make_scan_data.py`` (about 20 s).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

from packaging.version import InvalidVersion, Version

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
BIN = Path(sys.executable).parent
ADVISORIES = DATA / "601-osv-pyyaml-advisories.json"


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _affects(record: dict[str, Any], name: str, version: str) -> bool:
    for affected in record.get("affected", []):
        package = affected.get("package", {})
        if package.get("ecosystem") != "PyPI" or _canonical(package.get("name", "")) != name:
            continue
        if version in affected.get("versions", []):
            return True
        for span in affected.get("ranges", []):
            if span.get("type") != "ECOSYSTEM":
                continue
            introduced = fixed = None
            for event in span.get("events", []):
                introduced = event.get("introduced", introduced)
                fixed = event.get("fixed", fixed)
            try:
                current = Version(version)
                if Version(introduced or "0") <= current and (fixed is None or current < Version(fixed)):
                    return True
            except InvalidVersion:
                continue
    return False


class _Osv(BaseHTTPRequestHandler):
    records: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:  # the OSV API's /v1/query
        query = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        name, version = _canonical(query["package"]["name"]), query["version"]
        found = [r for r in self.records if _affects(r, name, version)]
        body = json.dumps({"vulns": found} if found else {}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _run(*args: str) -> None:
    print("$", " ".join(args))
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    # pip-audit exits 1 when it found vulnerabilities; anything else is a failure
    if result.returncode not in (0, 1):
        raise SystemExit(f"{args[0]} failed ({result.returncode}):\n{result.stderr}")


def main() -> None:
    _Osv.records = json.loads(ADVISORIES.read_text())["vulns"]
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Osv)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    osv = f"http://127.0.0.1:{server.server_address[1]}/v1/query"
    audit = [str(BIN / "pip-audit"), "--no-deps", "--disable-pip", "--progress-spinner", "off"]
    with tempfile.TemporaryDirectory() as folder:
        vulnerable = Path(folder) / "requirements.txt"
        vulnerable.write_text("PyYAML==5.3\nrequests==2.32.3\n")
        clean = Path(folder) / "clean.txt"
        clean.write_text("PyYAML==6.0.2\nrequests==2.32.3\n")
        for number, fmt in (("602", "cyclonedx-json"), ("604", "json")):
            out = DATA / f"{number}-pip-audit-offline-skipped.{'cdx.json' if fmt != 'json' else 'json'}"
            _run(*audit, "-r", str(vulnerable), "--format", fmt, "-o", str(out))
        osv_audit = [*audit, "--vulnerability-service", "osv", "--osv-url", osv]
        _run(
            *osv_audit,
            "-r",
            str(vulnerable),
            "--format",
            "cyclonedx-json",
            "-o",
            str(DATA / "603-pip-audit-pyyaml-5.3.cdx.json"),
        )
        _run(
            *osv_audit,
            "-r",
            str(vulnerable),
            "--format",
            "json",
            "-o",
            str(DATA / "605-pip-audit-pyyaml-5.3.json"),
        )
        _run(
            *osv_audit,
            "-r",
            str(clean),
            "--format",
            "cyclonedx-json",
            "-o",
            str(DATA / "606-pip-audit-clean.cdx.json"),
        )
        _run(
            str(BIN / "cyclonedx-py"),
            "requirements",
            str(vulnerable),
            "--of",
            "JSON",
            "--sv",
            "1.6",
            "-o",
            str(DATA / "607-cyclonedx-py-requirements.cdx.json"),
        )
    server.shutdown()


if __name__ == "__main__":
    main()

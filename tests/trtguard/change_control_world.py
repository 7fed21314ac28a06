"""The world of the change-control stories: signed material, a real ``trtguard serve`` over TLS with its
decision log (SQLite or PostgreSQL), the operator's checkpoint key, and ``trtguard check`` beside it."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.policies.conftest import Material
from tests.support.harness import SERVICE, WebhookProcess, review, verify_admission_response
from trtguard.cli import main
from verifier.crypto._keys import encrypt_private_key, generate_private_key

PASSWORD = "issue 24"
RUNTIME = "nvcr.io/nvidia/tensorrt@sha256:" + "a1" * 32
INT8 = {"typing": "weak", "precision_flags": ["fp16", "int8"], "max_workspace_size": 1 << 30}
CALIBRATION = {"dataset": {"sha256": "f6" * 32}, "cache": {"sha256": "07" * 32}}
TRT8 = {"image": RUNTIME, "tensorrt_version": "8.6.1.6", "cuda_version": "12.0.1"}
HISTORY_NOTE = "history was not consulted"


def cli(*argv: object) -> tuple[int, str, str]:
    """``trtguard ARGV`` in this process: exit status, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([str(a) for a in argv])
    return status, out.getvalue(), err.getvalue()


@dataclass
class World:
    """The signed material, the webhook (started by the first request: it reads the attestation folder when
    it starts), its decision log, and the operator's checkpoint key."""

    material: Material
    policies: list[Path]
    log: str
    key: Path
    archive: Path
    server: WebhookProcess

    def ask(
        self,
        obj: dict[str, Any],
        *,
        operation: str = "CREATE",
        old: dict[str, Any] | None = None,
        dry_run: bool = False,
        user: str | None = None,
    ) -> dict[str, Any]:
        body = review(obj=obj, operation=operation, old=old, dry_run=dry_run)
        if user is not None:
            body["request"]["userInfo"] = {"username": user, "groups": ["system:authenticated"]}
        if self.server.process is None:  # started once the material is made: it reads the folder at start
            self.server.start()

        async def post() -> dict[str, Any]:
            async with self.server.client() as client:
                return verify_admission_response(body["request"]["uid"], await client.post(body))

        return asyncio.run(post())

    def rotate(self) -> None:
        """`audit rotate` beside the serving webhook: every record is sealed, archived and pruned."""
        status, out, err = cli(
            "audit",
            "rotate",
            "--decision-log",
            self.log,
            "--key",
            self.key,
            "--archive",
            self.archive,
            "--segment-records",
            "1",
        )
        assert status == 0, err
        assert "pruned seq" in out, out

    def restart(self) -> None:
        self.server.stop()
        self.server.process, self.server.port = None, 0

    def replace_policy(self, text: str) -> None:
        """The policy file changed (for ``check``, and for the webhook, restarted to read it)."""
        policy = self.policies[0]
        policy.write_text(textwrap.dedent(text))
        (self.material.root / "policies" / policy.name).write_text(policy.read_text())
        self.restart()

    def last_record(self) -> dict[str, Any]:
        """The newest record of the decision log (`audit query --last 1`)."""
        status, out, err = cli(
            "audit", "query", "--decision-log", self.log, "--format", "json", "--last", "1"
        )
        assert status == 0, err
        record: dict[str, Any] = json.loads(out)["record"]
        return record

    def check(self, obj: dict[str, Any], *extra: object, fmt: str = "json") -> tuple[int, str]:
        path = self.material.root / "check-input.yaml"
        path.write_text(yaml.safe_dump(obj, sort_keys=False))
        args: list[object] = ["check"]
        for policy in self.policies:
            args += ["--policies", policy]
        status, out, err = cli(
            *args, "--attestations", self.material.attestations, "--format", fmt, *extra, path
        )
        assert status in (0, 1), err
        return status, out


def make_world(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: str
) -> Iterator[World]:
    """A :class:`World` on the store ``request.param`` names (``sqlite`` or ``postgresql``) under ``policy``
    (with the build signer and the committee alice, bob and chen); for a fixture to yield from."""
    material = Material(tmp_path)
    policies = [
        material.policy(policy),
        material.keys_file("build-signer"),
        material.keys_file("alice", "bob", "chen", set_name="committee"),
    ]
    folder = tmp_path / "policies"
    folder.mkdir()
    for path in policies:
        (folder / path.name).write_text(path.read_text())
    workdir = tmp_path / "webhook"
    workdir.mkdir()
    log = (
        f"sqlite:///{workdir / 'decisions.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("pg_url")
    )
    key = tmp_path / "checkpoint.key"
    key.write_bytes(encrypt_private_key(generate_private_key(), PASSWORD.encode()))
    monkeypatch.setenv("TRTGUARD_PASSWORD", PASSWORD)
    server = WebhookProcess(
        [
            "--policies",
            str(folder),
            "--attestations",
            str(material.attestations),
            "--self-signed",
            "tls",
            "--san",
            SERVICE,
            "--decision-log",
            log,
        ],
        workdir,
    )
    try:
        yield World(material, policies, log, key, tmp_path / "archive", server)
    finally:
        server.stop()


def denial(answer: dict[str, Any]) -> str:
    assert not answer["allowed"], answer
    message: str = answer["status"]["message"]
    return message

"""trtguard/cli/schema.py: ``trtguard schema manifest|policy|decision``, valid and unchanged (snapshots)."""

from __future__ import annotations

import json

import jsonschema  # type: ignore[import-untyped]
import pytest

from decisionlog import DecisionRecord
from tests.support.snapshots import assert_snapshot, cli_output
from trtguard.cli import main

#: Outputs the stages of issue 26 must not change: a command line and its snapshot in tests/data, one a line.
SNAPSHOTS = [
    (["schema", "manifest"], "900-schema-manifest.json"),
    (["schema", "policy"], "901-schema-policy.json"),
    (["schema", "decision"], "902-schema-decision.json"),
]


def _schema(which: str, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(["schema", which]) == 0
    schema: dict[str, object] = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


@pytest.mark.parametrize("which", ["manifest", "policy"])
def test_document_schemas_are_printed(which: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _schema(which, capsys)["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_the_decision_record_schema_takes_records_and_refuses_others(
    capsys: pytest.CaptureFixture[str],
) -> None:
    validator = jsonschema.Draft202012Validator(_schema("decision", capsys))
    record = DecisionRecord(
        uid="u",
        operation="CREATE",
        kind="Pod",
        api_version="v1",
        allowed=True,
        reason="Allowed",
        groups=("system:authenticated",),
        images=(
            {
                "reference": "nvcr.io/nvidia/tensorrt:25.01-py3",
                "digest": "sha256:" + "a1" * 32,
                "path": "spec.containers[0].image",
                "container": "server",
                "signatures": [
                    {
                        "format": "cosign-classic",
                        "digest": "sha256:" + "b2" * 32,
                        "signers": [{"key": "platform/image-signer", "key_id": "c3" * 32}],
                        "tlog_index": 12345,
                    },
                    {"omitted": 3},
                ],
                "attestations": [],
            },
        ),
    ).to_json()
    validator.validate(record)
    for broken in (
        {**record, "extra": 1},
        {**record, "format": 1},
        {**record, "groups": "admins"},
        {**record, "images": [{**record["images"][0], "digest": "latest"}]},
    ):
        with pytest.raises(jsonschema.ValidationError):
            validator.validate(broken)


@pytest.mark.parametrize(("argv", "snapshot"), SNAPSHOTS, ids=[name for _, name in SNAPSHOTS])
def test_the_output_is_unchanged(argv: list[str], snapshot: str) -> None:
    assert_snapshot(cli_output(argv), snapshot)

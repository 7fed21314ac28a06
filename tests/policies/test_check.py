"""``trtguard check`` end to end through the command line: inputs, exit codes and every output format."""

from __future__ import annotations

import io
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies import report as check_report
from policies import results
from tests.conftest import DATA
from tests.policies.conftest import RUNTIME, Material, pod
from tests.support.policy_reports import validate_report
from trtguard.cli import main

POLICY = """\
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: images}
spec:
  match: {namespaces: ["prod"]}
  onError: Warn
  images:
    - name: runtime
      match: ["nvcr.io/nvidia/tensorrt:*"]
      requireDigest: true
    - name: signed
      match: ["nvcr.io/nvidia/tensorrt:*"]
      signatures: {keys: [platform/image-signer]}
"""


@pytest.fixture
def setup(material: Material) -> tuple[list[str], Material]:
    material.sign_image(RUNTIME)
    args = [
        "--policies",
        str(material.policy(POLICY)),
        "--policies",
        str(material.keys_file("image-signer")),
        "--attestations",
        str(material.attestations),
    ]
    return args, material


def write(path: Path, *objects: dict[str, object]) -> Path:
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    return path


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_allowed_input_exits_zero(
    setup: tuple[list[str], Material], capsys: pytest.CaptureFixture[str]
) -> None:
    args, material = setup
    status, out, _ = run(["check", *args, str(write(material.root / "ok.yaml", pod()))], capsys)
    assert status == 0
    assert out.startswith("ALLOW  Pod prod/p (")
    assert "1 resource: 1 allowed, 0 denied" in out


def test_denied_input_exits_one_and_says_why(
    setup: tuple[list[str], Material], capsys: pytest.CaptureFixture[str]
) -> None:
    args, material = setup
    bad = pod(images=("nvcr.io/nvidia/tensorrt:24.05-py3",))
    status, out, _ = run(["check", *args, str(write(material.root / "bad.yaml", bad))], capsys)
    assert status == 1
    assert "DENY   Pod prod/p" in out
    assert "x images/images.runtime.requireDigest  nvcr.io/nvidia/tensorrt:24.05-py3" in out
    # The signature rule cannot be checked offline: onError Warn makes it a warning, shown as such.
    assert "! images/images.signed.signatures" in out
    assert "could not be checked" in out


def test_unverifiable_flag_overrides_on_error(
    setup: tuple[list[str], Material], capsys: pytest.CaptureFixture[str]
) -> None:
    args, material = setup
    tagged = write(material.root / "t.yaml", pod(images=("nvcr.io/nvidia/tensorrt:24.05-py3",)))
    policy_warn = POLICY.replace("      requireDigest: true\n", "")
    args[1] = str(material.policy(policy_warn, "warn.yaml"))
    assert run(["check", *args, str(tagged)], capsys)[0] == 0
    assert run(["check", *args, "--unverifiable", "deny", str(tagged)], capsys)[0] == 1


def test_stdin_directories_lists_and_skips(
    setup: tuple[list[str], Material], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    args, material = setup
    folder = material.root / "manifests"
    (folder / "nested").mkdir(parents=True)
    write(folder / "a.yaml", pod("a"))
    write(folder / "nested" / "b.yml", {"apiVersion": "v1", "kind": "List", "items": [pod("b"), pod("c")]})
    write(folder / "svc.json", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}})
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(yaml.safe_dump(pod("d")).encode())))
    status, out, _ = run(["check", *args, "--format", "json", str(folder), "-"], capsys)
    assert status == 0
    results = json.loads(out)
    assert [(r["kind"], r["name"]) for r in results] == [
        ("Pod", "a"),
        ("Pod", "b"),
        ("Pod", "c"),
        ("Service", "s"),
        ("Pod", "d"),
    ]
    assert results[3]["skipped"]
    assert results[4]["source"] == "<stdin>:1"
    for result in results:
        assert {"kind", "namespace", "name", "allowed", "violations", "warnings"} <= result.keys()


def test_json_violation_fields(setup: tuple[list[str], Material], capsys: pytest.CaptureFixture[str]) -> None:
    args, material = setup
    bad = write(material.root / "bad.yaml", pod(images=("docker.io/library/nginx:1",)))
    status, out, _ = run(["check", *args, "--format", "json", str(bad)], capsys)
    assert status == 1
    [result] = json.loads(out)
    assert result["allowed"] is False
    [violation] = result["violations"]
    assert violation["policy"] == "images"
    assert violation["rule"] == "images"
    assert violation["image"] == "docker.io/library/nginx:1"
    assert violation["path"] == "spec.containers[0].image"
    assert violation["fix"]


def test_a_resource_lists_at_most_max_listed_violations_and_counts_the_rest(
    setup: tuple[list[str], Material], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Re-attack F1: 99,800 violations of one Pod made `check` write 34 MB; past the cap they are counted.
    monkeypatch.setattr(results, "MAX_LISTED", 2)
    monkeypatch.setattr(check_report, "MAX_LISTED", 2)
    args, material = setup
    bad = write(material.root / "bad.yaml", pod(images=("docker.io/library/nginx:1",) * 3))
    status, out, _ = run(["check", *args, "--format", "json", str(bad)], capsys)
    assert status == 1
    [result] = json.loads(out)
    assert [v["path"] for v in result["violations"]] == [f"spec.containers[{i}].image" for i in range(2)]
    assert result["violations_not_listed"] == 1
    _, table, _ = run(["check", *args, str(bad)], capsys)
    assert table.count("  x images/images") == 2
    assert "… and 1 more violations, not listed" in table


def test_junit_and_sarif_list_at_most_max_listed_violations_and_count_the_rest(
    setup: tuple[list[str], Material], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Attack 24 (c): JUnit and SARIF listed every violation while the table and JSON stopped at the cap.
    monkeypatch.setattr(results, "MAX_LISTED", 2)
    monkeypatch.setattr(check_report, "MAX_LISTED", 2)
    args, material = setup
    bad = write(material.root / "bad.yaml", pod(images=("docker.io/library/nginx:1",) * 5))
    status, out, _ = run(["check", *args, "--format", "junit", str(bad)], capsys)
    assert status == 1
    [failure] = ET.fromstring(out).iter("failure")
    lines = (failure.text or "").splitlines()
    assert len(lines) == 3 and lines[-1] == "… and 3 more violations, not listed"
    status, out, _ = run(["check", *args, "--format", "sarif", str(bad)], capsys)
    assert status == 1
    found = json.loads(out)["runs"][0]["results"]
    assert [r["ruleId"] for r in found] == ["images/images"] * 2 + ["trtguard/not-listed"]
    assert found[-1]["level"] == "error" and "3 more violations, not listed" in found[-1]["message"]["text"]


def test_malformed_input_exits_two_after_checking_the_rest(
    setup: tuple[list[str], Material], capsys: pytest.CaptureFixture[str]
) -> None:
    args, material = setup
    good = write(material.root / "good.yaml", pod())
    broken = material.root / "broken.yaml"
    broken.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: [unclosed\n")
    kindless = material.root / "kindless.yaml"
    kindless.write_text("metadata: {name: x}\n")
    binary = material.root / "binary.yaml"
    binary.write_bytes(b"kind: Pod\nname: \xff\xfe\n")
    status, out, _ = run(["check", *args, str(good), str(broken), str(kindless), str(binary)], capsys)
    assert status == 2
    assert "ALLOW  Pod prod/p" in out
    assert f"ERROR  {broken}:4:1: malformed YAML" in out
    assert f"{kindless}:1: not a Kubernetes object" in out
    assert "byte 0xff at offset 16" in out
    assert "3 input errors" in out


def test_the_table_shows_one_line_per_line_whatever_the_names_hold(
    setup: tuple[list[str], Material], capsys: pytest.CaptureFixture[str]
) -> None:
    # A name that carries a newline and a right-to-left override would forge an ALLOW line and reverse the
    # text after it; an image with a line separator and a tag character, a file name with an escape.
    args, material = setup
    forged = pod(
        "evil\nALLOW  Pod prod/fake (ok.yaml:1)\u202e", images=("nvcr.io/nvidia/tensorrt:1\u2028\U000e0041",)
    )
    path = write(material.root / "evil\x1b[2K.yaml", forged)
    status, out, _ = run(["check", *args, str(path)], capsys)
    assert status == 1
    assert out.count("\n") == len(out.splitlines()) and not any(
        c in out for c in "\u202e\u2028\x1b\U000e0041"
    )
    [verdict] = [line for line in out.splitlines() if line.startswith(("ALLOW", "DENY"))]
    assert verdict.startswith("DENY   Pod prod/evil<U+000A>ALLOW  Pod prod/fake (ok.yaml:1)<U+202E> (")
    assert "evil<U+001B>[2K.yaml:1)" in verdict
    assert "nvcr.io/nvidia/tensorrt:1<U+2028><U+E0041>" in out


def test_huge_and_deep_documents_are_refused(
    setup: tuple[list[str], Material], capsys: pytest.CaptureFixture[str]
) -> None:
    args, material = setup
    deep = material.root / "deep.yaml"
    deep.write_text("a: " + "[" * 5000 + "]" * 5000 + "\n")
    wide = material.root / "wide.yaml"
    wide.write_text("apiVersion: v1\nkind: Pod\nitems: [" + ", ".join("1" for _ in range(250_000)) + "]\n")
    status, out, _ = run(["check", *args, str(deep), str(wide)], capsys)
    assert status == 2
    assert "nesting depth" in out
    assert "more than 200000 values" in out


def test_bad_policy_exits_two_without_traceback(
    material: Material, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = material.policy(POLICY.replace("requireDigest: true", "requireDigest: [true]"))
    status, out, err = run(
        ["check", "--policies", str(broken), str(write(material.root / "x.yaml", pod()))], capsys
    )
    assert status == 2
    assert out == ""
    assert "Traceback" not in err
    assert f"{broken}:10: spec.images[0].requireDigest" in err


def test_junit_and_sarif(setup: tuple[list[str], Material], capsys: pytest.CaptureFixture[str]) -> None:
    args, material = setup
    inputs = write(material.root / "in.yaml", pod("good"), pod("bad", images=("docker.io/library/nginx:1",)))
    status, out, _ = run(["check", *args, "--format", "junit", str(inputs)], capsys)
    assert status == 1
    suite = ET.fromstring(out).find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    failure = suite.find("testcase[2]/failure")
    assert failure is not None and "images/images" in (failure.get("message") or "")

    status, out, _ = run(["check", *args, "--format", "sarif", str(inputs)], capsys)
    sarif = json.loads(out)
    [result] = sarif["runs"][0]["results"]
    assert result["ruleId"] == "images/images"
    assert result["level"] == "error"
    region = result["locations"][0]["physicalLocation"]["region"]
    text = inputs.read_text().splitlines()
    assert "docker.io/library/nginx:1" in text[region["startLine"] - 1]


def test_output_file(setup: tuple[list[str], Material], capsys: pytest.CaptureFixture[str]) -> None:
    args, material = setup
    target = material.root / "report.json"
    status, out, _ = run(
        ["check", *args, "--format", "json", "-o", str(target), str(write(material.root / "in.yaml", pod()))],
        capsys,
    )
    assert status == 0
    assert out == ""
    assert json.loads(target.read_text())[0]["allowed"] is True


def test_policy_reports_say_what_the_table_says(
    setup: tuple[list[str], Material], capsys: pytest.CaptureFixture[str]
) -> None:
    args, material = setup
    inputs = write(
        material.root / "mixed.yaml",
        pod("good"),
        pod("bad", images=("nvcr.io/nvidia/tensorrt:24.05-py3", "nvcr.io/nvidia/tensorrt:24.06-py3")),
        pod("elsewhere", "staging"),
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "prod"}},
    )
    broken = material.root / "broken.yaml"
    broken.write_text("a: [\n")
    now = "2026-11-02T03:04:05Z"
    status, out, _ = run(
        ["check", *args, "--format", "policy-report", "--now", now, str(inputs), str(broken)], capsys
    )
    assert status == 2
    reports = list(yaml.safe_load_all(out))
    for report in reports:
        validate_report(report)
    prod, staging, cluster = reports
    assert (prod["kind"], prod["metadata"]["name"]) == ("PolicyReport", "trtguard")
    assert prod["metadata"]["namespace"] == "prod"
    [unselected] = staging["results"]
    assert unselected["result"] == "skip" and unselected["message"] == "no policy selects Pod elsewhere"
    assert cluster["kind"] == "ClusterPolicyReport"
    assert [r["rule"] for r in cluster["results"]] == ["input"]
    by_name: dict[str, list[dict[str, Any]]] = {}
    for result in prod["results"]:
        [resource] = result["resources"]
        by_name.setdefault(resource["name"], []).append(result)
        assert result["timestamp"] == {"seconds": 1793588645, "nanos": 0}
    assert [(r["policy"], r["rule"], r["result"]) for r in by_name["good"]] == [("images", "all", "pass")]
    bad = {(r["policy"], r["rule"]): r for r in by_name["bad"]}
    # one result per rule and resource, two images in it; the messages are check's own lines
    digest = bad[("images", "images.runtime.requireDigest")]
    assert digest["result"] == "fail" and digest["message"].startswith(
        "(1) images/images.runtime.requireDigest: "
    )
    assert "24.05-py3" in digest["message"] and "24.06-py3" in digest["message"]
    assert digest["properties"]["paths"] == "spec.containers[0].image, spec.containers[1].image"
    signed = bad[("images", "images.signed.signatures")]
    assert signed["result"] == "error" and signed["properties"]["action"] == "Warn"
    [skipped] = by_name["s"]
    assert skipped["result"] == "skip" and skipped["policy"] == "trtguard"
    assert prod["summary"] == {"pass": 1, "skip": 1, "warn": 0, "fail": 1, "error": 1}


def test_cannot_tell_is_never_relaxed_by_unverifiable_warn(
    setup: tuple[list[str], Material], capsys: pytest.CaptureFixture[str]
) -> None:
    # attack 27 cases F and K through `trtguard check`: a condition reading a field the scan leaves out
    # (a database version that is no time), and a newest scan over the 16 MiB evidence limit beside an older
    # one, each "cannot tell", which `--unverifiable warn` (for evidence that could not be fetched) must not
    # turn into an allow
    args, material = setup
    scans = POLICY.replace(
        "      signatures: {keys: [platform/image-signer]}\n",
        "      signatures: {keys: [platform/image-signer]}\n"
        "      attestations:\n"
        "        - predicateType: https://cosign.sigstore.dev/attestation/vuln/v1\n"
        "          keys: [platform/image-signer]\n"
        "          conditions:\n"
        "            - name: fresh-db\n"
        "              cel: \"timestamp(scan.database_at) > timestamp(now) - duration('168h')\"\n"
        "              message: the vulnerability database must be at most 7 days old\n",
    )
    args[1] = str(material.policy(scans, "scans.yaml"))
    result = json.loads((DATA / "606-pip-audit-clean.cdx.json").read_text())
    predicate = {
        "scanner": {
            "uri": "pkg:github/aquasecurity/trivy",
            "db": {"version": "v1-2021080612"},
            "result": result,
        },
        "metadata": {"scanFinishedOn": "2026-11-01T00:00:00Z"},
    }
    digest = RUNTIME.split("@sha256:")[1]
    vuln = "https://cosign.sigstore.dev/attestation/vuln/v1"
    material.statement(digest, vuln, predicate, "image-signer", "scan.json")
    pinned = write(material.root / "p.yaml", pod(images=(RUNTIME,)))
    status, out, _ = run(["check", *args, "--unverifiable", "warn", "--format", "json", str(pinned)], capsys)
    assert status == 1, out
    assert "is no RFC 3339 date" in out
    fresh = {**predicate, "scanner": {**predicate["scanner"], "db": {"version": "2026-11-01T00:00:00Z"}}}
    material.statement(digest, vuln, fresh, "image-signer", "scan.json")
    now = ["--now", "2026-11-02T00:00:00Z"]
    assert run(["check", *args, "--unverifiable", "warn", *now, str(pinned)], capsys)[0] == 0
    big = {
        **fresh,
        "metadata": {"scanFinishedOn": "2026-11-01T12:00:00Z"},
        "padding": "x" * (16 * 1024 * 1024),
    }
    material.statement(digest, vuln, big, "image-signer", "big.json")
    status, out, _ = run(
        ["check", *args, "--unverifiable", "warn", *now, "--format", "json", str(pinned)], capsys
    )
    assert status == 1 and "larger than 16 MiB" in out

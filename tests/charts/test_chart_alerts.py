"""The chart's alerting rules, checked without promtool: structure and metric names.

Every rendered rule's expression is parsed by a PromQL parser (promql-parser, a port of Prometheus's own,
which also checks function argument types) and must be an instant vector, as an alert needs. Every series it
selects must be one that a running ``trtguard serve`` exports: the server is started with the command line
the chart renders (its certificate, policies and decision log laid out locally), its ``/metrics`` is read,
and each selector's metric name and label matchers must match an exported series; rate() and increase() take
counters, deriv() gauges. Annotations may use only the labels the expression keeps.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import httpx
import promql_parser
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.charts.helm_chart import (
    CHART,
    FULLNAME,
    NAMESPACE,
    Doc,
    of_kind,
    one,
    policy_folder,
    render,
    scenario,
    webhook_container,
)
from tests.support.harness import WebhookProcess

pytestmark = pytest.mark.helm

MONITORING = CHART / "ci" / "monitoring-values.yaml"
HELM_CERTS = CHART / "ci" / "helm-certs-values.yaml"
SQLITE_PVC = CHART / "ci" / "sqlite-pvc-values.yaml"
#: Labels Prometheus adds to every scraped series (target and ServiceMonitor), not the server.
TARGET_LABELS = frozenset({"job", "namespace", "pod", "instance", "service", "endpoint", "container"})
#: What the issue asks alerts for, by alert name (the spool alert exists with PostgreSQL only).
REQUIRED = {
    "TrtguardWebhookUnavailable",
    "TrtguardReplicaNotReady",
    "TrtguardErrorDenials",
    "TrtguardPolicyReloadFailing",
    "TrtguardDecisionLogNearCapacity",
    "TrtguardDecisionLogNotRotated",
    "TrtguardDecisionLogAnswersNotDelivered",
    "TrtguardCertificateExpiresSoon",
}
GIB = 1024**3


@dataclass(frozen=True)
class Exported:
    """The series of a running server's /metrics: (name, labels) of each sample, and each name's type."""

    series: frozenset[tuple[str, frozenset[tuple[str, str]]]]
    types: dict[str, str]


def rules(docs: list[Doc]) -> list[dict[str, Any]]:
    """The alerting rules of the (single) PrometheusRule."""
    rule = one(docs, "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    found: list[dict[str, Any]] = [r for group in rule["spec"]["groups"] for r in group["rules"]]
    return found


def nodes(expr: promql_parser.Expr) -> Iterator[promql_parser.Expr]:
    """Every node of an expression, depth first."""
    seen: list[promql_parser.Expr] = []
    promql_parser.walk(expr, pre_visit=seen.append)
    yield from seen


def value_type(expr: promql_parser.Expr) -> str:
    """vector, scalar, matrix or string: what an expression evaluates to."""
    if isinstance(expr, (promql_parser.VectorSelector, promql_parser.AggregateExpr)):
        return "vector"
    if isinstance(expr, (promql_parser.MatrixSelector, promql_parser.SubqueryExpr)):
        return "matrix"
    if isinstance(expr, promql_parser.NumberLiteral):
        return "scalar"
    if isinstance(expr, promql_parser.StringLiteral):
        return "string"
    if isinstance(expr, promql_parser.Call):
        return str(expr.func.return_type).rsplit(".", 1)[-1].lower()
    if isinstance(expr, (promql_parser.ParenExpr, promql_parser.UnaryExpr)):
        return value_type(expr.expr)
    assert isinstance(expr, promql_parser.BinaryExpr), type(expr)
    sides = {value_type(expr.lhs), value_type(expr.rhs)}
    return "vector" if "vector" in sides else "scalar"


def selectors(
    expr: promql_parser.Expr, function: str | None = None
) -> Iterator[tuple[promql_parser.VectorSelector, str | None]]:
    """Each vector selector with the function whose argument it is (rate, deriv, …), if any."""
    if isinstance(expr, promql_parser.VectorSelector):
        yield expr, function
    elif isinstance(expr, promql_parser.MatrixSelector):
        yield expr.vector_selector, function
    elif isinstance(expr, promql_parser.Call):
        for arg in expr.args:
            yield from selectors(arg, expr.func.name)
    elif isinstance(expr, promql_parser.BinaryExpr):
        yield from selectors(expr.lhs)
        yield from selectors(expr.rhs)
    elif isinstance(expr, promql_parser.SubqueryExpr):
        yield from selectors(expr.expr, function)
    elif isinstance(expr, (promql_parser.AggregateExpr, promql_parser.ParenExpr, promql_parser.UnaryExpr)):
        yield from selectors(expr.expr)


def matches(matcher: promql_parser.Matcher, value: str) -> bool:
    op = str(matcher.op).rsplit(".", 1)[-1]
    if op == "Equal":
        return value == matcher.value
    if op == "NotEqual":
        return value != matcher.value
    hit = re.fullmatch(matcher.value, value) is not None
    return hit if op == "Re" else not hit


def kept_labels(expr: promql_parser.Expr) -> set[str] | None:
    """The labels the outermost aggregation keeps (by …); None when nothing aggregates."""
    for node in nodes(expr):
        if isinstance(node, promql_parser.AggregateExpr):
            modifier = node.modifier
            return set(modifier.labels) if modifier is not None else set()
    return None


def check_rule(rule: dict[str, Any], exported: Exported, selector: dict[str, str]) -> None:
    """Everything one alerting rule must satisfy; raises AssertionError naming the rule."""
    name = rule["alert"]
    expr = promql_parser.parse(rule["expr"])  # raises ValueError on a syntax or type error
    assert value_type(expr) == "vector", f"{name}: an alert expression must be an instant vector"
    promql_parser.parse_duration(rule["for"])
    assert rule["labels"]["severity"] in {"warning", "critical"}, name
    assert rule["annotations"]["summary"].strip() and rule["annotations"]["description"].strip(), name
    found = list(selectors(expr))
    assert found, f"{name} reads no metric"
    for vector, function in found:
        assert vector.name is not None, f"{name}: {vector} has no metric name"
        metric = vector.name
        assert metric in exported.types, f"{name}: {metric} is not exported by trtguard serve"
        given = {m.name: m.value for m in vector.matchers.matchers if str(m.op).endswith(".Equal")}
        assert {k: given.get(k) for k in selector} == selector, f"{name}: {vector} is not this release's"
        own = [m for m in vector.matchers.matchers if m.name not in TARGET_LABELS]
        hits = [
            labels
            for series, labels in exported.series
            if series == metric and all(matches(m, dict(labels).get(m.name, "")) for m in own)
        ]
        assert hits, f"{name}: {vector} selects no series that trtguard serve exports"
        if function in {"rate", "irate", "increase"}:
            assert exported.types[metric] == "counter", f"{name}: {function}() of a {exported.types[metric]}"
        if function in {"deriv", "delta", "predict_linear"}:
            assert exported.types[metric] == "gauge", f"{name}: {function}() of a {exported.types[metric]}"
    used = set(re.findall(r"\$labels\.(\w+)", " ".join(rule["annotations"].values())))
    kept = kept_labels(expr)
    if kept is not None:
        assert used <= kept, f"{name}: annotations use {used - kept}, which the expression drops"


def served(docs: list[Doc], workdir: Path) -> list[str]:
    """The chart's `trtguard serve` arguments, with each mounted file laid out under ``workdir``."""
    container = webhook_container(docs)
    args = list(container["args"][1:])
    tls = next(s for s in of_kind(docs, "Secret") if s["metadata"]["name"] == f"{FULLNAME}-tls")
    local = {
        "--host": "127.0.0.1",
        "--port": "0",
        "--metrics-port": "0",
        "--policies": str(policy_folder(docs, workdir)),
        "--decision-log": f"sqlite:///{workdir / 'decisions.db'}",
    }
    for flag in ("--tls-cert", "--tls-key"):
        path = workdir / PurePosixPath(args[args.index(flag) + 1]).name
        path.write_bytes(base64.b64decode(tls["data"][path.name]))
        local[flag] = str(path)
    for flag, value in local.items():
        args[args.index(flag) + 1] = value
    return args


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Exported]:
    """The series of a `trtguard serve` started as the chart starts it (metrics port, SQLite log, TLS)."""
    workdir = tmp_path_factory.mktemp("serve")
    docs = render(MONITORING, HELM_CERTS)
    process = WebhookProcess(served(docs, workdir), workdir).start()
    try:
        text = httpx.get(f"http://127.0.0.1:{process.probe_port}/metrics", timeout=10).text
    finally:
        process.stop()
    series: set[tuple[str, frozenset[tuple[str, str]]]] = set()
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            series.add((sample.name, frozenset(sample.labels.items())))
            types[sample.name] = family.type
    yield Exported(frozenset(series), types)


RELEASE_SELECTOR = {"job": FULLNAME, "namespace": NAMESPACE}
RULE_SETS = {
    "sqlite-emptydir": lambda: render(MONITORING, HELM_CERTS),
    "sqlite-pvc": lambda: render(MONITORING, SQLITE_PVC),
    "postgresql-and-jobs": lambda: scenario("everything"),
}


@pytest.mark.parametrize("rule_set", sorted(RULE_SETS))
def test_every_alert_parses_and_reads_only_what_the_server_exports(rule_set: str, exported: Exported) -> None:
    found = rules(RULE_SETS[rule_set]())
    names = {rule["alert"] for rule in found}
    spool = {"TrtguardDecisionLogSpoolGrowing"} if rule_set.startswith("postgresql") else set()
    assert names == REQUIRED | spool
    for rule in found:
        check_rule(rule, exported, RELEASE_SELECTOR)
        assert rule["labels"]["team"] == "platform"  # metrics.prometheusRule.alertLabels


def test_the_check_catches_what_it_is_meant_to(exported: Exported) -> None:
    """A misspelt metric, an unknown label value, rate() of a gauge and a syntax error are all refused."""
    good = rules(scenario("monitoring"))[0]
    sel = 'job="rel-trtguard",namespace="trtguard"'
    for expr, message in (
        (f"trtguard_readyy{{{sel}}} == 0", "is not exported"),
        (
            f'rate(trtguard_admission_error_denials_total{{{sel},reason="teatime"}}[5m]) > 0',
            "selects no series",
        ),
        (f"rate(trtguard_decision_log_size_bytes{{{sel}}}[5m]) > 0", "rate() of a gauge"),
        ("trtguard_ready == 0", "is not this release's"),
        (f"sum(trtguard_ready{{{sel}}}", "unclosed left parenthesis"),
        ("time() - 3 > bool 2", "must be an instant vector"),
    ):
        with pytest.raises((AssertionError, ValueError), match=re.escape(message)):
            check_rule({**good, "expr": expr}, exported, RELEASE_SELECTOR)
    dropped = {**good, "expr": f"max(trtguard_ready{{{sel}}}) == 0", "annotations": {
        "summary": "{{ $labels.pod }} is down", "description": "x"}}  # fmt: skip
    with pytest.raises(AssertionError, match="which the expression drops"):
        check_rule(dropped, exported, RELEASE_SELECTOR)


def _by_name(docs: list[Doc]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for rule in rules(docs):
        found.setdefault(rule["alert"], []).append(rule)
    return found


@pytest.mark.parametrize(
    ("docs", "capacity_bytes", "per_pod"),
    [
        (lambda: render(MONITORING), 4 * GIB, True),  # decisionLog.sqlite.sizeLimit
        (lambda: render(MONITORING, SQLITE_PVC), 5 * GIB, True),  # the claim's size
        (lambda: scenario("everything"), 50 * GIB, False),  # given; one log shared by the replicas
        (
            lambda: render(
                MONITORING, set_json={"metrics.prometheusRule.decisionLog": {"capacity": "1500M"}}
            ),
            1_500_000_000,
            True,
        ),
    ],
)
def test_decision_log_capacity_alert_fires_at_the_threshold_of_the_right_capacity(
    docs: Any, capacity_bytes: int, per_pod: bool
) -> None:
    [rule] = _by_name(docs())["TrtguardDecisionLogNearCapacity"]
    expr = promql_parser.parse(rule["expr"])
    assert isinstance(expr, promql_parser.BinaryExpr) and isinstance(expr.rhs, promql_parser.NumberLiteral)
    assert expr.rhs.val == round(capacity_bytes * 0.8)
    assert kept_labels(expr) == ({"namespace", "pod"} if per_pod else {"namespace"})


def test_thresholds_and_durations_come_from_values() -> None:
    docs = render(
        MONITORING,
        set_json={
            "metrics.prometheusRule.errorDenials": {"perSecond": 0.5, "for": "1m"},
            "metrics.prometheusRule.certificate.days": 30,
            "metrics.prometheusRule.unavailable.for": "30s",
            "metrics.prometheusRule.selector": 'cluster="eu-1",job="trtguard"',
            "metrics.prometheusRule.undelivered.window": "30m",
        },
    )
    found = _by_name(docs)
    [undelivered] = found["TrtguardDecisionLogAnswersNotDelivered"]
    assert "[30m]" in undelivered["expr"]
    [errors] = found["TrtguardErrorDenials"]
    assert errors["for"] == "1m" and errors["expr"].rstrip().endswith("> 0.5")
    assert found["TrtguardWebhookUnavailable"][0]["for"] == "30s"
    warning, critical = found["TrtguardCertificateExpiresSoon"]
    assert (warning["labels"]["severity"], critical["labels"]["severity"]) == ("warning", "critical")
    assert warning["expr"].rstrip().endswith(f"< {30 * 86400}")
    assert critical["expr"].rstrip().endswith(f"< {10 * 86400}")
    for rule in rules(docs):
        for vector, _ in selectors(promql_parser.parse(rule["expr"])):
            given = {m.name: m.value for m in vector.matchers.matchers}
            assert given["cluster"] == "eu-1" and given["job"] == "trtguard" and "namespace" not in given


def test_no_rules_unless_asked() -> None:
    assert not of_kind(scenario("defaults"), "PrometheusRule")
    assert not of_kind(
        render(MONITORING, set_json={"metrics.prometheusRule.enabled": False}), "PrometheusRule"
    )

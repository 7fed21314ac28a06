"""webhook/_metrics.py: a private registry with the webhook's metric names."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from webhook._metrics import ERROR_DENIAL_REASONS, FAILURE_REASONS, Metrics


def _samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    body, content_type = metrics.render()
    assert content_type.startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def test_each_instance_has_its_own_registry() -> None:
    first, second = Metrics(), Metrics()
    first.reviews.labels("allow", "CREATE", "Pod", "false").inc()
    assert (
        "trtguard_admission_reviews_total",
        (("decision", "allow"), ("dry_run", "false"), ("kind", "Pod"), ("operation", "CREATE")),
    ) in _samples(first)
    assert not any(name == "trtguard_admission_reviews_total" for name, _ in _samples(second))


def test_policy_revision_info_names_only_the_set_in_force() -> None:
    metrics = Metrics()
    metrics.set_policy_revision("sha256:one")
    metrics.set_policy_revision("sha256:two")
    metrics.set_policy_revision("sha256:two")
    revisions = {labels for name, labels in _samples(metrics) if name == "trtguard_policy_revision_info"}
    assert revisions == {(("revision", "sha256:two"),)}


def test_latency_buckets_resolve_the_10_ms_goal() -> None:
    metrics = Metrics()
    metrics.review_seconds.labels("allow").observe(0.004)
    samples = _samples(metrics)
    bucket = ("trtguard_admission_review_duration_seconds_bucket", (("decision", "allow"), ("le", "0.005")))
    assert samples[bucket] == 1
    below = ("trtguard_admission_review_duration_seconds_bucket", (("decision", "allow"), ("le", "0.0025")))
    assert samples[below] == 0


def test_every_documented_metric_is_exported() -> None:
    metrics = Metrics()
    metrics.review_failures.labels("timeout").inc()
    metrics.policy_reloads.labels("failure").inc()
    metrics.decision_log_writes.labels("spooled").inc()
    metrics.tls_reloads.labels("success").inc()
    names = {name for name, _ in _samples(metrics)}
    assert {
        "trtguard_admission_review_failures_total",
        "trtguard_policy_reloads_total",
        "trtguard_policy_reload_failing",
        "trtguard_decision_log_writes_total",
        "trtguard_decision_log_spool_pending",
        "trtguard_decision_log_undelivered_total",
        "trtguard_tls_reloads_total",
        "trtguard_tls_certificate_expiry_timestamp_seconds",
    } <= names


def test_known_label_values_are_exported_at_zero_from_the_start() -> None:
    """So that rate() sees the first failure, and the chart's alert rules can be checked against /metrics."""
    samples = _samples(Metrics())
    for reason in FAILURE_REASONS:
        assert samples[("trtguard_admission_review_failures_total", (("reason", reason),))] == 0
    for reason in ERROR_DENIAL_REASONS:
        assert samples[("trtguard_admission_error_denials_total", (("reason", reason),))] == 0
    for result in ("success", "failure"):
        assert samples[("trtguard_policy_reloads_total", (("result", result),))] == 0
        assert samples[("trtguard_tls_reloads_total", (("result", result),))] == 0
    for result in ("written", "spooled", "failed"):
        assert samples[("trtguard_decision_log_writes_total", (("result", result),))] == 0
    assert samples[("trtguard_ready", ())] == 0
    assert samples[("trtguard_decision_log_size_bytes", ())] == 0


def test_the_undelivered_counter_follows_the_stores_count() -> None:
    metrics = Metrics()
    assert _samples(metrics)[("trtguard_decision_log_undelivered_total", ())] == 0
    metrics.observe_undelivered(2)
    metrics.observe_undelivered(2)  # scraped again, nothing new
    metrics.observe_undelivered(3)
    assert _samples(metrics)[("trtguard_decision_log_undelivered_total", ())] == 3

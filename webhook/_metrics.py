"""Prometheus metrics of the webhook, in a registry of its own (never the process-global one)."""

from __future__ import annotations

import asyncio

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from decisionlog import DecisionLogError, DecisionStore, RecordQuery

#: Why a review could not be judged normally (the ``reason`` of ``trtguard_admission_review_failures``).
FAILURE_REASONS = (
    "bad_request",
    "too_large",
    "timeout",
    "evaluation_error",
    "no_policies",
    "decision_log",
    "internal_error",
)
#: Why a request was denied by an error rather than by a policy (``trtguard_admission_error_denials``):
#: evidence_unavailable is a rule that could not be checked (registry or evidence unavailable) whose
#: policy's onError denied; the others are the failures of the same name.
ERROR_DENIAL_REASONS = (
    "timeout",
    "evidence_unavailable",
    "evaluation_error",
    "no_policies",
    "decision_log",
    "internal_error",
)

#: Seconds; dense below 10 ms, where the latency goal is, and up to the API server's 30 s maximum.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

#: Seconds the background read of the decision log's record count and oldest record may take.
OBSERVE_TIMEOUT_S = 2.0


class Metrics:
    """Every metric the webhook exports; pass one instance to the parts that count things."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self._observing: asyncio.Task[None] | None = None
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        self.reviews = Counter(
            "trtguard_admission_reviews",
            "AdmissionReviews answered, by decision, operation, kind and dry run.",
            ["decision", "operation", "kind", "dry_run"],
            registry=r,
        )
        self.review_seconds = Histogram(
            "trtguard_admission_review_duration_seconds",
            "Time from receiving an AdmissionReview to having its answer recorded, by decision.",
            ["decision"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.review_failures = Counter(
            "trtguard_admission_review_failures",
            "Reviews that could not be judged normally: bad_request (an HTTP error, or a denial once the uid "
            "is known), too_large (HTTP errors); timeout, evaluation_error, no_policies, decision_log, "
            "internal_error (answered by onError or a denial).",
            ["reason"],
            registry=r,
        )
        self.error_denials = Counter(
            "trtguard_admission_error_denials",
            "Denials caused by an error rather than by a policy, by reason: timeout, evidence_unavailable (a "
            "rule could not be checked and its policy's onError denied), evaluation_error, no_policies, "
            "decision_log, internal_error.",
            ["reason"],
            registry=r,
        )
        self.policy_reloads = Counter(
            "trtguard_policy_reloads",
            "Attempts to load changed policy files, by result (success, failure).",
            ["result"],
            registry=r,
        )
        self.policy_reload_failing = Gauge(
            "trtguard_policy_reload_failing",
            "1 while the policy files on disk do not load and the previous set stays in force.",
            registry=r,
        )
        self.policy_revision = Gauge(
            "trtguard_policy_revision_info",
            "The policy set in force (value 1, revision as a label).",
            ["revision"],
            registry=r,
        )
        self.decision_log_writes = Counter(
            "trtguard_decision_log_writes",
            "Decision records by outcome: written, spooled (database down, kept locally), failed (denied).",
            ["result"],
            registry=r,
        )
        self._bound_writes = {r: self.decision_log_writes.labels(r) for r in ("written", "spooled", "failed")}
        self._bound_reviews: dict[tuple[str, str, str, bool], tuple[Counter, Histogram]] = {}
        self.decision_log_undelivered = Counter(
            "trtguard_decision_log_undelivered",
            "Undelivered records written: a record confirmed after its answer's deadline (the webhook "
            "answered deny) is followed by one (reason AnswerNotDelivered, docs/decision-log.md). Any is a "
            "decision the log confirmed too late: a slow, hung or failing store.",
            registry=r,
        )
        self.decision_log_spooled = Gauge(
            "trtguard_decision_log_spool_pending",
            "Decision records waiting in the local spool for the database.",
            registry=r,
        )
        self.tls_reloads = Counter(
            "trtguard_tls_reloads",
            "Attempts to load a changed serving certificate, by result (success, failure).",
            ["result"],
            registry=r,
        )
        self.tls_not_after = Gauge(
            "trtguard_tls_certificate_expiry_timestamp_seconds",
            "Expiry of the serving certificate in force (Unix time).",
            registry=r,
        )
        self.decision_log_size = Gauge(
            "trtguard_decision_log_size_bytes",
            "Space the decision log takes (SQLite: the database and its WAL; PostgreSQL: the decisions table "
            "with its indexes), as last measured by the store.",
            registry=r,
        )
        self.decision_log_records = Gauge(
            "trtguard_decision_log_records",
            "Records in the live decision log (after the last pruned segment), as of the last scrape.",
            registry=r,
        )
        self.decision_log_oldest = Gauge(
            "trtguard_decision_log_oldest_record_timestamp_seconds",
            "Decision time of the oldest record in the live decision log (Unix time; 0 while it is empty). "
            "It grows old when rotation (`trtguard audit rotate`) does not run.",
            registry=r,
        )
        self.ready = Gauge(
            "trtguard_ready",
            "1 while this replica can judge requests (what /readyz answers: policies loaded and the decision "
            "log takes records), else 0.",
            registry=r,
        )
        # Every known label value is exported from the start, at 0: rate() and increase() see the first
        # failure as an increase, and alert rules can be checked against the exported series.
        for reason in FAILURE_REASONS:
            self.review_failures.labels(reason)
        for reason in ERROR_DENIAL_REASONS:
            self.error_denials.labels(reason)
        for result in ("success", "failure"):
            self.policy_reloads.labels(result)
            self.tls_reloads.labels(result)
        for result in ("written", "spooled", "failed"):
            self.decision_log_writes.labels(result)
        self._revision: str | None = None
        self._undelivered_seen = 0

    def set_policy_revision(self, revision: str) -> None:
        """Point the info metric at ``revision`` (and drop the previous one)."""
        if self._revision is not None and self._revision != revision:
            self.policy_revision.remove(self._revision)
        self.policy_revision.labels(revision).set(1)
        self._revision = revision

    def observe_undelivered(self, written: int) -> None:
        """Follow the store's count of undelivered records written (it counts them as its writer appends
        them; the counter is brought up to it at each scrape, so the store needs no metrics of its own)."""
        if written > self._undelivered_seen:
            self.decision_log_undelivered.inc(written - self._undelivered_seen)
            self._undelivered_seen = written

    def count_review(self, decision: str, operation: str, kind: str, dry_run: bool, seconds: float) -> None:
        """Count one answered review and its duration.

        The children of each label set are bound once and kept (``labels()`` validates and looks the set up
        under a lock on every call, several times the cost of ``inc()``); the sets are few: two decisions,
        the operations, the kinds of the policies, two dry-run values.
        """
        key = (decision, operation, kind, dry_run)
        bound = self._bound_reviews.get(key)
        if bound is None:
            bound = self._bound_reviews[key] = (
                self.reviews.labels(decision, operation, kind, "true" if dry_run else "false"),
                self.review_seconds.labels(decision),
            )
        bound[0].inc()
        bound[1].observe(seconds)

    def count_write(self, result: str) -> None:
        """Count one decision record by outcome (``written``, ``spooled``, ``failed``), bound once."""
        self._bound_writes[result].inc()

    def refresh_decision_log(self, store: DecisionStore) -> None:
        """Start :meth:`observe_decision_log` beside the caller, unless the last one still runs.

        ``/metrics`` calls this and answers with the values read so far: a scrape never waits on the log (a
        query cancelled on a hung PostgreSQL still waits for the server, 2-5 s), and a hung read is not
        started again on every scrape.
        """
        if self._observing is None or self._observing.done():
            self._observing = asyncio.get_running_loop().create_task(
                self.observe_decision_log(store), name="trtguard-observe-decision-log"
            )

    async def observe_decision_log(self, store: DecisionStore) -> None:
        """Count the live log's records and date its oldest one: two indexed reads, bounded by
        :data:`OBSERVE_TIMEOUT_S` so that a scrape never hangs on the log.

        A log that cannot answer keeps the last values: its size and readiness say what is wrong.
        """
        try:
            async with asyncio.timeout(OBSERVE_TIMEOUT_S):
                oldest = await store.query(RecordQuery(limit=1))
                newest = await store.query(RecordQuery(limit=1, newest_first=True))
        except (TimeoutError, DecisionLogError):
            return
        if not oldest or not newest:
            self.decision_log_records.set(0)
            self.decision_log_oldest.set(0)
            return
        self.decision_log_records.set(newest[0].seq - oldest[0].seq + 1)
        self.decision_log_oldest.set(oldest[0].record.time.timestamp())

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

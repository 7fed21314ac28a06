"""verifier/base/_cache.py: TTLs, negative caching of definitive failures only, single-flight, and answers
kept only while they hold on the evaluation clock."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from verifier.base._cache import ResultCache, SingleFlight, is_definitive
from verifier.base._errors import EvidenceUnavailable, InputError, VerificationError


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Counter:
    def __init__(self, result: Any = "ok", error: BaseException | None = None, wait: float = 0) -> None:
        self.calls = 0
        self.result = result
        self.error = error
        self.wait = wait

    async def __call__(self) -> Any:
        self.calls += 1
        if self.wait:
            await asyncio.sleep(self.wait)
        if self.error is not None:
            raise self.error
        return self.result


async def test_value_is_kept_for_ttl_then_recomputed() -> None:
    clock = Clock()
    cache: ResultCache[str, object] = ResultCache(ttl=60, negative_ttl=5, clock=clock)
    compute = Counter("verified")
    assert await cache.get_or_compute("k", compute) == "verified"
    clock.now += 59
    assert await cache.get_or_compute("k", compute) == "verified"
    assert compute.calls == 1
    clock.now += 2
    assert await cache.get_or_compute("k", compute) == "verified"
    assert compute.calls == 2
    assert cache.stats.hits == 1 and cache.stats.misses == 2


async def test_keys_are_separate() -> None:
    cache: ResultCache[tuple[str, str], object] = ResultCache(ttl=60, negative_ttl=5)
    first, second = Counter("a"), Counter("b")
    assert await cache.get_or_compute(("sha256:1", "rev1"), first) == "a"
    assert await cache.get_or_compute(("sha256:1", "rev2"), second) == "b"
    assert first.calls == second.calls == 1


@pytest.mark.parametrize(
    "error",
    [
        VerificationError("no signature by a trusted key"),
        EvidenceUnavailable("no such manifest", transient=False),
    ],
)
async def test_definitive_failure_is_kept_for_negative_ttl_only(error: Exception) -> None:
    clock = Clock()
    cache: ResultCache[str, object] = ResultCache(ttl=60, negative_ttl=5, clock=clock)
    compute = Counter(error=error)
    for _ in range(3):
        with pytest.raises(type(error)) as raised:
            await cache.get_or_compute("k", compute)
        assert str(raised.value) == str(error)
    assert compute.calls == 1
    assert cache.stats.negative_hits == 2
    clock.now += 5
    with pytest.raises(type(error)):
        await cache.get_or_compute("k", compute)
    assert compute.calls == 2


@pytest.mark.parametrize(
    "error",
    [
        EvidenceUnavailable("registry answered 503", transient=True),
        RuntimeError("a bug"),
        InputError("bad policy"),
    ],
)
async def test_transient_and_unexpected_failures_are_never_cached(error: Exception) -> None:
    cache: ResultCache[str, object] = ResultCache(ttl=60, negative_ttl=5)
    compute = Counter(error=error)
    for _ in range(3):
        with pytest.raises(type(error)):
            await cache.get_or_compute("k", compute)
    assert compute.calls == 3
    assert cache.stats.entries == 0


async def test_negative_ttl_zero_disables_negative_caching() -> None:
    cache: ResultCache[str, object] = ResultCache(ttl=60, negative_ttl=0)
    compute = Counter(error=VerificationError("wrong key"))
    for _ in range(2):
        with pytest.raises(VerificationError):
            await cache.get_or_compute("k", compute)
    assert compute.calls == 2


async def test_is_failure_values_get_the_negative_ttl() -> None:
    clock = Clock()
    cache: ResultCache[str, str] = ResultCache(
        ttl=60, negative_ttl=5, is_failure=lambda value: value == "denied", clock=clock
    )
    denied, allowed = Counter("denied"), Counter("allowed")
    await cache.get_or_compute("a", denied)
    await cache.get_or_compute("b", allowed)
    clock.now += 6
    await cache.get_or_compute("a", denied)
    await cache.get_or_compute("b", allowed)
    assert denied.calls == 2
    assert allowed.calls == 1


async def test_concurrent_identical_misses_compute_once() -> None:
    cache: ResultCache[str, object] = ResultCache(ttl=60, negative_ttl=5)
    compute = Counter("verified", wait=0.05)
    results = await asyncio.gather(*(cache.get_or_compute("k", compute) for _ in range(100)))
    assert results == ["verified"] * 100
    assert compute.calls == 1
    assert cache.stats.coalesced == 99


async def test_concurrent_callers_share_a_transient_failure_which_is_not_kept() -> None:
    cache: ResultCache[str, object] = ResultCache(ttl=60, negative_ttl=5)
    compute = Counter(error=EvidenceUnavailable("timed out", transient=True), wait=0.05)
    outcomes = await asyncio.gather(
        *(cache.get_or_compute("k", compute) for _ in range(20)), return_exceptions=True
    )
    assert all(isinstance(o, EvidenceUnavailable) and o.transient for o in outcomes)
    assert compute.calls == 1
    with pytest.raises(EvidenceUnavailable):
        await cache.get_or_compute("k", compute)
    assert compute.calls == 2


async def test_every_caller_gets_its_own_copy_of_a_failure() -> None:
    # One exception object raised in several tasks would have its traceback and context rewritten by each.
    cache: ResultCache[str, object] = ResultCache(ttl=60, negative_ttl=5)
    cause = OSError("connection refused")
    error = EvidenceUnavailable("no such manifest", transient=False, location="image x", hint="push it")
    error.__cause__ = cause
    compute = Counter(error=error, wait=0.05)
    shared = await asyncio.gather(
        *(cache.get_or_compute("k", compute) for _ in range(3)), return_exceptions=True
    )
    cached = []
    for _ in range(2):
        with pytest.raises(EvidenceUnavailable) as raised:
            await cache.get_or_compute("k", compute)
        cached.append(raised.value)
    outcomes = [*shared, *cached]
    assert compute.calls == 1
    assert len({id(outcome) for outcome in outcomes}) == len(outcomes)
    for outcome in outcomes:
        assert isinstance(outcome, EvidenceUnavailable) and outcome is not error
        assert (outcome.message, outcome.location, outcome.hint, outcome.transient) == (
            "no such manifest",
            "image x",
            "push it",
            False,
        )
        assert outcome.__cause__ is cause


async def test_a_cancelled_caller_does_not_cancel_the_computation_for_others() -> None:
    cache: ResultCache[str, object] = ResultCache(ttl=60, negative_ttl=5)
    compute = Counter("verified", wait=0.1)
    impatient = asyncio.create_task(cache.get_or_compute("k", compute))
    patient = asyncio.create_task(cache.get_or_compute("k", compute))
    await asyncio.sleep(0.01)
    impatient.cancel()
    assert await patient == "verified"
    assert impatient.cancelled()
    assert compute.calls == 1
    assert await cache.get_or_compute("k", compute) == "verified"  # stored for later callers


async def test_least_recently_used_entries_are_evicted() -> None:
    cache: ResultCache[int, object] = ResultCache(ttl=60, negative_ttl=5, max_entries=2)
    computes = {n: Counter(n) for n in range(3)}
    await cache.get_or_compute(0, computes[0])
    await cache.get_or_compute(1, computes[1])
    await cache.get_or_compute(0, computes[0])  # 0 is now the most recent
    await cache.get_or_compute(2, computes[2])  # evicts 1
    await cache.get_or_compute(0, computes[0])
    await cache.get_or_compute(1, computes[1])
    assert computes[0].calls == 1
    assert computes[1].calls == 2


async def test_invalidate_and_clear() -> None:
    cache: ResultCache[str, object] = ResultCache(ttl=60, negative_ttl=5)
    compute = Counter("v")
    await cache.get_or_compute("k", compute)
    cache.invalidate("k")
    await cache.get_or_compute("k", compute)
    cache.clear()
    await cache.get_or_compute("k", compute)
    assert compute.calls == 3


def test_invalid_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        ResultCache(ttl=-1, negative_ttl=5)
    with pytest.raises(ValueError):
        ResultCache(ttl=1, negative_ttl=5, max_entries=0)


def test_is_definitive() -> None:
    assert is_definitive(VerificationError("x"))
    assert is_definitive(EvidenceUnavailable("x", transient=False))
    assert not is_definitive(EvidenceUnavailable("x", transient=True))
    assert not is_definitive(TimeoutError())


async def test_single_flight_runs_again_after_a_flight_ends() -> None:
    flight: SingleFlight[str, object] = SingleFlight()
    compute = Counter("v", wait=0.01)
    await asyncio.gather(flight.run("k", compute), flight.run("k", compute))
    assert compute.calls == 1
    assert flight.in_flight() == 0
    await flight.run("k", compute)
    assert compute.calls == 2


@dataclass(frozen=True)
class Verdict:
    """A cached answer that stops being true at ``valid_until`` (a certificate's notAfter, say)."""

    valid_until: datetime | None


T = datetime(2026, 11, 1, tzinfo=UTC)


async def test_a_value_is_not_kept_beyond_its_valid_until_on_the_evaluation_clock() -> None:
    # Issue 25's review (F1): a verdict cached for ten minutes outlived the certificate that made it true.
    clock = Clock()
    cache: ResultCache[str, Verdict] = ResultCache(
        ttl=600, negative_ttl=30, clock=clock, valid_until=lambda v: v.valid_until
    )
    compute = Counter(Verdict(T + timedelta(seconds=90)))
    await cache.get_or_compute("k", compute, now=T)
    await cache.get_or_compute("k", compute, now=T + timedelta(seconds=89))
    assert compute.calls == 1
    clock.now += 1  # hardly any time passed on the monotonic clock: the TTL alone would answer
    await cache.get_or_compute("k", compute, now=T + timedelta(seconds=90))
    assert compute.calls == 2


async def test_an_answer_is_for_the_evaluation_times_it_was_computed_for() -> None:
    # `--now` is honoured on a hit: an answer computed for T does not answer for an earlier time, nor for one
    # more than the TTL later, however little time passed on the monotonic clock.
    clock = Clock()
    cache: ResultCache[str, Verdict] = ResultCache(ttl=600, negative_ttl=30, clock=clock)
    compute = Counter(Verdict(None))
    await cache.get_or_compute("k", compute, now=T)
    await cache.get_or_compute("k", compute, now=T - timedelta(seconds=1))
    assert compute.calls == 2  # earlier: computed again, and kept for T - 1 s up to the TTL after it
    await cache.get_or_compute("k", compute, now=T + timedelta(seconds=598))
    assert compute.calls == 2
    await cache.get_or_compute("k", compute, now=T + timedelta(seconds=599))
    assert compute.calls == 3
    assert cache.stats.hits == 1


async def test_a_definitive_failure_answers_for_negative_ttl_on_the_evaluation_clock() -> None:
    clock = Clock()
    cache: ResultCache[str, Verdict] = ResultCache(ttl=600, negative_ttl=30, clock=clock)
    compute = Counter(error=VerificationError("the certificate is not yet valid"))
    for moment in (T, T + timedelta(seconds=29), T + timedelta(seconds=30)):
        with pytest.raises(VerificationError):
            await cache.get_or_compute("k", compute, now=moment)
    assert compute.calls == 2
    assert cache.stats.negative_hits == 1


async def test_without_an_evaluation_clock_only_the_ttl_counts() -> None:
    clock = Clock()
    cache: ResultCache[str, Verdict] = ResultCache(
        ttl=60, negative_ttl=5, clock=clock, valid_until=lambda v: v.valid_until
    )
    compute = Counter(Verdict(T))
    await cache.get_or_compute("k", compute)
    await cache.get_or_compute("k", compute)
    assert compute.calls == 1

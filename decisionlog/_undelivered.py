"""Records that say an earlier record's answer never reached the API server in time.

The webhook answers only after its record is durable. When the store does not confirm a record before the
answer's deadline, the webhook answers deny (DecisionLogUnavailable) instead; the record may still reach the
log afterwards (a commit that finished late, or one whose acknowledgement was lost with a hung database). For
every such record the writer appends an *undelivered* record: a denial of the same request whose ``reason``
is :data:`REASON` and whose ``message`` names the earlier record's ``record_id``. A store writes it only when
the earlier record is in its log (checked after taking the chain-head lock, so a late commit of the earlier
record has either landed or can no longer land), and only once. See docs/decision-log.md.
"""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime
from typing import Final

from decisionlog._record import FORMAT, DecisionRecord

#: ``reason`` of an undelivered record.
REASON: Final = "AnswerNotDelivered"
_MESSAGE: Final = (
    "record {record_id} was not confirmed before its answer deadline; the webhook answered deny "
    "(DecisionLogUnavailable) instead"
)
_TARGET = re.compile(r"^record ([0-9a-f]{32}) was not confirmed before its answer deadline")


def undelivered(original: DecisionRecord) -> DecisionRecord:
    """The record saying that ``original``'s answer was not delivered (the request was denied)."""
    # The same request, from the same requester, denied: nothing of the original's decision (its findings,
    # artifacts, latency and time) is repeated.
    return dataclasses.replace(
        original,
        allowed=False,
        reason=REASON,
        message=_MESSAGE.format(record_id=original.record_id),
        violations=(),
        warnings=(),
        images=(),
        engines=(),
        latency_us=0,
        format=FORMAT,
        time=datetime.now(UTC),
        # Derived from the original, so that writing it twice (an acknowledgement lost) is noticed.
        record_id=_marker_id(original.record_id),
    )


def target(record: DecisionRecord) -> str | None:
    """The ``record_id`` whose answer ``record`` says was not delivered; None for any other record."""
    if record.reason != REASON or record.allowed or record.message is None:
        return None
    match = _TARGET.match(record.message)
    return match.group(1) if match else None


def original_id(record: DecisionRecord) -> str | None:
    """The ``record_id`` whose answer ``record`` says was not delivered, from structured fields only.

    An undelivered record is a denial whose ``reason`` is :data:`REASON` and whose own ``record_id`` is
    derived from the original's (:func:`undelivered`); the derivation is its own inverse, so the original's
    id is computed, never read from the message text (for readers: ``trtguard audit``; the stores check the
    message's reference with :func:`target`). None for any other record.
    """
    if record.reason != REASON or record.allowed:
        return None
    try:
        return _marker_id(record.record_id)
    except ValueError:  # not a hex record_id: not one this module wrote
        return None


def _marker_id(record_id: str) -> str:
    # The original id with its first half inverted: as unique as the original, computable from it, and
    # inverted back by the same operation (original_id).
    flipped = f"{int(record_id[:16], 16) ^ 0xFFFF_FFFF_FFFF_FFFF:016x}"
    return flipped + record_id[16:]

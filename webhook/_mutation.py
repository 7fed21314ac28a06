"""What ``/mutate`` makes of a review: the JSONPatch pinning what ``pinDigest`` rules verified.

The review itself is the validating one (``webhook._admission``: same policies, same decision log), judged
with pinning on (:class:`~policies.evaluation._state.Evaluation` ``pinning``); :func:`settle` turns its
verdict into the mutating answer, and :func:`with_patch` puts the patch in the AdmissionReview.

- An allow carries the patch of :func:`policies.pinning.patch_for` (``reason`` ``DigestsPinned``, or
  ``NothingToPin`` when it pins nothing: pinned references are left alone, so a reinvocation changes
  nothing).
- A request that could not be judged (out of time, an evaluation error) is denied whatever the policies'
  ``onError``, and so is one with a rule that could not be checked (a registry that did not answer in time):
  an allow without the pins would send the tags on unverified, so a ``/mutate`` timeout is never an allow.
  So is an object whose pins cannot be placed: it is not the object that was judged.
- Its record names no engine: it admits nothing by itself (``/validate`` decides next), and change control
  must not take it for the workload's last admission.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from policies.pinning import PatchOperation, patch_for
from policies.results import Decision
from verifier.base import TrtguardError

__all__ = ["Judged", "settle", "with_patch"]


class Judged(Protocol):
    """What :func:`settle` reads of a verdict (``webhook._admission.Verdict``)."""

    @property
    def allowed(self) -> bool: ...
    @property
    def decision(self) -> Decision | None: ...
    @property
    def failure(self) -> str | None: ...


def settle(obj: Mapping[str, Any] | None, verdict: Judged) -> dict[str, Any]:
    """The fields of ``verdict`` that change for ``/mutate`` (as ``dataclasses.replace`` takes them), for
    the review of ``obj``."""
    decision = verdict.decision
    if verdict.failure is not None:
        return {"allowed": False}
    if not verdict.allowed or decision is None or obj is None:
        return {}
    unchecked = [v for v in decision.violations if v.error]
    if unchecked:
        # onError Warn or Audit let /validate admit what it could not check; /mutate never does
        return {
            "allowed": False,
            "reason": "EvidenceUnavailable",
            "message": "trtguard could not check what it would pin, so /mutate denies whatever onError "
            f"says; retry shortly: {unchecked[0].one_line()}",
            "failure": "evaluation_error",
        }
    try:
        patch = patch_for(obj, decision)
    except TrtguardError as error:
        return {
            "allowed": False,
            "reason": "EvaluationError",
            "message": f"trtguard could not pin the verified digests: {error}",
            "failure": "evaluation_error",
        }
    return {"reason": "DigestsPinned" if patch else "NothingToPin", "patch": tuple(patch)}


def with_patch(answer: dict[str, Any], patch: Sequence[PatchOperation]) -> dict[str, Any]:
    """The AdmissionReview ``answer`` carrying ``patch`` (``patchType: JSONPatch``, base64 of its JSON)."""
    if patch:
        text = json.dumps(list(patch), separators=(",", ":"), ensure_ascii=False)
        answer["response"]["patchType"] = "JSONPatch"
        answer["response"]["patch"] = base64.b64encode(text.encode()).decode("ascii")
    return answer

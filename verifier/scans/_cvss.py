"""The CVSS v3.x base score of a vector, for ratings that give a vector but no score.

A CycloneDX rating may carry only ``vector`` (``CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H``, 9.8): read
as no score, such a finding counted for nothing beside another rating's ``low``. The base score follows
the CVSS v3.1 specification, section 7 (https://www.first.org/cvss/v3.1/specification-document), with its
Roundup (Appendix A), which v3.0 scores are computed with as well (the two differ only in rounding artefacts
of floating point). Temporal and environmental metrics in the vector are allowed and do not change the base
score. A vector that is not a complete, valid v3 base vector has no score (None): the rating cannot tell.
CVSS v2 and v4 vectors are not computed here (v4 has no closed formula; v2 vectors are rare without a
score); their ratings without a score cannot tell either.
"""

from __future__ import annotations

import math
from typing import Final

__all__ = ["base_score_v3"]

_WEIGHTS: Final[dict[str, dict[str, float]]] = {
    "AV": {"N": 0.85, "A": 0.62, "L": 0.55, "P": 0.2},
    "AC": {"L": 0.77, "H": 0.44},
    "PR": {"N": 0.85, "L": 0.62, "H": 0.27},
    "UI": {"N": 0.85, "R": 0.62},
    "S": {"U": 0.0, "C": 0.0},
    "C": {"H": 0.56, "L": 0.22, "N": 0.0},
    "I": {"H": 0.56, "L": 0.22, "N": 0.0},
    "A": {"H": 0.56, "L": 0.22, "N": 0.0},
}
#: Privileges Required weighs more when the scope changes.
_PR_SCOPE_CHANGED: Final = {"N": 0.85, "L": 0.68, "H": 0.5}
#: Temporal and environmental metrics a v3 vector may carry after the base ones.
_OTHER_METRICS: Final = frozenset(
    {"E", "RL", "RC", "CR", "IR", "AR", "MAV", "MAC", "MPR", "MUI", "MS", "MC", "MI", "MA"}
)


def base_score_v3(vector: str) -> float | None:
    """The base score of a ``CVSS:3.0/...`` or ``CVSS:3.1/...`` vector; None when it is not a complete
    valid one (a metric missing, repeated or with a value the specification does not define)."""
    prefix, _, rest = vector.strip().partition("/")
    if prefix not in ("CVSS:3.0", "CVSS:3.1") or not rest:
        return None
    metrics: dict[str, str] = {}
    for part in rest.split("/"):
        name, separator, value = part.partition(":")
        if not separator or name in metrics or (name not in _WEIGHTS and name not in _OTHER_METRICS):
            return None
        if name in _WEIGHTS and value not in _WEIGHTS[name]:
            return None
        metrics[name] = value
    if not _WEIGHTS.keys() <= metrics.keys():
        return None
    changed = metrics["S"] == "C"
    impact_subscore = 1 - (
        (1 - _WEIGHTS["C"][metrics["C"]])
        * (1 - _WEIGHTS["I"][metrics["I"]])
        * (1 - _WEIGHTS["A"][metrics["A"]])
    )
    if changed:
        impact = 7.52 * (impact_subscore - 0.029) - 3.25 * (impact_subscore - 0.02) ** 15
    else:
        impact = 6.42 * impact_subscore
    privileges = (_PR_SCOPE_CHANGED if changed else _WEIGHTS["PR"])[metrics["PR"]]
    exploitability = (
        8.22
        * _WEIGHTS["AV"][metrics["AV"]]
        * _WEIGHTS["AC"][metrics["AC"]]
        * privileges
        * _WEIGHTS["UI"][metrics["UI"]]
    )
    if impact <= 0:
        return 0.0
    total = 1.08 * (impact + exploitability) if changed else impact + exploitability
    return _roundup(min(total, 10.0))


def _roundup(value: float) -> float:
    """CVSS v3.1 Appendix A: the smallest number of one decimal place at least ``value``, computed on
    integers so that 4.000000000001 is 4.1 and 4.0 stays 4.0."""
    whole = round(value * 100_000)
    if whole % 10_000 == 0:
        return whole / 100_000.0
    return (math.floor(whole / 10_000) + 1) / 10.0

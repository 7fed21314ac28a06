"""policies.kinds: the Pod-bearing kinds and where each keeps its pod spec."""

from __future__ import annotations

import pytest

from policies.kinds import WORKLOAD_KINDS, is_workload_kind, pod_spec_keys
from tests.policies.test_workload import SPEC_PATHS


def test_every_workload_kind_is_known() -> None:
    assert set(SPEC_PATHS) == WORKLOAD_KINDS
    assert all(is_workload_kind(kind) for kind in SPEC_PATHS)
    assert not any(is_workload_kind(kind) for kind in ("Service", "List", "pod", "PodList", ""))


@pytest.mark.parametrize("kind", sorted(SPEC_PATHS))
def test_each_kind_names_the_keys_down_to_its_pod_spec(kind: str) -> None:
    keys = pod_spec_keys(kind)
    assert keys is not None
    assert ".".join(keys) == SPEC_PATHS[kind]


@pytest.mark.parametrize("kind", ["Service", "List", "PodList", "pod", ""])
def test_other_kinds_keep_no_pod_spec(kind: str) -> None:
    assert pod_spec_keys(kind) is None

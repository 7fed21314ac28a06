"""policies.sharing: which containers of a Pod can read an engine, against a fixpoint written out plainly."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.sharing import backing, read_only_volume, readers

Mount = tuple[int, str, bool]


def fixpoint(
    count: int, mounts: Sequence[Mount], read_only: Collection[str], seed: Collection[int]
) -> tuple[int, ...]:
    """The rule as the README states it, computed the slow way: repeat until nothing changes."""
    found, written = set(seed), set()
    changed = True
    while changed:
        changed = False
        for container, volume, mounted_read_only in mounts:
            if volume in read_only:
                continue
            if container in found and not mounted_read_only and volume not in written:
                written.add(volume)
                changed = True
            if volume in written and container not in found:
                found.add(container)
                changed = True
    return tuple(sorted(found))


@st.composite
def pods(draw: st.DrawFn) -> tuple[int, list[Mount], set[str], list[set[int]]]:
    count = draw(st.integers(1, 8))
    volumes = [f"v{i}" for i in range(draw(st.integers(1, 5)))]
    mounts = draw(
        st.lists(st.tuples(st.integers(0, count - 1), st.sampled_from(volumes), st.booleans()), max_size=14)
    )
    read_only = draw(st.sets(st.sampled_from(volumes)))
    seeds = draw(st.lists(st.sets(st.integers(0, count - 1)), min_size=1, max_size=4))
    return count, mounts, read_only, seeds


@settings(max_examples=300, derandomize=True)
@given(pods())
def test_readers_are_the_fixpoint_of_the_writable_volume_rule(
    pod: tuple[int, list[Mount], set[str], list[set[int]]],
) -> None:
    count, mounts, read_only, seeds = pod
    assert readers(count, mounts, read_only, seeds) == [
        fixpoint(count, mounts, read_only, seed) for seed in seeds
    ]


def test_a_copy_travels_through_every_writable_volume_in_any_direction() -> None:
    # 0 reads the engine and writes a; 1 reads a and writes b; 2 only reads b: all three can read it.
    mounts = [(0, "a", False), (1, "a", True), (1, "b", False), (2, "b", True), (3, "c", False)]
    assert readers(4, mounts, set(), [{0}, {2}, {3}]) == [(0, 1, 2), (2,), (3,)]
    # a read-only mount of a by 1 reads what 0 wrote; 0's read-only mount of a writes nothing
    assert readers(2, [(0, "a", True), (1, "a", False)], set(), [{0}]) == [(0,)]


def test_volumes_no_container_can_write_are_no_channel() -> None:
    mounts = [(0, "config", False), (1, "config", False)]
    assert readers(2, mounts, {"config"}, [{0}]) == [(0,)]
    assert readers(2, mounts, set(), [{0}]) == [(0, 1)]  # a volume the pod spec does not declare


@pytest.mark.parametrize(
    ("volume", "read_only"),
    [
        ({"name": "v", "emptyDir": {}}, False),
        ({"name": "v"}, False),  # no source: the API server makes it an emptyDir
        ({"name": "v", "hostPath": {"path": "/data"}}, False),
        ({"name": "v", "persistentVolumeClaim": {"claimName": "c"}}, False),
        ({"name": "v", "persistentVolumeClaim": {"claimName": "c", "readOnly": True}}, True),
        ({"name": "v", "csi": {"driver": "d", "readOnly": True}}, True),
        ({"name": "v", "csi": {"driver": "d", "readOnly": "true"}}, False),  # only the boolean counts
        ({"name": "v", "configMap": {"name": "c"}}, True),
        ({"name": "v", "secret": {"secretName": "s"}}, True),
        ({"name": "v", "downwardAPI": {}}, True),
        ({"name": "v", "projected": {"sources": []}}, True),
        ({"name": "v", "image": {"reference": "r/e@sha256:" + "0" * 64}}, True),
        ({"name": "v", "image": {"reference": "x"}, "emptyDir": {}}, False),  # two sources: the writable one
        ({"name": "v", "ephemeral": {"volumeClaimTemplate": {}}}, False),
        ({"name": "v", "somethingNew": {}}, False),  # a kind trtguard does not know
    ],
)
def test_what_counts_as_writable(volume: dict[str, object], read_only: bool) -> None:
    assert read_only_volume(volume) is read_only


def test_many_engines_over_many_containers_take_one_pass() -> None:
    # 400 containers sharing one emptyDir, 100 engines each mounted by one of them: every engine is read by
    # all; the answer lists each container once, in order.
    count = 400
    mounts = [(i, "shared", False) for i in range(count)]
    answers = readers(count, mounts, set(), [{i} for i in range(100)])
    assert answers == [tuple(range(count))] * 100


@pytest.mark.parametrize(
    ("volume", "key"),
    [
        ({"name": "v", "persistentVolumeClaim": {"claimName": "models"}}, "persistentVolumeClaim:models"),
        ({"name": "v", "hostPath": {"path": "/data/"}}, "hostPath:/data"),
        ({"name": "v", "hostPath": {"path": "/"}}, "hostPath:/"),
        ({"name": "v", "nfs": {"server": "nas", "path": "/export"}}, "nfs:nas:/export"),
        ({"name": "v", "emptyDir": {}}, None),
        ({"name": "v", "image": {"reference": "r/e:1"}}, None),
    ],
)
def test_storage_other_templates_can_reach(volume: dict[str, object], key: str | None) -> None:
    assert backing(volume) == key

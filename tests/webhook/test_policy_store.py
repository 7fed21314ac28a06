"""webhook/policy_store.py: load, reload on change with an atomic swap, keep the old set when broken."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import threading
from pathlib import Path

import pytest

from policies.loader import PolicyLoadError, policy_files
from tests.webhook.harness import WaitUntil
from verifier.evidence import LocalEvidence
from webhook._private.demo_material import Material
from webhook.policy_store import PolicyStore


@pytest.fixture
def folder(demo_material: Material, tmp_path: Path) -> Path:
    target = tmp_path / "policies"
    shutil.copytree(demo_material.policies, target)
    return target


def _store(
    folder: Path, demo_material: Material, events: list[tuple[bool, str | None]] | None = None
) -> PolicyStore:
    def record(store: PolicyStore, ok: bool) -> None:
        assert events is not None
        events.append((ok, store.current.revision if store.current else None))

    return PolicyStore(
        folder, LocalEvidence(demo_material.attestations), on_reload=record if events is not None else None
    )


async def test_load_reload_and_keep_the_old_set_when_broken(folder: Path, demo_material: Material) -> None:
    events: list[tuple[bool, str | None]] = []
    store = _store(folder, demo_material, events)
    loaded = store.load()
    assert store.current is loaded
    assert loaded.revision.startswith("sha256:")
    assert loaded.engine.policy_set is loaded.policy_set
    assert events == [(True, loaded.revision)]
    assert await store.reload_if_changed() is None  # nothing changed

    target = folder / "signed-images.yaml"
    good = target.read_text()
    target.write_text(good.replace("threshold: 1", "threshold: many"))
    assert await store.reload_if_changed() is False
    assert store.current is loaded  # the previous set stays in force
    assert store.last_failure is not None
    assert "signed-images.yaml" in store.last_failure.message
    assert events[-1] == (False, loaded.revision)
    assert await store.reload_if_changed() is None  # the same broken files are reported once

    target.write_text(good.replace("onError: Deny", "onError: Warn"))
    assert await store.reload_if_changed() is True
    assert store.current is not loaded
    assert store.current.revision != loaded.revision
    assert store.last_failure is None
    assert events[-1] == (True, store.current.revision)


async def test_a_new_key_file_beside_the_policies_is_a_change(folder: Path, demo_material: Material) -> None:
    store = _store(folder, demo_material)
    store.load()
    (folder / "extra.pem").write_text("not yet referenced\n")
    # Not a policy document, so the set is the same, but a key file a policy names must trigger a reload.
    assert await store.reload_if_changed() is True


async def test_a_vanished_folder_keeps_the_old_set(folder: Path, demo_material: Material) -> None:
    store = _store(folder, demo_material)
    loaded = store.load()
    shutil.rmtree(folder)
    assert await store.reload_if_changed() is False
    assert store.current is loaded
    assert store.last_failure is not None
    assert "no such file or directory" in store.last_failure.message


def test_broken_policies_at_first_load_raise_and_load_nothing(folder: Path, demo_material: Material) -> None:
    (folder / "keys.yaml").unlink()
    store = _store(folder, demo_material)
    with pytest.raises(PolicyLoadError, match="problems in the policies"):
        store.load()
    assert store.current is None


async def test_a_configmap_update_is_seen(demo_material: Material, tmp_path: Path) -> None:
    """Kubernetes mounts a ConfigMap as symlinks into a timestamped folder and swaps ``..data`` atomically."""
    mount = tmp_path / "mount"
    mount.mkdir()
    first = mount / "..2026_11_29_10_00_00.000000001"
    shutil.copytree(demo_material.policies, first)
    (mount / "..data").symlink_to(first.name)
    names = [path.name for path in first.iterdir()]
    for name in names:
        (mount / name).symlink_to(f"..data/{name}")
    store = _store(mount, demo_material)
    loaded = store.load()
    assert len(loaded.policy_set.sources) == len(names)

    second = mount / "..2026_11_29_10_05_00.000000002"
    shutil.copytree(first, second)
    (second / "signed-images.yaml").write_text(
        (second / "signed-images.yaml").read_text().replace("onError: Deny", "onError: Warn")
    )
    swap = mount / "..data_tmp"
    swap.symlink_to(second.name)
    swap.replace(mount / "..data")
    assert await store.reload_if_changed() is True
    assert store.current is not None
    assert store.current.revision != loaded.revision


async def test_a_dot_file_policy_the_loader_reads_is_watched(folder: Path, demo_material: Material) -> None:
    """The loader skips dot-directories but reads dot-files; the watch sees what the loader reads."""
    store = _store(folder, demo_material)
    loaded = store.load()
    hidden = folder / ".extra-keys.yaml"
    assert hidden not in policy_files([folder])
    hidden.write_text((folder / "keys.yaml").read_text().replace("name: platform", "name: extra"))
    assert hidden in policy_files([folder])
    assert await store.reload_if_changed() is True
    assert store.current is not None
    assert store.current.revision != loaded.revision
    assert hidden in store.current.policy_set.sources


async def test_a_configmap_folder_removed_while_walking_is_not_an_error(
    folder: Path, demo_material: Material
) -> None:
    """kubelet deletes old ``..<timestamp>`` folders at any time; the watch never walks into them."""
    store = _store(folder, demo_material)
    store.load()
    stop = threading.Event()

    def churn() -> None:
        n = 0
        while not stop.is_set():
            old = folder / f"..2026_11_29_10_00_00.{n:09d}"
            deep = old.joinpath(*["d"] * 40)
            deep.mkdir(parents=True)
            (deep / "p.yaml").write_text("{}")
            shutil.rmtree(old)
            n += 1

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        for _ in range(300):
            assert await store.reload_if_changed() is None
    finally:
        stop.set()
        thread.join()


async def test_the_watch_survives_a_reload_that_fails_unexpectedly(
    folder: Path, demo_material: Material, wait_until: WaitUntil, caplog: pytest.LogCaptureFixture
) -> None:
    """A file name that is not UTF-8 makes the loader itself fail (not a policy error): the watch logs it,
    counts a failed reload, keeps the set in force, and loads the next good change."""
    events: list[tuple[bool, str | None]] = []
    store = _store(folder, demo_material, events)
    loaded = store.load()
    task = asyncio.create_task(store.watch(0.05))
    try:
        odd = folder / os.fsdecode(b"\xff-keys.yaml")
        odd.write_text((folder / "keys.yaml").read_text().replace("name: platform", "name: odd"))
        await wait_until(lambda: store.last_failure is not None, within=10)
        assert store.last_failure is not None
        assert "UnicodeEncodeError" in store.last_failure.message
        assert events[-1] == (False, loaded.revision)
        assert store.current is loaded
        failed = [r for r in caplog.records if r.message.startswith("policy reload failed")]
        assert failed and failed[0].levelno == logging.ERROR and failed[0].exc_info is not None

        odd.unlink()
        target = folder / "signed-images.yaml"
        target.write_text(target.read_text().replace("onError: Deny", "onError: Warn"))
        await wait_until(lambda: store.current is not loaded, within=10)
        assert not task.done()
        assert store.last_failure is None
        assert events[-1] == (True, store.current.revision if store.current else None)
    finally:
        task.cancel()

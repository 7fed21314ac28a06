"""webhook/_policy_store.py: load, reload on change with an atomic swap, keep the old set when broken."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from policies.loader import PolicyLoadError, PolicySet, load_policy_set, policy_files
from tests.policies.conftest import Material as PolicyMaterial
from tests.support.harness import WaitUntil
from trtguard.demo.material import Material
from verifier.evidence_folder import LocalEvidence
from webhook._policy_store import PolicyStore


@pytest.fixture
def folder(demo_material: Material, tmp_path: Path) -> Path:
    target = tmp_path / "policies"
    shutil.copytree(demo_material.policies, target)
    return target


def _store(
    folder: Path,
    demo_material: Material,
    events: list[tuple[bool, str | None]] | None = None,
    *,
    settle: float = 0.05,
) -> PolicyStore:
    def record(store: PolicyStore, ok: bool) -> None:
        assert events is not None
        events.append((ok, store.current.revision if store.current else None))

    return PolicyStore(
        folder,
        LocalEvidence(demo_material.attestations),
        on_reload=record if events is not None else None,
        settle=settle,
    )


async def test_load_reload_and_keep_the_old_set_when_broken(folder: Path, demo_material: Material) -> None:
    events: list[tuple[bool, str | None]] = []
    store = _store(folder, demo_material, events)
    loaded = store.load()
    assert store.current is loaded
    assert loaded.revision.startswith("sha256:")
    assert loaded.evaluator.policy_set is loaded.policy_set
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


async def test_an_emptied_file_is_a_failed_reload_not_a_smaller_set(
    folder: Path, demo_material: Material
) -> None:
    """Truncating a policy file used to drop its policy silently (no error, no failing metric)."""
    events: list[tuple[bool, str | None]] = []
    store = _store(folder, demo_material, events)
    loaded = store.load()
    target = folder / "trusted-base-images.yaml"
    good = target.read_text()
    target.write_text("")
    assert await store.reload_if_changed() is False
    assert store.current is loaded
    assert store.last_failure is not None
    assert "trusted-base-images.yaml: holds no policy documents" in store.last_failure.message
    assert events[-1] == (False, loaded.revision)

    target.write_text(good)
    assert await store.reload_if_changed() is True
    assert store.current is not None
    assert store.current.revision == loaded.revision  # the same files: the same set, back in force
    assert store.last_failure is None


async def test_a_file_written_in_pieces_never_goes_live_half_written(
    folder: Path, demo_material: Material, wait_until: WaitUntil
) -> None:
    """A writer that pauses half-way through a file: the watch waits until the file stands still.

    The first piece alone is a valid, smaller set (one policy of the two the file will hold); it must never
    be in force.
    """
    names: list[list[str]] = []

    def record(store: PolicyStore, ok: bool) -> None:
        if ok and store.current is not None:
            names.append(sorted(p.name for p in store.current.policy_set.policies))

    store = PolicyStore(folder, LocalEvidence(demo_material.attestations), on_reload=record, settle=0.5)
    store.load()
    base = (folder / "trusted-base-images.yaml").read_text()
    first = base.replace("trusted-tensorrt-images", "extra-a")
    second = base.replace("trusted-tensorrt-images", "extra-b")
    task = asyncio.create_task(store.watch(0.02))
    try:
        with (folder / "extra.yaml").open("w") as out:
            out.write(first)
            out.flush()
            await asyncio.sleep(0.3)  # several polls see the first piece alone
            out.write("---\n" + second)
        await wait_until(lambda: len(names) >= 2, within=10)
    finally:
        task.cancel()
    assert all(("extra-a" in n) == ("extra-b" in n) for n in names), names
    assert "extra-a" in names[-1]


async def test_a_change_while_the_files_are_loaded_is_not_put_in_force(
    folder: Path, demo_material: Material, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The set in force comes from files that did not change between reading them and checking them."""
    store = _store(folder, demo_material)
    loaded = store.load()
    target = folder / "signed-images.yaml"
    real = load_policy_set

    def load_then_edit(path: Path) -> PolicySet:
        loaded_set = real(path)
        target.write_text(target.read_text().replace("onError: Deny", "onError: Warn"))
        return loaded_set

    (folder / "trusted-base-images.yaml").write_text(
        (folder / "trusted-base-images.yaml").read_text().replace("action: Deny", "action: Warn")
    )
    monkeypatch.setattr("webhook._policy_store.load_policy_set", load_then_edit)
    assert await store.reload_if_changed() is None
    assert store.current is loaded
    monkeypatch.setattr("webhook._policy_store.load_policy_set", real)
    assert await store.reload_if_changed() is True
    assert store.current is not None
    assert store.current.revision == load_policy_set(folder).revision


def test_a_load_at_startup_rereads_files_that_changed_under_it(
    folder: Path, demo_material: Material, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(folder, demo_material)
    real = load_policy_set
    calls = 0

    def load_and_edit_once(path: Path) -> PolicySet:
        nonlocal calls
        calls += 1
        loaded_set = real(path)
        if calls == 1:
            target = folder / "signed-images.yaml"
            target.write_text(target.read_text().replace("onError: Deny", "onError: Warn"))
        return loaded_set

    monkeypatch.setattr("webhook._policy_store.load_policy_set", load_and_edit_once)
    loaded = store.load()
    assert calls == 2
    assert loaded.revision == real(folder).revision


async def test_a_slow_load_does_not_stall_the_event_loop(
    folder: Path, demo_material: Material, monkeypatch: pytest.MonkeyPatch, wait_until: WaitUntil
) -> None:
    """Loading runs in a worker thread: probes and reviews go on while a large policy set compiles."""
    store = _store(folder, demo_material)
    store.load()
    real = load_policy_set

    def slow(path: Path) -> PolicySet:
        busy_until = time.perf_counter() + 1.0
        while time.perf_counter() < busy_until:  # CPU-bound, holding the GIL as much as Python lets it
            pass
        return real(path)

    monkeypatch.setattr("webhook._policy_store.load_policy_set", slow)
    target = folder / "signed-images.yaml"
    target.write_text(target.read_text().replace("onError: Deny", "onError: Warn"))
    reload = asyncio.create_task(store.reload_if_changed())
    worst = 0.0
    while not reload.done():
        started = time.perf_counter()
        await asyncio.sleep(0.01)
        worst = max(worst, time.perf_counter() - started)
    assert reload.result() is True
    assert worst < 0.25, f"the event loop stalled for {worst:.2f} s"


def _scan_policy(material: PolicyMaterial, allow_from: str) -> str:
    """A TrustedKeys document and a policy whose vulnerabilities rule reads ``allow_from``."""
    keys = material.keys_file("scanner").read_text()
    rule = (
        "apiVersion: trtguard.dev/v1alpha1\nkind: InferencePolicy\nmetadata: {name: scanned}\n"
        "spec:\n  match: {namespaces: [prod]}\n  images:\n    - name: runtime\n"
        "      match: ['nvcr.io/nvidia/tensorrt:*']\n      attestations:\n"
        "        - predicateType: https://cosign.sigstore.dev/attestation/vuln/v1\n"
        "          keys: [platform/scanner]\n"
        f"          vulnerabilities: {{maxSeverity: high, allowFrom: {allow_from}}}\n"
    )
    return f"{keys}\n---\n{rule}"


@pytest.mark.parametrize("layout", ["single-file", "dot-folder"])
async def test_an_edited_allow_list_is_reloaded(tmp_path: Path, layout: str) -> None:
    # attack finding F3: the policies reloaded, the allowFrom file was read once (beside a single policy
    # file, or in a folder the walk does not enter)
    material = PolicyMaterial(tmp_path)
    folder = tmp_path / "policies"
    (folder / ".lists").mkdir(parents=True)
    name = "exceptions.allow.yaml" if layout == "single-file" else ".lists/exceptions.allow.yaml"
    (folder / "policy.yaml").write_text(_scan_policy(material, name))
    allow_list = folder / name
    allow_list.write_text("- {id: CVE-2020-14343, reason: not reachable}\n")
    store = PolicyStore(
        folder / "policy.yaml" if layout == "single-file" else folder,
        LocalEvidence(material.attestations),
        settle=0.05,
    )
    loaded = store.load()
    assert await store.reload_if_changed() is None  # nothing changed: no reload of the same files
    allow_list.write_text("- {id: CVE-2020-14343, reason: not reachable}\n- {id: CVE-2020-1747, reason: r}\n")
    assert await store.reload_if_changed() is True
    assert store.current is not None and store.current.revision != loaded.revision
    assert await store.reload_if_changed() is None
    allow_list.write_text("- {id: 'not an id', reason: r}\n")  # a broken edit keeps the set in force
    assert await store.reload_if_changed() is False
    assert store.last_failure is not None and "exceptions.allow.yaml" in store.last_failure.message


async def test_an_edited_key_file_beside_a_single_policy_file_is_reloaded(tmp_path: Path) -> None:
    # the family of F3: a TrustedKeys `file:` beside a single --policies file was read once
    material = PolicyMaterial(tmp_path)
    folder = tmp_path / "policies"
    folder.mkdir()
    key = material.key("scanner").public_key()
    (folder / "scanner.pem").write_bytes(key.to_pem())
    keys = (
        "apiVersion: trtguard.dev/v1alpha1\nkind: TrustedKeys\nmetadata: {name: platform}\n"
        "spec:\n  keys:\n    - {name: scanner, file: scanner.pem}\n"
    )
    policy = _scan_policy(material, "x.allow.yaml").split("\n---\n", 1)[1]
    (folder / "x.allow.yaml").write_text("[]\n")
    (folder / "policy.yaml").write_text(f"{keys}---\n{policy}")
    store = PolicyStore(folder / "policy.yaml", LocalEvidence(material.attestations), settle=0.05)
    loaded = store.load()
    assert await store.reload_if_changed() is None
    (folder / "scanner.pem").write_bytes(material.key("rotated").public_key().to_pem())
    assert await store.reload_if_changed() is True
    assert store.current is not None and store.current.revision != loaded.revision

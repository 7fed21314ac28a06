"""trtguard/audit/package/policy.py: a policy snapshot recomputes its revision, and reads nothing else."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from policies.loader import load_policy_set
from tests.support.notary_pki import make_pki
from trtguard.audit.package.policy import key_file_names, load_snapshot, take_snapshot
from trtguard.demo.material import LIBRARY
from verifier.base._errors import InputError, VerificationError
from verifier.crypto._keys import generate_private_key

KEYLESS = "https://token.actions.githubusercontent.com"


def _policies(root: Path, trusted_root: Path) -> Path:
    """Library policies, with keys in files beside and outside the folder and a keyless signer's root."""
    folder = root / "cluster" / "policies"
    folder.mkdir(parents=True)
    for name in ("signed-build-manifest.yaml", "signed-images.yaml"):
        shutil.copy(LIBRARY / name, folder / name)
    (folder / "keys").mkdir()
    (root / "trust").mkdir()
    (folder / "keys" / "build.pub").write_bytes(generate_private_key().public_key().to_pem())
    (root / "trust" / "image.pub").write_bytes(generate_private_key().public_key().to_pem())
    shutil.copy(trusted_root, root / "trust" / "trusted_root.json")
    (folder / "keys.yaml").write_text(
        "apiVersion: trtguard.dev/v1alpha1\nkind: TrustedKeys\nmetadata: {name: platform}\nspec:\n  keys:\n"
        "    - {name: build-signer, file: keys/build.pub}\n"
        "    - {name: image-signer, file: ../../trust/image.pub}\n"
        "    - name: ci\n"
        f"      keyless: {{issuer: {KEYLESS}, subjectRegexp: '.*',\n"
        "                trustedRoot: {file: ../../trust/trusted_root.json}}\n"
    )
    return folder


@pytest.fixture
def policies(tmp_path: Path, shared_fixtures: Path) -> Path:
    return _policies(tmp_path, shared_fixtures / "cosign" / "bundles" / "cosign" / "trusted_root_pgi.json")


def test_snapshot_keeps_the_layout_that_makes_the_revision(policies: Path) -> None:
    snapshot = take_snapshot([policies])
    assert snapshot.revision == load_policy_set(policies).revision
    assert snapshot.policy_files == (
        "policies/cluster/policies/keys.yaml",
        "policies/cluster/policies/signed-build-manifest.yaml",
        "policies/cluster/policies/signed-images.yaml",
    )
    assert snapshot.key_files == (
        "policies/cluster/policies/keys/build.pub",
        "policies/trust/image.pub",
        "policies/trust/trusted_root.json",
    )
    assert set(snapshot.contents) == {*snapshot.policy_files, *snapshot.key_files}
    reloaded = load_snapshot(snapshot.contents, snapshot.policy_files, snapshot.key_files)
    assert reloaded.revision == snapshot.revision
    assert sorted(reloaded.signers) == ["platform/build-signer", "platform/ci", "platform/image-signer"]


def test_a_changed_key_file_changes_the_revision(policies: Path) -> None:
    snapshot = take_snapshot([policies])
    contents = dict(snapshot.contents)
    contents["policies/trust/image.pub"] = generate_private_key().public_key().to_pem()
    reloaded = load_snapshot(contents, snapshot.policy_files, snapshot.key_files)
    assert reloaded.revision != snapshot.revision


def test_an_absolute_key_path_cannot_be_exported(policies: Path) -> None:
    keys = policies / "keys.yaml"
    keys.write_text(keys.read_text().replace("file: keys/build.pub", f"file: {policies}/keys/build.pub"))
    with pytest.raises(InputError, match="is named by an absolute path: its revision is not reproducible"):
        take_snapshot([policies])


@pytest.mark.parametrize("reference", ["../../../../etc/hostname", "/etc/hostname", "keys/missing.pub"])
def test_a_package_cannot_make_the_loader_read_outside_it(policies: Path, reference: str) -> None:
    snapshot = take_snapshot([policies])
    contents = dict(snapshot.contents)
    name = "policies/cluster/policies/keys.yaml"
    contents[name] = contents[name].replace(b"file: keys/build.pub", f"file: {reference}".encode())
    with pytest.raises(
        VerificationError, match=f"names '{reference}', which is not a key file of the package"
    ):
        load_snapshot(contents, snapshot.policy_files, snapshot.key_files)


def test_policy_text_with_yaml_aliases_is_refused_before_loading() -> None:
    bomb = b"a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n"
    refused = r"YAML aliases \(\*name\) of lists and maps are not accepted"
    with pytest.raises(VerificationError, match=refused):
        key_file_names(bomb, location="policies/bomb.yaml")


def test_a_listed_file_missing_from_the_package_is_named(policies: Path) -> None:
    snapshot = take_snapshot([policies])
    contents = {k: v for k, v in snapshot.contents.items() if k != "policies/trust/image.pub"}
    with pytest.raises(
        VerificationError, match=r"policy file policies/trust/image\.pub is not in the package"
    ):
        load_snapshot(contents, snapshot.policy_files, snapshot.key_files)


def test_policy_text_with_a_scalar_alias_bomb_is_refused_before_loading() -> None:
    bomb = f"a: &a {'x' * 60_000}\nb: [{', '.join(['*a'] * 150_000)}]\n".encode()
    with pytest.raises(
        VerificationError, match="more than 16777216 characters of text once its YAML aliases"
    ):
        key_file_names(bomb, location="policies/bomb.yaml")


def _with_notation_config(policies: Path, directory: str) -> Path:
    """A notationConfig signer whose Notation configuration is in ``directory`` (relative to the policies)."""
    pki = make_pki()
    config = policies / directory
    store = config / "truststore" / "x509" / "ca" / "release"
    store.mkdir(parents=True)
    (store / "root.crt").write_bytes(pki.root.pem())
    statement = {
        "name": "all",
        "registryScopes": ["*"],
        "signatureVerification": {"level": "strict"},
        "trustStores": ["ca:release"],
        "trustedIdentities": ["*"],
    }
    (config / "trustpolicy.json").write_text(json.dumps({"version": "1.0", "trustPolicies": [statement]}))
    keys = policies / "keys.yaml"
    keys.write_text(
        keys.read_text() + f"    - name: notary\n      notationConfig: {{directory: {directory}}}\n"
    )
    return config


@pytest.mark.parametrize("directory", ["notation", "../notation"])
def test_a_notation_configuration_travels_with_the_snapshot(policies: Path, directory: str) -> None:
    _with_notation_config(policies, directory)
    snapshot = take_snapshot([policies])
    assert any(name.endswith("/trustpolicy.json") for name in snapshot.key_files)
    assert any(name.endswith("/release/root.crt") for name in snapshot.key_files)
    reloaded = load_snapshot(snapshot.contents, snapshot.policy_files, snapshot.key_files)
    assert reloaded.revision == snapshot.revision and "platform/notary" in reloaded.signers
    changed = dict(snapshot.contents)
    [trust_policy] = [name for name in changed if name.endswith("/trustpolicy.json")]
    changed[trust_policy] = changed[trust_policy].replace(
        b'"registryScopes": ["*"]', b'"registryScopes": ["r.io/app"]'
    )
    assert load_snapshot(changed, snapshot.policy_files, snapshot.key_files).revision != snapshot.revision


def test_a_package_cannot_point_a_notation_configuration_outside_it(policies: Path) -> None:
    _with_notation_config(policies, "notation")
    snapshot = take_snapshot([policies])
    contents = dict(snapshot.contents)
    name = "policies/cluster/policies/keys.yaml"
    for outside in ("/etc", "../../../../etc"):
        contents[name] = snapshot.contents[name].replace(
            b"{directory: notation}", f"{{directory: {outside}}}".encode()
        )
        with pytest.raises(VerificationError, match=r"Notation configuration .* not in the package"):
            load_snapshot(contents, snapshot.policy_files, snapshot.key_files)


def test_an_absolute_notation_configuration_cannot_be_exported(policies: Path) -> None:
    config = _with_notation_config(policies, "notation")
    keys = policies / "keys.yaml"
    keys.write_text(keys.read_text().replace("{directory: notation}", f"{{directory: {config}}}"))
    with pytest.raises(InputError, match="is named by an absolute path"):
        take_snapshot([policies])

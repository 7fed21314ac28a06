"""policies.signers: TrustedKeys documents load into signers, and a rule's signers are checked at load."""

from __future__ import annotations

from pathlib import Path

from policies.loader import load_policy_set
from policies.schema import trusted_keys_yaml
from tests.policies.conftest import Material
from tests.policies.test_loader import POLICY, problems_of
from verifier.crypto._keys import generate_private_key


def test_trusted_keys_yaml_loads_back_as_the_same_keys(material: Material, tmp_path: Path) -> None:
    keys = {
        "image-signer": generate_private_key().public_key(),
        "build-signer": generate_private_key().public_key(),
    }
    text = trusted_keys_yaml("team", keys, comment="two lines\nof comment")
    assert text.startswith("# two lines\n# of comment\napiVersion: trtguard.dev/v1alpha1\n")
    (tmp_path / "keys.yaml").write_text(text)
    signers = load_policy_set(
        [material.policy(POLICY.replace("platform", "team")), tmp_path / "keys.yaml"]
    ).signers
    assert {ref: s.public_key.key_id for ref, s in signers.items() if s.public_key} == {
        f"team/{name}": key.key_id for name, key in keys.items()
    }


def test_one_key_under_two_names_in_one_rule_is_an_error(material: Material) -> None:
    pem = material.key("image-signer").public_key().to_pem().decode()
    keys = material.root / "keys.yaml"
    keys.write_text(
        "apiVersion: trtguard.dev/v1alpha1\nkind: TrustedKeys\nmetadata: {name: platform}\nspec:\n  keys:\n"
        + "".join(
            f"    - name: {name}\n      publicKey: |\n"
            + "".join(f"        {line}\n" for line in pem.splitlines())
            for name in ("image-signer", "alias")
        )
    )
    policy = POLICY.replace(
        "keys: [platform/image-signer]}", "keys: [platform/image-signer, platform/alias], threshold: 2}"
    )
    [problem] = problems_of(material.policy(policy), keys)
    assert (
        "spec.images[0].signatures.keys: platform/alias and platform/image-signer are the same key" in problem
    )
    assert problem.startswith(f"{material.root / 'policy.yaml'}:8:")


def test_keyless_signer_for_an_attestation_is_an_error(material: Material, shared_fixtures: Path) -> None:
    root = shared_fixtures / "cosign" / "bundles" / "cosign" / "trusted_root_pgi.json"
    keys = material.root / "keys.yaml"
    keys.write_text(
        "apiVersion: trtguard.dev/v1alpha1\nkind: TrustedKeys\nmetadata: {name: platform}\nspec:\n  keys:\n"
        "    - name: ci\n"
        f"      keyless: {{issuer: https://issuer.example, subject: ci, trustedRoot: {{file: {root}}}}}\n"
    )
    signatures = POLICY.replace("platform/image-signer", "platform/ci")
    assert load_policy_set([material.policy(signatures), keys]).signers["platform/ci"].identity is not None
    models = (
        "apiVersion: trtguard.dev/v1alpha1\nkind: InferencePolicy\nmetadata: {name: m}\nspec:\n"
        "  models: {buildManifest: {keys: [platform/ci]}}\n"
    )
    [problem] = problems_of(material.policy(models, "models.yaml"), keys)
    assert "spec.models.buildManifest.keys: platform/ci is a keyless identity" in problem


def test_keyless_signers_of_one_root_may_share_a_rule(material: Material, shared_fixtures: Path) -> None:
    """Two signers naming the same trusted root (here two copies of one file) are of one Sigstore instance;
    a second, different root in the same rule is refused."""
    root = shared_fixtures / "cosign" / "bundles" / "cosign" / "trusted_root_pgi.json"
    copy = material.root / "copy-of-the-root.json"
    copy.write_bytes(root.read_bytes())
    other = material.root / "other-root.json"
    other.write_bytes(root.read_bytes().replace(b"{", b'{"comment": "another instance", ', 1))
    keys = material.root / "keys.yaml"

    def keys_with(second_root: Path) -> Path:
        entries = "".join(
            f"    - name: {name}\n      keyless:\n        {{issuer: https://i.example, subject: {name},"
            f" trustedRoot: {{file: {path}}}}}\n"
            for name, path in (("ci", root), ("cd", second_root))
        )
        keys.write_text(
            "apiVersion: trtguard.dev/v1alpha1\nkind: TrustedKeys\nmetadata: {name: platform}\nspec:\n"
            "  keys:\n" + entries
        )
        return keys

    policy = material.policy(
        POLICY.replace("keys: [platform/image-signer]}", "keys: [platform/ci, platform/cd], threshold: 2}")
    )
    assert set(load_policy_set([policy, keys_with(copy)]).signers) == {"platform/ci", "platform/cd"}
    [problem] = problems_of(policy, keys_with(other))
    assert "the keyless signers use different trusted roots" in problem


def test_key_files_are_relative_to_the_policy(material: Material) -> None:
    (material.root / "keys").mkdir()
    (material.root / "keys" / "signer.pub").write_bytes(material.key("image-signer").public_key().to_pem())
    keys = material.policy(
        "apiVersion: trtguard.dev/v1alpha1\nkind: TrustedKeys\nmetadata: {name: platform}\n"
        "spec:\n  keys:\n    - {name: image-signer, file: keys/signer.pub}\n",
        "keys.yaml",
    )
    assert "platform/image-signer" in load_policy_set([material.policy(POLICY), keys]).signers
    missing = material.policy(keys.read_text().replace("signer.pub", "absent.pub"), "keys.yaml")
    assert "cannot read" in problems_of(material.policy(POLICY), missing)[0]
    garbage = material.policy(keys.read_text().replace("absent.pub", "signer.pub"), "keys.yaml")
    (material.root / "keys" / "signer.pub").write_text("not a key")
    assert "key platform/image-signer" in problems_of(material.policy(POLICY), garbage)[0]

"""policies.loader: whole policy sets load, or nothing does, and every problem names file, line and field."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from policies.loader import PolicyLoadError, load_policy_set, policy_files
from policies.schema import policy_json_schema
from tests.policies.conftest import Material
from tests.support.notary_pki import make_pki
from verifier.base._references import ImageReference
from verifier.crypto._keys import generate_private_key

POLICY = """\
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: p}
spec:
  images:
    - name: runtime
      match: ["nvcr.io/nvidia/tensorrt:*"]
      signatures: {keys: [platform/image-signer]}
"""


def problems_of(*paths: Path) -> tuple[str, ...]:
    with pytest.raises(PolicyLoadError) as caught:
        load_policy_set(list(paths))
    return caught.value.problems


def test_loads_policies_and_keys(material: Material) -> None:
    policy_set = load_policy_set([material.policy(POLICY), material.keys_file("image-signer")])
    assert [p.name for p in policy_set.policies] == ["p"]
    assert set(policy_set.signers) == {"platform/image-signer"}
    assert policy_set.revision.startswith("sha256:")


def test_image_rule_answers_the_same_after_remembering_many_references(material: Material) -> None:
    # An image rule remembers which references it selects (bounded): its answers stay those of its
    # patterns, for references seen again and after the memory was emptied.
    policy_set = load_policy_set([material.policy(POLICY), material.keys_file("image-signer")])
    rule = policy_set.policies[0].image_rules[0]
    selected = ImageReference.parse("nvcr.io/nvidia/tensorrt:24.08-py3")
    other = ImageReference.parse("nvcr.io/nvidia/pytorch:24.08-py3")
    for round_ in range(2):
        assert rule.selects(selected) and not rule.selects(other)
        for i in range(5000):  # more than the rule remembers
            assert rule.selects(ImageReference.parse(f"nvcr.io/nvidia/tensorrt:{round_}.{i}"))
            assert not rule.selects(ImageReference.parse(f"nvcr.io/other/tensorrt:{round_}.{i}"))


def test_revision_follows_content_not_location(material: Material, tmp_path: Path) -> None:
    keys = material.keys_file("image-signer")
    first = load_policy_set([material.policy(POLICY), keys]).revision
    assert load_policy_set([material.policy(POLICY), keys]).revision == first
    changed = load_policy_set([material.policy(POLICY.replace("tensorrt:*", "tensorrt:24*")), keys]).revision
    assert changed != first


def test_unknown_key_names_file_line_and_field(material: Material) -> None:
    path = material.policy(POLICY.replace("      match:", "      requireDigst: true\n      match:"))
    [problem] = problems_of(path, material.keys_file("image-signer"))
    assert problem.startswith(f"{path}:7: spec.images[0].requireDigst: unknown key")


def test_wrong_type_says_what_was_given(material: Material) -> None:
    path = material.policy(POLICY.replace("name: runtime", "name: runtime\n      requireDigest: maybe"))
    [problem] = problems_of(path, material.keys_file("image-signer"))
    assert f"{path}:7: spec.images[0].requireDigest" in problem
    assert "'maybe'" in problem


MODELS = """\
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: m}
spec:
  models:
    buildManifest: {keys: [platform/build-signer]}
    rules:
      RULE
"""


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ("precisions: []", "spec.models.rules.precisions: List should have at least 1 item"),
        (
            "minAccuracy: {top1_acc: .nan}",
            "spec.models.rules.minAccuracy.top1_acc: Input should be a finite number",
        ),
        ("pluginsAllowed: [ABCD]", "'ABCD' is not 'sha256:' followed by 64 lower-case hex characters"),
        (
            "expressions: [{name: a, cel: 'true', message: x}, {name: a, cel: 'false', message: y}]",
            "expression names must be unique",
        ),
    ],
)
def test_model_rules_that_could_never_fire_are_errors(material: Material, rule: str, expected: str) -> None:
    [problem] = problems_of(material.policy(MODELS.replace("RULE", rule)), material.keys_file("build-signer"))
    assert expected in problem


@pytest.mark.parametrize("term", ["match", "exclude"])
@pytest.mark.parametrize("field", ["namespaces", "kinds"])
def test_empty_selector_lists_are_errors(material: Material, term: str, field: str) -> None:
    # An empty list would select nothing (match) or everything (exclude) without saying so.
    path = material.policy(POLICY.replace("spec:\n", f"spec:\n  {term}: {{{field}: []}}\n"))
    [problem] = problems_of(path, material.keys_file("image-signer"))
    assert f"spec.{term}.{field}: List should have at least 1 item" in problem


def test_duplicate_yaml_key_is_an_error(material: Material) -> None:
    path = material.policy(POLICY.replace("metadata: {name: p}", "metadata: {name: p}\nmetadata: {name: q}"))
    [problem] = problems_of(path)
    assert "key 'metadata' appears twice" in problem
    assert f"{path}:4" in problem


def test_alias_is_refused(material: Material) -> None:
    text = POLICY.replace(
        'match: ["nvcr.io/nvidia/tensorrt:*"]', 'match: &m ["a.io/x:*"]\n    - name: b\n      match: *m'
    )
    assert "aliases" in problems_of(material.policy(text))[0]


def test_undefined_key_reference(material: Material) -> None:
    path = material.policy(POLICY)
    [problem] = problems_of(path, material.keys_file("other"))
    assert problem.startswith(
        f"{path}:8: spec.images[0].signatures.keys[0]: key 'platform/image-signer' is not defined"
    )
    assert "platform/other" in problem


def test_pattern_must_be_normalised(material: Material) -> None:
    path = material.policy(POLICY.replace("nvcr.io/nvidia/tensorrt:*", "nginx:*"))
    [problem] = problems_of(path, material.keys_file("image-signer"))
    assert "docker.io/library/nginx" in problem
    assert f"{path}:7: spec.images[0].match[0]" in problem


def test_cel_compile_error_has_line_and_column(material: Material) -> None:
    policy = """\
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: p}
spec:
  models:
    buildManifest: {keys: [platform/image-signer]}
    rules:
      expressions:
        - cel: "manifest.x == "
          message: broken
"""
    path = material.policy(policy)
    [problem] = problems_of(path, material.keys_file("image-signer"))
    assert problem.startswith(f"{path}:9:")
    assert "spec.models.rules.expressions[0].cel" in problem


def test_cel_error_in_a_block_scalar_points_at_its_own_line(material: Material) -> None:
    policy = """\
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: p}
spec:
  models:
    buildManifest: {keys: [platform/image-signer]}
    rules:
      expressions:
        - message: broken
          cel: |
            manifest.accuracy.size() > 0 &&
              nosuchname > 1
"""
    path = material.policy(policy)
    [problem] = problems_of(path, material.keys_file("image-signer"))
    assert problem.startswith(f"{path}:12:")


def test_every_problem_is_reported_and_nothing_loads(material: Material) -> None:
    bad = material.policy(POLICY.replace("name: p", "name: Bad_Name"), "a.yaml")
    worse = material.policy("kind: Something\n", "b.yaml")
    broken = material.policy("spec: [unclosed\n", "c.yaml")
    problems = problems_of(bad, worse, broken)
    assert len(problems) >= 3
    text = "\n".join(problems)
    assert "metadata.name" in text and "kind 'Something'" in text and "malformed YAML" in text


def test_model_rules_require_a_manifest_signer(material: Material) -> None:
    policy = POLICY.replace("  images:", "  models:\n    rules: {precisions: [fp16]}\n  images:")
    assert "buildManifest.keys" in problems_of(material.policy(policy), material.keys_file("image-signer"))[0]


@pytest.mark.parametrize(
    ("fragment", "message"),
    [
        ("signatures: {keys: [platform/image-signer], threshold: 2}", "threshold 2 is more than the 1 keys"),
        ("digests: ['sha256:ABC']", "is not 'sha256:' followed by 64"),
    ],
)
def test_value_rules(material: Material, fragment: str, message: str) -> None:
    path = material.policy(POLICY.replace("signatures: {keys: [platform/image-signer]}", fragment))
    assert message in problems_of(path, material.keys_file("image-signer"))[0]


def test_duplicate_policy_names_across_files(material: Material) -> None:
    keys = material.keys_file("image-signer")
    problems = problems_of(material.policy(POLICY, "a.yaml"), material.policy(POLICY, "b.yaml"), keys)
    assert "already defined" in problems[0]


def test_non_utf8_file(material: Material) -> None:
    path = material.root / "latin1.yaml"
    path.write_bytes(POLICY.encode().replace(b"name: p", b"name: p\xe9"))
    assert "byte 0xe9 at offset" in problems_of(path)[0]


def test_directory_walk_skips_tests_and_hidden_folders(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / ".git").mkdir()
    (tmp_path / "a.yaml").write_text(POLICY)
    (tmp_path / "tests" / "suite.yaml").write_text("kind: PolicyTest\n")
    (tmp_path / ".git" / "x.yaml").write_text("x")
    (tmp_path / "notes.txt").write_text("x")
    assert policy_files([tmp_path]) == [tmp_path / "a.yaml"]


def test_missing_path_and_empty_folder(tmp_path: Path) -> None:
    assert "no such file" in problems_of(tmp_path / "absent")[0]
    assert "no policy files" in problems_of(tmp_path)[0]


def test_keys_alone_are_not_a_policy_set(material: Material) -> None:
    assert "no InferencePolicy" in problems_of(material.keys_file("image-signer"))[0]


def test_library_loads_with_test_keys() -> None:
    root = Path(__file__).resolve().parents[2] / "policies" / "library"
    policy_set = load_policy_set([root, root / "tests" / "keys.yaml"])
    assert len(policy_set.policies) == 5  # the starter policies: the templates to copy are elsewhere
    templates = root.parent / "templates"
    copied = [templates / name for name in ("scanned-images.yaml", "gitops-deployers.yaml", "gpu-fit.yaml")]
    assert len(load_policy_set([*copied, root / "tests" / "keys.yaml"]).policies) == 3
    committee = load_policy_set(
        [templates / "change-control.yaml", root / "tests" / "change-control" / "keys.yaml"]
    )
    assert [policy.name for policy in committee.policies] == ["change-control"]


LIBRARY = Path(__file__).resolve().parents[2] / "policies" / "library"


@pytest.mark.parametrize(
    "text",
    ["", "\n\n   \n", "# every policy was here\n", "# a\n\n# b\n"],
    ids=["empty", "whitespace", "comment", "comments"],
)
def test_a_file_without_documents_is_an_error(material: Material, text: str) -> None:
    """An emptied file must not silently take its policies out of the set (issue 10, item 7)."""
    emptied = material.policy(text, "emptied.yaml")
    [problem] = problems_of(material.policy(POLICY), material.keys_file("image-signer"), emptied)
    assert problem.startswith(f"{emptied}: holds no policy documents")


@pytest.mark.parametrize(
    ("text", "line"),
    [("---\n", 2), ("--- null\n", 1), (POLICY + "---\n", 10), ("---\n---\n" + POLICY, 2)],
    ids=["dashes", "null", "trailing-dashes", "leading-empty"],
)
def test_an_empty_document_is_an_error(material: Material, text: str, line: int) -> None:
    path = material.policy(text, "odd.yaml")
    problems = problems_of(path, material.keys_file("image-signer"))
    assert f"{path}:{line}: empty document" in problems[0]


@pytest.mark.parametrize("name", sorted(p.name for p in LIBRARY.glob("*.yaml")))
def test_a_library_file_cut_after_any_key_does_not_load(tmp_path: Path, name: str) -> None:
    """A file cut off right after ``key:`` (``signatures:``, ``models:``, …) holds a null: never a policy.

    Without this, cutting signed-images.yaml after ``signatures:`` loaded a rule without a signature check.
    """
    lines = (LIBRARY / name).read_text().splitlines(keepends=True)
    cuts = [
        i for i, line in enumerate(lines) if line.rstrip().endswith(":") and not line.lstrip().startswith("#")
    ]
    assert cuts, f"{name} has no block keys to cut after"
    for i in cuts:
        folder = tmp_path / f"cut-{i}"
        shutil.copytree(LIBRARY, folder, ignore=shutil.ignore_patterns("tests"))
        (folder / name).write_text("".join(lines[: i + 1]))
        with pytest.raises(PolicyLoadError) as caught:
            load_policy_set([folder, LIBRARY / "tests" / "keys.yaml"])
        assert any(problem.startswith(f"{folder / name}:") for problem in caught.value.problems), (
            f"{name} cut after line {i + 1} ({lines[i].strip()}) loaded: {caught.value.problems}"
        )


NULLABLE = """\
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: n}
spec:
  match: {namespaces: [prod], kinds: [Pod], labels: {matchLabels: {a: b}}}
  exclude: {namespaces: [kube-system], kinds: [Job], labels: {matchLabels: {c: d}}}
  images:
    - name: runtime
      match: ["nvcr.io/nvidia/tensorrt:*"]
      digests: ['sha256:0000000000000000000000000000000000000000000000000000000000000000']
      signatures: {keys: [platform/image-signer]}
  models:
    buildManifest: {keys: [platform/image-signer], maxAge: 30d}
    verification: {keys: [platform/image-signer]}
    rules:
      precisions: [fp16]
      toolchain: {sameAsRuntimeImage: true, allowed: ["nvcr.io/nvidia/tensorrt:*"]}
      pluginsAllowed: []
  changeControl:
    gated: [TensorRTMajorUpgrade]
    approvals: {keys: [platform/image-signer]}
"""


def test_the_nullable_fixture_loads(material: Material) -> None:
    assert [
        p.name
        for p in load_policy_set([material.policy(NULLABLE), material.keys_file("image-signer")]).policies
    ] == ["n"]


NULLS = [
    ("signatures: {keys: [platform/image-signer]}", "signatures: null", "spec.images[0].signatures"),
    ("digests: ['sha256:" + "0" * 64 + "']", "digests: ~", "spec.images[0].digests"),
    ("  exclude: {namespaces", "  exclude: null\n  x: {namespaces", "spec.exclude"),
    ("exclude: {namespaces: [kube-system]", "exclude: {namespaces: null", "spec.exclude.namespaces"),
    (
        "match: {namespaces: [prod], kinds: [Pod]",
        "match: {namespaces: [prod], kinds: null",
        "spec.match.kinds",
    ),
    ("labels: {matchLabels: {c: d}}", "labels: null", "spec.exclude.labels"),
    ("labels: {matchLabels: {c: d}}", "labels: {matchLabels: null}", "spec.exclude.labels.matchLabels"),
    (", maxAge: 30d}", ", maxAge: null}", "spec.models.buildManifest.maxAge"),
    ("verification: {keys: [platform/image-signer]}", "verification: null", "spec.models.verification"),
    ("precisions: [fp16]", "precisions: null", "spec.models.rules.precisions"),
    ("pluginsAllowed: []", "pluginsAllowed: null", "spec.models.rules.pluginsAllowed"),
    (
        ', allowed: ["nvcr.io/nvidia/tensorrt:*"]}',
        ", allowed: null}",
        "spec.models.rules.toolchain.allowed",
    ),
    (
        NULLABLE[NULLABLE.index("  changeControl:") :],
        "  changeControl: null\n",
        "spec.changeControl",
    ),
]


@pytest.mark.parametrize(("old", "new", "field"), NULLS, ids=[field for _, _, field in NULLS])
def test_null_never_stands_for_an_absent_rule(material: Material, old: str, new: str, field: str) -> None:
    """An explicit null (what ``key:`` with nothing after it means) is refused where it would drop a check."""
    assert old in NULLABLE
    path = material.policy(NULLABLE.replace(old, new, 1))
    problems = problems_of(path, material.keys_file("image-signer"))
    # Optional rules say "null is not allowed"; required values say what they expected and that null came.
    assert any(f": {field}: " in p and "null" in p for p in problems), problems


def test_a_models_section_cut_off_is_an_error_not_a_policy_without_model_rules(material: Material) -> None:
    cut = NULLABLE[: NULLABLE.index("  models:")] + "  models:\n"
    [problem] = problems_of(material.policy(cut), material.keys_file("image-signer"))
    assert ": spec.models: null is not allowed" in problem


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        # Under exclude, an empty selector would exclude every workload: the policy would check nothing.
        (
            "labels: {matchLabels: {c: d}}",
            "labels: {}",
            "spec.exclude.labels: Value error, an empty selector",
        ),
        ("labels: {matchLabels: {c: d}}", "labels: {matchLabels: {}}", "an empty selector selects every"),
        # `allowed: []` reads as "no builder image allowed" but would check nothing.
        (
            ', allowed: ["nvcr.io/nvidia/tensorrt:*"]}',
            ", allowed: []}",
            "toolchain.allowed: List should have at least 1",
        ),
    ],
)
def test_empty_values_that_would_check_nothing_are_errors(
    material: Material, old: str, new: str, message: str
) -> None:
    path = material.policy(NULLABLE.replace(old, new, 1))
    problems = problems_of(path, material.keys_file("image-signer"))
    assert any(message in p for p in problems), problems


def test_the_json_schema_offers_null_nowhere() -> None:
    """``trtguard schema policy`` must not tell editors that null is valid where the loader refuses it."""
    text = json.dumps(policy_json_schema())
    assert '"null"' not in text
    signatures = policy_json_schema()["$defs"]["ImageRule"]["properties"]["signatures"]
    assert signatures == {"$ref": "#/$defs/SignatureRule"}


NOTATION_KEYS = """\
apiVersion: trtguard.dev/v1alpha1
kind: TrustedKeys
metadata: {name: platform}
spec:
  keys:
    - name: image-signer
      notationConfig: {directory: notation}
"""


def _notation_folder(root: Path) -> Path:
    """A policy folder: the policy, a TrustedKeys file naming ``notation/``, and a Notation configuration
    directory there as Notation lays it out, with certificates and settings of every name."""
    (root / "policy.yaml").write_text(POLICY)
    (root / "keys.yaml").write_text(NOTATION_KEYS)
    config = root / "notation"
    store = config / "truststore" / "x509" / "ca" / "release"
    store.mkdir(parents=True)
    root_pem = make_pki().root.pem()
    for name in ("root.crt", "root.json", "root.yaml"):  # Notation reads any file name in a store
        (store / name).write_bytes(root_pem)
    statement = {
        "name": "all",
        "registryScopes": ["*"],
        "signatureVerification": {"level": "strict"},
        "trustStores": ["ca:release"],
        "trustedIdentities": ["*"],
    }
    document = json.dumps({"version": "1.0", "trustPolicies": [statement]})
    for name in ("trustpolicy.json", "trustpolicy.oci.json"):
        (config / name).write_text(document)
    (config / "config.json").write_text("{}")  # Notation's settings
    (config / "plugins" / "acme").mkdir(parents=True)
    (config / "plugins" / "acme" / "manifest.json").write_text("{}")
    return root


def test_a_notation_configuration_folder_in_the_policy_folder_is_notations(tmp_path: Path) -> None:
    """Issue 25: its JSON and certificate files are read through the notationConfig signer, never as
    policies (root.json, config.json, plugins/ were load errors before), and change the revision."""
    root = _notation_folder(tmp_path)
    policy_set = load_policy_set(root)
    assert policy_set.signers["platform/image-signer"].kind == "notation"
    assert sorted(p.name for p in policy_set.sources) == ["keys.yaml", "policy.yaml"]
    before = policy_set.revision
    (root / "notation" / "trustpolicy.oci.json").write_text(
        (root / "notation" / "trustpolicy.oci.json").read_text().replace('"all"', '"every"')
    )
    assert load_policy_set(root).revision != before


def test_a_policy_file_inside_the_notation_folder_is_a_problem_not_skipped(tmp_path: Path) -> None:
    root = _notation_folder(tmp_path)
    extra = root / "notation" / "more-policies.yaml"
    extra.write_text(POLICY.replace("name: p}", "name: q}"))
    [problem] = problems_of(root)
    assert problem.startswith(f"{extra}: is inside the Notation configuration directory")
    assert "move it out" in problem


def test_a_trustpolicy_named_file_outside_a_notation_folder_is_read_as_a_policy(tmp_path: Path) -> None:
    """Issue 25: a real policy file named trustpolicy.json was silently skipped; now it loads (and a Notation
    trust policy that no notationConfig names is a problem saying how to name it)."""
    (tmp_path / "keys.yaml").write_text(
        "apiVersion: trtguard.dev/v1alpha1\nkind: TrustedKeys\nmetadata: {name: platform}\nspec:\n"
        "  keys:\n    - name: image-signer\n      publicKey: |\n"
        + "".join(
            f"        {line}\n" for line in generate_private_key().public_key().to_pem().decode().splitlines()
        )
    )
    policy = yaml.safe_load(POLICY)
    (tmp_path / "trustpolicy.json").write_text(json.dumps(policy))
    assert [p.name for p in load_policy_set(tmp_path).policies] == ["p"]
    (tmp_path / "notation").mkdir()
    (tmp_path / "notation" / "trustpolicy.json").write_text('{"version": "1.0", "trustPolicies": []}')
    problems = problems_of(tmp_path)
    assert any("notationConfig: {directory: …}" in p for p in problems), problems

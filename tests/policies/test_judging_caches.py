"""Per-admission work cut (issue 31): each table made at load or on first use gives what working it out on
every admission gives, for every input, and stays bounded; a check rewritten to skip the ``Mapping`` ABC's
Python-level test answers as before."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import policies.verified as verified_module
from policies._judging import RULES, _plan
from policies.evaluator import PolicyEvaluator
from policies.loader import CompiledImageRule, CompiledPolicy, load_policy_set
from policies.patterns import matches_any
from policies.verified import VerifiedEvidence
from policies.workload_model._scheduling import _at
from policies.workload_model._sharing import _HOST_CAPABILITIES as HOST_CAPABILITIES
from policies.workload_model._sharing import host_access, turned_on
from tests.policies.conftest import Material, pod
from tests.policies.evaluation import NOW, evaluate, signature_policy
from trtguard.demo.material import make_material
from verifier.base import ImageReference
from verifier.evidence_folder import LocalEvidence

RULES_POLICY = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: many-rules}
spec:
  images:
    - name: tensorrt
      match: ["nvcr.io/nvidia/tensorrt:*", "nvcr.io/nvidia/tensorrt@*"]
      exclude: ["nvcr.io/nvidia/tensorrt:*-dev"]
      requireDigest: true
    - name: inits
      match: ["docker.io/library/*"]
      fields: [initContainer, ephemeralContainer]
      digests: ["sha256:1111111111111111111111111111111111111111111111111111111111111111"]
    - name: containers
      match: ["docker.io/**", "ghcr.io/**"]
      fields: [container]
      requireDigest: true
    - name: volumes
      match: ["registry.example/models/**"]
      fields: [volume]
"""

FIELDS = ("container", "initContainer", "ephemeralContainer", "volume", "modelcar")
REFERENCES = st.builds(
    "{}/{}{}".format,
    st.sampled_from(["nvcr.io", "docker.io", "registry.example", "ghcr.io"]),
    st.sampled_from(["nvidia/tensorrt", "library/busybox", "models/llama", "models/a/b", "other"]),
    st.sampled_from([":24.01", ":24.01-dev", ":latest", "@sha256:" + "2" * 64, ":1@sha256:" + "3" * 64]),
).map(ImageReference.parse)


def _rules_policy() -> CompiledPolicy:
    """The policy of :data:`RULES_POLICY`, loaded afresh (its tables empty)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "rules.yaml"
        path.write_text(RULES_POLICY)
        [policy] = load_policy_set([path]).policies
    return policy


def _uncached(rule: CompiledImageRule, reference: ImageReference, field: str) -> bool:
    """Whether ``rule`` judges ``reference`` in ``field``, worked out from the patterns alone."""
    fields = rule.rule.fields
    judges = fields is None or field in fields or (field == "modelcar" and "container" in fields)
    return judges and matches_any(rule.patterns, reference) and not matches_any(rule.excluded, reference)


_RULES_POLICY = _rules_policy()


@settings(max_examples=300, deadline=None)
@given(asked=st.lists(st.tuples(REFERENCES, st.sampled_from(FIELDS)), min_size=1, max_size=30))
def test_the_rules_for_an_image_are_those_whose_patterns_and_fields_judge_it(
    asked: list[tuple[ImageReference, str]],
) -> None:
    policy = _RULES_POLICY
    for reference, field in [*asked, *asked]:  # the second round answers from the table
        expected = tuple(r for r in policy.image_rules if _uncached(r, reference, field))
        assert policy.rules_for(reference, field) == expected


def test_the_rules_for_table_is_bounded(tmp_path: Path, monkeypatch: object) -> None:
    policy = _rules_policy()
    monkeypatch.setattr("policies.loader._SELECTED_MAX", 3)  # type: ignore[attr-defined]
    references = [ImageReference.parse(f"docker.io/library/app{n}:1") for n in range(10)]
    for reference in references:
        assert policy.rules_for(reference, "container") == (policy.image_rules[2],)
    assert len(policy._rules_for) <= 3
    assert policy.rules_for(references[0], "initContainer") == (policy.image_rules[1],)


def test_an_image_rules_ids_are_made_at_load_as_each_admission_made_them(tmp_path: Path) -> None:
    policies = [*_library(tmp_path), _rules_policy()]
    compiled = [rule for policy in policies for rule in policy.image_rules]
    assert any(rule.needs_digest for rule in compiled) and any(not rule.needs_digest for rule in compiled)
    for rule in compiled:
        rule_id = f"images.{rule.rule.name}"
        needed = (
            ("digests", rule.rule.digests is not None),
            ("signatures", rule.rule.signatures is not None),
            ("attestations", bool(rule.rule.attestations)),
        )
        assert rule.rule_id == rule_id
        assert rule.needs_digest == tuple(f"{rule_id}.{name}" for name, on in needed if on)


def _library(root: Path) -> tuple[CompiledPolicy, ...]:
    """The bundled library policies, with the demo's keys (as ``serve`` loads them)."""
    return load_policy_set(make_material(root).policies).policies


def test_each_policys_plan_is_the_rules_whose_guards_hold(tmp_path: Path) -> None:
    for policy in (*_library(tmp_path), _rules_policy()):
        plan = _plan(policy)
        assert _plan(policy) is plan  # made once
        for part, planned in (
            (RULES.workload, plan.workload),
            (RULES.images, plan.images),
            (RULES.engines, plan.engines),
            (RULES.afterwards, plan.afterwards),
        ):
            assert planned == tuple(rule for rule in part if rule.applies(policy))


def test_the_answers_by_key_names_are_those_made_fresh(material: Material, monkeypatch: object) -> None:
    names = ["platform/image-signer", "platform/second-signer"]
    policy_set = load_policy_set(
        [material.policy(signature_policy(), "p.yaml"), material.keys_file("image-signer", "second-signer")]
    )
    cached = VerifiedEvidence(
        policy_set, LocalEvidence(material.attestations), verified_module.CacheSettings()
    )
    monkeypatch.setattr(verified_module, "_BY_KEYS_MAX", 2)  # type: ignore[attr-defined]
    asked = [names, names[:1], names[1:], [*reversed(names)], ["platform/unknown", names[0]], names]
    for keys in asked:
        fresh = VerifiedEvidence(
            policy_set, LocalEvidence(material.attestations), verified_module.CacheSettings()
        )
        assert cached.signer_records(keys) == fresh.signer_records(keys)
        assert cached.signing_fix(keys) == fresh.signing_fix(keys)
        assert len(cached._signer_records) <= 2 and len(cached._signing_fixes) <= 2


def test_a_build_manifests_record_is_the_same_on_every_admission(material: Material) -> None:
    engine = material.engine("llama")
    policy = material.policy(
        """
        apiVersion: trtguard.dev/v1alpha1
        kind: InferencePolicy
        metadata: {name: models}
        spec:
          models:
            buildManifest: {keys: [platform/build-signer]}
        """
    )
    evaluator = PolicyEvaluator(
        load_policy_set([policy, material.keys_file("build-signer")]),
        LocalEvidence(material.attestations),
        clock=lambda: NOW,
    )
    workload = pod(engine=engine)
    first, second = evaluate(evaluator, workload), evaluate(evaluator, workload)
    [record] = first.engines[0].build_manifests
    assert second.engines[0].build_manifests == (record,)
    # the same record as one a fresh evaluator makes
    fresh = PolicyEvaluator(
        load_policy_set([policy, material.keys_file("build-signer")]),
        LocalEvidence(material.attestations),
        clock=lambda: NOW,
    )
    assert asyncio.run(fresh.evaluate(workload)).engines[0].build_manifests == (record,)


# Values a pod spec field may hold, a read-only Mapping that is no dict among them.
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from(["", "SYS_ADMIN", "cap_sys_admin", "x"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["windowsOptions", "hostProcess", "privileged", "capabilities", "add", "k"]),
            inner,
            max_size=3,
        )
        | st.dictionaries(st.sampled_from(["hostProcess", "add", "k"]), inner, max_size=2).map(
            MappingProxyType
        )
    ),
    max_leaves=12,
)


def _host_access_before(container: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """``host_access`` as it was written before issue 31 (every check against ``Mapping``)."""

    def host_process(context: Any) -> bool:
        options = context.get("windowsOptions") if isinstance(context, Mapping) else None
        return isinstance(options, Mapping) and turned_on(options.get("hostProcess"))

    if turned_on(pod.get("hostPID")) or host_process(pod.get("securityContext")):
        return True
    context = container.get("securityContext")
    if not isinstance(context, Mapping):
        return False
    if turned_on(context.get("privileged")) or host_process(context):
        return True
    capabilities = context.get("capabilities")
    added = capabilities.get("add") if isinstance(capabilities, Mapping) else None
    return isinstance(added, list) and any(
        isinstance(name, str) and name.upper().removeprefix("CAP_") in HOST_CAPABILITIES for name in added
    )


@settings(max_examples=400, deadline=None)
@given(container=JSON, pod=JSON)
def test_host_access_answers_as_before(container: Any, pod: Any) -> None:
    container = {"securityContext": container}
    pod = {"securityContext": pod, "hostPID": None}
    assert host_access(container, pod) == _host_access_before(container, pod)


@settings(max_examples=400, deadline=None)
@given(data=JSON, path=st.sampled_from(["k", "k.k", "add.k.hostProcess", "windowsOptions.hostProcess"]))
def test_a_dotted_path_is_read_as_before(data: Any, path: str) -> None:
    value: Any = {"k": data, "add": data, "windowsOptions": data}
    expected: Any = value
    for key in path.split("."):
        expected = expected.get(key) if isinstance(expected, Mapping) else None
    assert _at(value, path) == expected

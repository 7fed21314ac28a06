"""Per-admission work cut (issue 31): each table made at load or on first use gives what working it out on
every admission gives, for every input, and stays bounded; a check rewritten to skip the ``Mapping`` ABC's
Python-level test answers as before."""

from __future__ import annotations

import asyncio
import fnmatch
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
from policies.matching import _labels_match, selection, selects, selects_by_requester
from policies.patterns import ImagePattern, matches_any
from policies.requesters import Requester, RequesterSet, in_set
from policies.schema import ResourceFilter
from policies.verified import VerifiedEvidence
from policies.workload_model import Workload, identify, named_kinds
from policies.workload_model._scheduling import _at
from policies.workload_model._sharing import _HOST_CAPABILITIES as HOST_CAPABILITIES
from policies.workload_model._sharing import (
    STORAGE,
    PodGraph,
    host_access,
    host_path_access,
    outlives,
    read_only_volume,
    turned_on,
)
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


# Filters of every shape `selection` reads (namespaces, kinds, labels, requesters), in match and exclude.
FILTERS = (
    "{}",
    '{namespaces: ["prod*", "team-?"]}',
    "{kinds: [Pod, Deployment, Job.batch.volcano.sh]}",
    "{labels: {matchLabels: {tier: gpu}, matchExpressions: [{key: env, operator: NotIn, values: [dev]}]}}",
    '{namespaces: ["prod"], requesters: {usernames: ["alice", "ci:*"]}}',
    "{requesters: {groups: [admins]}}",
    '{kinds: [Job], labels: {matchExpressions: [{key: tier, operator: Exists}]}, namespaces: ["*"]}',
)


def _filter_policies() -> tuple[CompiledPolicy, ...]:
    """One policy per pair of a match and an exclude (or none) of :data:`FILTERS`."""
    documents = []
    for m, match in enumerate(FILTERS):
        for e, exclude in enumerate((None, *FILTERS[1:])):
            exclusion = f"\n  exclude: {exclude}" if exclude is not None else ""
            documents.append(
                f"apiVersion: trtguard.dev/v1alpha1\nkind: InferencePolicy\nmetadata: {{name: f{m}-{e}}}\n"
                f"spec:\n  match: {match}{exclusion}\n  images: [{{name: any, match: ['docker.io/**']}}]\n"
            )
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "filters.yaml"
        path.write_text("---\n".join(documents))
        return load_policy_set([path]).policies


_FILTER_POLICIES = _filter_policies()


def _selection_before(policy: CompiledPolicy, workload: Workload, requester: Requester | None) -> bool | None:
    """``selection`` as it was written before issue 31's second pass (every term read from the document)."""

    def selects(terms: ResourceFilter, *, empty: bool) -> bool:
        count = 0
        if terms.namespaces is not None:
            count += 1
            if not any(fnmatch.fnmatchcase(workload.namespace or "default", g) for g in terms.namespaces):
                return False
        if terms.kinds is not None:
            count += 1
            named = any((workload.group, workload.kind) in named_kinds(k) for k in terms.kinds)
            if not (workload.known_kind and named):
                return False
        if terms.labels is not None:
            count += 1
            if not _labels_match(terms.labels, workload.labels):
                return False
        return empty if count == 0 else True

    def term(found: RequesterSet | None) -> bool | None:
        return True if found is None else None if requester is None else in_set(requester, found)

    spec = policy.document.spec
    match, exclude = spec.match, spec.exclude
    chosen = selects(match, empty=True) and (exclude is None or not selects(exclude, empty=False))
    if not chosen and (exclude is None or exclude.requesters is None or not selects(match, empty=True)):
        return False
    matched = term(match.requesters)
    if matched is False:
        return False
    excluded: bool | None = False
    if exclude is not None and exclude.requesters is not None:
        others = (exclude.namespaces, exclude.kinds, exclude.labels)
        if all(t is None for t in others) or selects(exclude, empty=False):
            excluded = term(exclude.requesters)
    if excluded is True:
        return False
    return None if matched is None or excluded is None else True


WORKLOADS = st.builds(
    lambda namespace, kind, labels: identify(
        {"apiVersion": kind[0], "kind": kind[1], "metadata": {"name": "w", "labels": labels}},
        namespace=namespace,
    ),
    st.sampled_from([None, "prod", "prod-eu", "team-a", "team-ab", "dev", "default"]),
    st.sampled_from([("v1", "Pod"), ("apps/v1", "Deployment"), ("batch/v1", "Job"), ("x.io/v1", "Pod")]),
    st.dictionaries(st.sampled_from(["tier", "env"]), st.sampled_from(["gpu", "dev", "cpu"]), max_size=2),
)
REQUESTERS = st.none() | st.builds(
    Requester,
    st.sampled_from(["alice", "bob", "ci:deploy", "system:serviceaccount:prod:sa"]),
    st.lists(st.sampled_from(["admins", "devs"]), max_size=2, unique=True).map(tuple),
)


@settings(max_examples=300, deadline=None)
@given(workload=WORKLOADS, requester=REQUESTERS)
def test_which_policies_select_a_workload_is_what_the_documents_say(
    workload: Workload, requester: Requester | None
) -> None:
    for policy in _FILTER_POLICIES:
        assert selection(policy, workload, requester) == _selection_before(policy, workload, requester)
        if not selects_by_requester(policy):  # then the answer is True or False whoever asks
            assert selects(policy, workload) is (_selection_before(policy, workload, None) is True)


def test_the_fields_read_at_load_are_the_documents(tmp_path: Path) -> None:
    for policy in (*_library(tmp_path), _rules_policy(), *_FILTER_POLICIES):
        document = policy.document
        assert policy.name == document.metadata.name and policy.spec is document.spec
        models = document.spec.models
        engines = models.engines if models is not None else None
        assert policy.engine_patterns == (
            tuple(ImagePattern.compile(text) for text in engines) if engines is not None else None
        )
        for rule in policy.image_rules:
            assert (rule.require_digest, rule.pin_digest) == (rule.rule.require_digest, rule.rule.pin_digest)
            assert rule.digests is rule.rule.digests and rule.signatures is rule.rule.signatures


@settings(max_examples=400, deadline=None)
@given(containers=st.lists(JSON, min_size=1, max_size=3), pod_context=JSON, host_pid=JSON)
def test_a_pods_graph_gives_each_container_the_host_access_host_access_gives(
    containers: list[Any], pod_context: Any, host_pid: Any
) -> None:
    pod = {"securityContext": pod_context, "hostPID": host_pid}
    graph = PodGraph("spec", pod)
    for number, context in enumerate(containers):
        graph.container(number, {"securityContext": context}, pod)
    host = [n for n, c in enumerate(containers) if _host_access_before({"securityContext": c}, pod)]
    assert graph.sharing(len(containers), []).host == host


VOLUMES = st.fixed_dictionaries(
    {"name": st.just("v")},
    optional={
        "emptyDir": st.just({}),
        "hostPath": st.fixed_dictionaries(
            {"path": st.just("/x")}, optional={"type": st.sampled_from(["", "File", "Directory", "Socket"])}
        ),
        "persistentVolumeClaim": st.fixed_dictionaries(
            {"claimName": st.just("c")}, optional={"readOnly": st.booleans()}
        ),
        "image": st.just({"reference": "r"}),
        "configMap": st.just({"name": "m"}),
    },
)


@settings(max_examples=300, deadline=None)
@given(declarations=st.lists(VOLUMES, min_size=1, max_size=2), modes=st.lists(st.booleans(), max_size=3))
def test_one_declaration_of_a_volume_shares_what_the_fold_over_declarations_gives(
    declarations: list[dict[str, Any]], modes: list[bool]
) -> None:
    graph = PodGraph("spec", {})
    for declaration in declarations:
        graph.volume("v", declaration)
    [(_, declared)] = graph._declared.items()
    made = graph._volume("v", declared)
    # the fold, as every declaration count took it before issue 31's second pass
    writable = not all(read_only_volume(v) for v in declared)
    storage = any(outlives(v) for v in declared)
    assert made.writable == writable
    assert made.channel == (STORAGE if storage else "spec\0v" if writable else None)
    for mode in ("recursive", "writable"):
        access = max((host_path_access(v, mode) for v in declared), key=["none", "reads", "full"].index)
        assert (made.host_read_only if mode == "recursive" else made.host_writable) == access
    assert graph.sharing(
        len(modes), [(n, "v", "writable" if m else "recursive") for n, m in enumerate(modes)]
    )

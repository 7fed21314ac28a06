"""policies.matching: which policies select a workload (namespaces, kinds, labels, exclude)."""

from __future__ import annotations

import fnmatch
import json

from tests.policies.conftest import Material, pod
from tests.policies.evaluation import engine_for, evaluate, images_policy


def test_match_and_exclude_by_namespace_kind_and_labels(material: Material) -> None:
    policy = images_policy().replace(
        'match: {namespaces: ["prod*"]}',
        'match: {namespaces: ["prod*"], kinds: [Pod], '
        "labels: {matchExpressions: [{key: tier, operator: In, values: [gpu]}]}}\n"
        "  exclude: {labels: {matchLabels: {experimental: 'true'}}}",
    )
    engine = engine_for(material, policy)
    bad = ("docker.io/library/nginx:1",)
    assert not evaluate(engine, pod(images=bad, labels={"tier": "gpu"})).allowed
    assert evaluate(engine, pod(images=bad, labels={"tier": "cpu"})).matched_policies == ()
    assert evaluate(engine, pod(images=bad, namespace="dev", labels={"tier": "gpu"})).matched_policies == ()
    excluded = evaluate(engine, pod(images=bad, labels={"tier": "gpu", "experimental": "true"}))
    assert excluded.matched_policies == ()
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "prod", "labels": {"tier": "gpu"}},
        "spec": {"template": {"spec": pod(images=bad)["spec"]}},
    }
    assert evaluate(engine, deployment).matched_policies == ()


def test_resource_without_namespace_counts_as_default(material: Material) -> None:
    policy = images_policy().replace('namespaces: ["prod*"]', 'namespaces: ["default"]')
    decision = evaluate(engine_for(material, policy), pod(namespace=None, images=("docker.io/library/x:1",)))
    assert decision.matched_policies == ("images",)


def test_several_namespace_globs_select_as_fnmatch_does(material: Material) -> None:
    # The globs of one policy are compiled into one regex: each namespace must be selected exactly when
    # fnmatch matches one of them (character classes, '?', '*' and dots included) and no exclude does.
    globs, excluded = ["prod-*", "team-?", "gpu[0-9]", "a.b"], ["prod-tmp*"]
    policy = images_policy().replace(
        'match: {namespaces: ["prod*"]}',
        f"match: {{namespaces: {json.dumps(globs)}}}\n  exclude: {{namespaces: {json.dumps(excluded)}}}",
    )
    engine = engine_for(material, policy)
    names = ["prod-eu", "prod-", "prod", "team-a", "team-ab", "gpu7", "gpux", "a.b", "axb", "prod-tmp1"]
    for namespace in names:
        expected = any(fnmatch.fnmatchcase(namespace, g) for g in globs) and not any(
            fnmatch.fnmatchcase(namespace, g) for g in excluded
        )
        decision = evaluate(engine, pod(namespace=namespace, images=("docker.io/library/x:1",)))
        assert decision.matched_policies == (("images",) if expected else ()), namespace

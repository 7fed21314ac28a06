"""Who deploys: spec.requester (policies.rules._requester), match/exclude requesters (policies.matching) and
the requester model (policies.requesters), through the evaluator."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from policies.evaluator import PolicyEvaluator
from policies.loader import PolicyLoadError, load_policy_set
from policies.requesters import Requester, RequesterSet, glob_matches, in_set
from policies.results import Action, Decision
from tests.policies.conftest import RUNTIME, Material, pod
from verifier.evidence_folder import LocalEvidence

ARGOCD = Requester.impersonated("system:serviceaccount:argocd:argocd-application-controller")
ALICE = Requester.impersonated("alice@example.com", ("ml-engineers",))

DEPLOYERS = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: deployers}
spec:
  match: {namespaces: ["prod-*"]}
  onError: ONERROR
  requester:
    allowed:
      serviceAccounts: ["argocd/*"]
      groups: ["release-managers"]
"""

SIGNED_FOR_ENGINEERS = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: engineers}
spec:
  match:
    namespaces: ["prod-*"]
    requesters: {groups: [ml-engineers]}
  exclude:
    requesters: {usernames: ["break-glass:*"]}
  images:
    - name: runtime
      match: ["*"]
      digests: ['sha256:EMPTY']
""".replace("EMPTY", "0" * 64)


def engine(material: Material, text: str, on_error: str = "Deny") -> PolicyEvaluator:
    path = material.policy(text.replace("ONERROR", on_error))
    return PolicyEvaluator(load_policy_set([path]), LocalEvidence(material.attestations))


def judge(
    engine: PolicyEvaluator, requester: Requester | None, obj: dict[str, Any] | None = None, **kwargs: Any
) -> Decision:
    obj = obj or pod(namespace="prod-vision")
    return asyncio.run(engine.evaluate(obj, requester=requester, **kwargs))


def test_service_account_globs_stop_at_colons() -> None:
    allowed = RequesterSet(usernames=["system:serviceaccount:argocd:*"])
    assert in_set(ARGOCD, allowed)
    assert not in_set(Requester("system:serviceaccount:argocd:x:y"), allowed)
    assert not in_set(Requester("system:serviceaccount:argocd-evil:x"), allowed)
    accounts = RequesterSet(service_accounts=["argocd/*"])
    assert in_set(ARGOCD, accounts)
    assert not in_set(Requester("system:serviceaccount:argocd2:controller"), accounts)
    assert not in_set(Requester("argocd/controller"), accounts)  # a username that looks like one is not
    assert glob_matches("oidc:*@example.com", "oidc:alice@example.com")
    assert not glob_matches("a[b]", "ab")  # brackets are literal


def test_impersonation_fills_in_groups_as_the_api_server_does() -> None:
    assert ARGOCD.groups == (
        "system:serviceaccounts",
        "system:serviceaccounts:argocd",
        "system:authenticated",
    )
    assert ALICE.groups == ("ml-engineers", "system:authenticated")
    assert Requester.impersonated("system:anonymous").groups == ()


def test_a_requester_set_needs_a_term_and_accounts_need_a_namespace() -> None:
    with pytest.raises(ValueError, match="give usernames, groups or serviceAccounts"):
        RequesterSet()
    with pytest.raises(ValueError, match="is not 'namespace/name'"):
        RequesterSet(service_accounts=["argocd"])


def test_only_allowed_requesters_may_deploy(material: Material) -> None:
    deployers = engine(material, DEPLOYERS)
    assert judge(deployers, ARGOCD).allowed
    assert judge(deployers, Requester.impersonated("bob", ("release-managers",))).allowed
    denied = judge(deployers, ALICE)
    [violation] = denied.violations
    assert (violation.policy, violation.rule, violation.action, violation.error) == (
        "deployers",
        "requester",
        Action.DENY,
        False,
    )
    # the denial names the requester and who is allowed
    assert "requester alice@example.com (groups: ml-engineers, system:authenticated)" in violation.message
    assert "service accounts argocd/*" in violation.message
    assert judge(deployers, ALICE, pod(namespace="staging")).allowed  # not a prod-* namespace


@pytest.mark.parametrize("on_error", ["Deny", "Warn"])
def test_an_unknown_requester_is_unverifiable_never_passed(material: Material, on_error: str) -> None:
    decision = judge(engine(material, DEPLOYERS, on_error), None)
    [violation] = decision.violations
    assert (violation.rule, violation.error, violation.action) == ("requester", True, Action(on_error))
    assert "the requester is unknown" in violation.message
    assert decision.allowed == (on_error == "Warn")


def test_an_update_that_changes_nothing_is_not_judged(material: Material) -> None:
    deployers = engine(material, DEPLOYERS)
    old = pod(namespace="prod-vision")
    old["metadata"]["finalizers"] = ["example.com/cleanup"]
    new = copy.deepcopy(old)
    new["metadata"]["finalizers"] = []  # a controller removing its finalizer
    assert judge(
        deployers, Requester.impersonated("system:serviceaccount:kube-system:gc"), new, old=old
    ).allowed
    new["spec"]["containers"][0]["env"] = [{"name": "DEBUG", "value": "1"}]
    assert not judge(deployers, ALICE, new, old=old).allowed


@pytest.mark.parametrize("before", [None, {}])
def test_kubectls_last_applied_annotation_alone_is_no_change(material: Material, before: Any) -> None:
    # Issue 24, item 8: an object without annotations, applied with kubectl apply, gets only this
    # annotation; absent and empty annotations are the same, so nothing changed for the rule to judge.
    deployers = engine(material, DEPLOYERS)
    old = pod(namespace="prod-vision")
    if before is not None:
        old["metadata"]["annotations"] = before
        old["metadata"]["labels"] = {}
    new = copy.deepcopy(old)
    new["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": '{"kind":"Pod"}'}
    new["metadata"].pop("labels", None)
    assert judge(deployers, ALICE, new, old=old).allowed
    new["metadata"]["annotations"]["team"] = "vision"  # any other annotation is a change
    assert not judge(deployers, ALICE, new, old=old).allowed


def test_an_update_of_a_template_outside_spec_is_judged(material: Material) -> None:
    """A PodTemplate keeps its pod at top-level ``template``: changing its image there is a change."""
    deployers = engine(material, DEPLOYERS)
    old: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": "t", "namespace": "prod-vision"},
        "template": {"spec": pod(namespace="prod-vision")["spec"]},
    }
    new = copy.deepcopy(old)
    new["template"]["spec"]["containers"][0]["image"] = "registry.example.com/other@sha256:" + "1" * 64
    assert not judge(deployers, ALICE, new, old=old).allowed
    new = copy.deepcopy(old)
    new["metadata"]["finalizers"] = ["example.com/cleanup"]
    assert judge(deployers, ALICE, new, old=old).allowed


def test_policies_can_select_by_requester(material: Material) -> None:
    engineers = engine(material, SIGNED_FOR_ENGINEERS)
    assert [v.rule for v in judge(engineers, ALICE).violations] == ["images.runtime.digests"]
    assert judge(engineers, Requester.impersonated("bob")).allowed  # not an ml-engineer: not selected
    excluded = Requester.impersonated("break-glass:oncall", ("ml-engineers",))
    assert judge(engineers, excluded).allowed


def test_a_policy_selecting_by_requester_is_unverifiable_when_the_requester_is_unknown(
    material: Material,
) -> None:
    decision = judge(engine(material, SIGNED_FOR_ENGINEERS), None)
    [violation] = decision.violations
    assert (violation.rule, violation.error, violation.action) == (
        "images.runtime.digests",
        True,
        Action.DENY,
    )
    assert "applies to some requesters only, and the requester is unknown" in violation.message


def test_exclude_by_requester_needs_its_other_terms(material: Material) -> None:
    text = SIGNED_FOR_ENGINEERS.replace(
        '    requesters: {usernames: ["break-glass:*"]}',
        '    requesters: {usernames: ["break-glass:*"]}\n    namespaces: ["prod-lab"]',
    )
    excluded = Requester.impersonated("break-glass:oncall", ("ml-engineers",))
    assert not judge(engine(material, text), excluded).allowed  # prod-vision is not prod-lab
    assert judge(engine(material, text), excluded, pod(namespace="prod-lab")).allowed


def test_a_requester_selected_policy_judges_the_whole_object_on_update(material: Material) -> None:
    # the old object may have been admitted for a requester the policy left alone
    engineers = engine(material, SIGNED_FOR_ENGINEERS)
    old = pod(namespace="prod-vision", images=(RUNTIME,))
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"touched": "yes"}
    assert [v.rule for v in judge(engineers, ALICE, new, old=old).violations] == ["images.runtime.digests"]


def test_a_policy_of_requester_rules_alone_loads_and_null_is_refused(material: Material) -> None:
    assert load_policy_set([material.policy(DEPLOYERS.replace("ONERROR", "Deny"))]).policies
    broken = DEPLOYERS.replace("ONERROR", "Deny").replace(
        '      groups: ["release-managers"]\n', "      groups:\n"
    )
    with pytest.raises(PolicyLoadError, match="null is not allowed"):
        load_policy_set([material.policy(broken, "broken.yaml")])

"""webhook/_wire.py: lenient request parsing, strict responses, ``?timeout=`` durations."""

from __future__ import annotations

import json

import pytest

from webhook._wire import (
    MAX_CAUSES,
    MAX_WARNING_CHARS,
    ReviewError,
    allow_response,
    deny_response,
    encode,
    parse_review,
    parse_timeout,
    short_warnings,
)


def _review(**request: object) -> bytes:
    base: dict[str, object] = {
        "uid": "u-1",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "CREATE",
    }
    base.update(request)
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": base}
    ).encode()


def test_minimal_request_with_every_optional_field_absent() -> None:
    request = parse_review(_review())
    assert request.uid == "u-1"
    assert str(request.kind) == "v1/Pod"
    assert request.kind.api_version == "v1"
    assert request.operation == "CREATE"
    assert (request.name, request.namespace, request.sub_resource, request.username) == (
        None,
        None,
        None,
        None,
    )
    assert request.object is None and request.old_object is None
    assert request.dry_run is False


def test_nulls_and_empty_strings_mean_absent() -> None:
    request = parse_review(
        _review(dryRun=None, name="", namespace=None, object=None, oldObject=None, subResource="")
    )
    assert request.dry_run is False
    assert request.name is None and request.namespace is None and request.sub_resource is None


def test_full_request() -> None:
    request = parse_review(
        _review(
            kind={"group": "apps", "version": "v1", "kind": "Deployment"},
            requestKind={"group": "apps", "version": "v1beta2", "kind": "Deployment"},
            resource={"group": "apps", "version": "v1", "resource": "deployments"},
            operation="UPDATE",
            name="d",
            namespace="prod",
            userInfo={"username": "alice", "groups": ["sre", "system:authenticated"], "extra": {"x": ["y"]}},
            object={"kind": "Deployment"},
            oldObject={"kind": "Deployment"},
            dryRun=True,
            unknownField={"ignored": True},
        )
    )
    assert request.kind.api_version == "apps/v1"
    assert request.username == "alice"
    assert request.groups == ("sre", "system:authenticated")
    assert request.dry_run is True
    assert request.object == {"kind": "Deployment"} and request.old_object == {"kind": "Deployment"}


@pytest.mark.parametrize("groups", [["sre", 5], "sre", {"sre": True}])
def test_groups_that_are_not_a_list_of_strings_are_refused(groups: object) -> None:
    # Policies select and allow requesters by group: a group dropped or misread could select no policy.
    with pytest.raises(ReviewError, match=r"request\.userInfo\.groups is not a list of strings") as raised:
        parse_review(_review(userInfo={"username": "alice", "groups": groups}))
    assert raised.value.uid is not None and raised.value.request is not None


def test_no_user_info_leaves_the_requester_unknown() -> None:
    request = parse_review(_review(userInfo=None))
    assert request.username is None and request.groups == ()


def test_a_request_refused_for_its_groups_is_recorded_with_the_groups_it_had() -> None:
    # The decision log records the requester's groups: the refused request keeps the strings it carried.
    with pytest.raises(ReviewError, match=r"userInfo\.groups is not a list of strings") as raised:
        parse_review(_review(userInfo={"username": "alice", "groups": ["sre", 5]}))
    assert raised.value.request is not None and raised.value.request.groups == ("sre",)


def test_old_object_is_ignored_on_create() -> None:
    # A sender put a string there (the connaisseur CronJob fixture): nothing on a CREATE reads it.
    assert parse_review(_review(oldObject="None")).old_object is None
    with pytest.raises(ReviewError, match="oldObject is a string"):
        parse_review(_review(operation="UPDATE", oldObject="None"))


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        (b"", 400, "not JSON"),
        (b"\xff\xfe", 400, "not JSON"),
        (b"null", 400, "JSON null"),
        (b"42", 400, "a number"),
        (b'"x"', 400, "a string"),
        (b"{}", 422, "expected apiVersion"),
        (
            json.dumps(
                {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {}}
            ).encode(),
            422,
            "admission.k8s.io/v1beta1",
        ),
        (
            json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionRequest"}).encode(),
            422,
            "'AdmissionRequest'",
        ),
        (
            json.dumps(
                {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": []}
            ).encode(),
            422,
            "request is an array",
        ),
        (_review(uid=""), 422, "uid is missing"),
        (_review(uid=7), 422, "uid is missing"),
        (_review(operation="PATCH"), 422, "request.operation is 'PATCH'"),
        (_review(operation=[]), 422, "request.operation is []"),
        (_review(operation={"CREATE": 1}), 422, "request.operation is {'CREATE': 1}"),
        (_review(kind=None), 422, "request.kind is missing"),
        (_review(kind={"group": "", "version": "v1"}), 422, "request.kind.kind is missing"),
        (_review(kind="Pod"), 422, "request.kind is a string"),
        # The record's api_version is group/version: a "/" inside either would name another group.
        (_review(kind={"group": "batch/x", "version": "v1", "kind": "Job"}), 422, "cannot contain '/'"),
        (_review(kind={"group": "batch", "version": "x/v1", "kind": "Job"}), 422, "cannot contain '/'"),
        (_review(object=[1]), 422, "request.object is an array"),
        (_review(dryRun="true"), 422, "request.dryRun is a string"),
        (_review(name=5), 422, "request.name is a number"),
    ],
)
def test_not_an_answerable_review(body: bytes, status: int, fragment: str) -> None:
    with pytest.raises(ReviewError) as raised:
        parse_review(body)
    assert raised.value.status == status
    assert fragment in raised.value.diagnostics()


@pytest.mark.parametrize("body", [b"[" * 50_000, b'{"a":' * 50_000])
def test_json_nested_too_deeply_is_a_bad_request(body: bytes) -> None:
    with pytest.raises(ReviewError) as raised:
        parse_review(body)
    assert raised.value.status == 400
    assert raised.value.uid is None
    assert "nested too deeply" in raised.value.diagnostics()


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"operation": "PATCH"}, "request.operation is 'PATCH'"),
        ({"dryRun": "true"}, "request.dryRun is a string"),
        ({"requestKind": "apps/v1/Deployment"}, "request.requestKind is a string"),
        ({"requestKind": {"group": "apps", "version": "v1"}}, "request.requestKind.kind is missing"),
        (
            {"resource": {"group": "", "version": "v1", "resource": ["pods"]}},
            "request.resource.resource is an",
        ),
        ({"kind": None}, "request.kind is missing"),
        ({"object": [1]}, "request.object is an array"),
    ],
)
def test_a_malformed_request_with_a_uid_names_it(fields: dict[str, object], fragment: str) -> None:
    """Once the uid is read, the webhook can answer: the error carries the uid for a denial."""
    with pytest.raises(ReviewError) as raised:
        parse_review(_review(**fields))
    assert raised.value.uid == "u-1"
    assert fragment in str(raised.value)


@pytest.mark.parametrize(
    "document",
    [{}, {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": ""}}],
)
def test_an_error_before_the_uid_carries_none(document: dict[str, object]) -> None:
    with pytest.raises(ReviewError) as raised:
        parse_review(json.dumps(document).encode())
    assert raised.value.uid is None
    assert raised.value.status == 422


def test_allow_response_is_exactly_the_protocol() -> None:
    review = allow_response("u-1", warnings=["a", "a", "b"], audit_annotations={"decision": "allow"})
    assert review == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {
            "uid": "u-1",
            "allowed": True,
            "warnings": ["a", "b"],
            "auditAnnotations": {"decision": "allow"},
        },
    }
    assert json.loads(encode(review)) == review


def test_deny_response_carries_a_one_line_status_and_causes() -> None:
    review = deny_response(
        "u-2",
        message="first line\nsecond   line",
        reason="PolicyViolation",
        causes=[("spec.containers[0].image", "not pinned")],
    )
    response = review["response"]
    assert response["allowed"] is False
    assert "patch" not in response and "patchType" not in response
    assert response["status"] == {
        "metadata": {},
        "status": "Failure",
        "code": 403,
        "reason": "PolicyViolation",
        "message": "first line second line",
        "details": {
            "causes": [
                {
                    "reason": "FieldValueForbidden",
                    "field": "spec.containers[0].image",
                    "message": "not pinned",
                }
            ]
        },
    }


def test_deny_causes_are_capped_and_the_rest_counted() -> None:
    # Re-attack F1: 99,800 violations made 99,800 causes, a 70 MB response.
    causes = [(f"spec.containers[{i}].image", f"violation {i}") for i in range(120)]
    listed = deny_response("u", message="m", reason="PolicyViolation", causes=causes)["response"]["status"]
    details = listed["details"]["causes"]
    assert len(details) == MAX_CAUSES == 50
    assert [c["field"] for c in details[:-1]] == [field for field, _ in causes[:49]]
    assert details[-1]["message"] == "and 71 more violations: see the decision log"
    exact = deny_response("u", message="m", reason="PolicyViolation", causes=causes[:50])["response"]
    assert [c["message"] for c in exact["status"]["details"]["causes"]] == [t for _, t in causes[:50]]


def test_deny_message_is_capped_and_empty_message_falls_back_to_reason() -> None:
    long = deny_response("u", message="x" * 5000, reason="PolicyViolation")["response"]["status"]["message"]
    assert len(long) == 1000 and long.endswith("…")
    assert deny_response("u", message="  ", reason="EvaluationTimeout")["response"]["status"]["message"] == (
        "EvaluationTimeout"
    )


def test_a_denial_below_400_is_refused() -> None:
    with pytest.raises(ValueError, match=">= 400"):
        deny_response("u", message="m", reason="r", code=200)


def test_audit_annotation_keys_must_form_a_qualified_name() -> None:
    with pytest.raises(ValueError, match="qualified-name"):
        allow_response("u", audit_annotations={"bad key": "v"})


def test_warnings_are_short_unique_and_few() -> None:
    warnings = short_warnings(["w" * 300, "w" * 300, "two\nlines", *[f"n{i}" for i in range(40)]])
    assert warnings[0] == "w" * (MAX_WARNING_CHARS - 1) + "…"
    assert warnings[1] == "two lines"
    assert len(warnings) == 20
    assert warnings[-1] == "23 more warnings: see the decision log"
    assert all(len(w) <= MAX_WARNING_CHARS for w in warnings)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("10s", 10.0),
        ("30s", 30.0),
        ("1m30s", 90.0),
        ("1.5s", 1.5),
        ("500ms", 0.5),
        ("2h", 7200.0),
        ("0s", 0.0),
    ],
)
def test_parse_timeout_reads_go_durations(text: str, seconds: float) -> None:
    assert parse_timeout(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", [None, "", "10", "s", "10x", "-5s", "10s junk", "1e3s"])
def test_parse_timeout_ignores_anything_else(text: str | None) -> None:
    assert parse_timeout(text) is None

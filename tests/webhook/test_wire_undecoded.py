"""webhook/_wire.py: a body json.loads refuses only for its depth or a too-long integer, uid readable, is an
error that carries the uid (a denial), named; without a readable uid it stays a 400 (a failed call)."""

from __future__ import annotations

import json

import pytest

from webhook._wire import ReviewError, parse_review

NESTED = b"[" * 5000 + b"]" * 5000
LONG = b"9" * 4301


def _body(value: bytes, *, api_version: str = "admission.k8s.io/v1", uid: str = "u-1") -> bytes:
    # In the API server's order: request.uid first, the envelope's scalars before the object.
    request = {
        "uid": uid,
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "name": "p",
        "namespace": "prod",
        "operation": "CREATE",
        "userInfo": {"username": "me", "groups": ["g"]},
        "object": {"spec": "HERE"},
        "oldObject": None,
        "dryRun": True,
    }
    body = json.dumps({"kind": "AdmissionReview", "apiVersion": api_version, "request": request})
    return body.encode().replace(b'"HERE"', value)


def _refused(body: bytes) -> ReviewError:
    with pytest.raises(ReviewError) as raised:
        parse_review(body)
    return raised.value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (NESTED, "request.object is nested too deeply to judge (limit about 1000 levels)"),
        (LONG, "request.object holds a number of more than 4300 digits, too long to judge"),
        (b"[-" + LONG + b"]", "request.object holds a number of more than 4300 digits, too long to judge"),
    ],
)
def test_a_readable_uid_makes_it_a_denial(value: bytes, message: str) -> None:
    error = _refused(_body(value))
    assert (error.uid, error.status, str(error)) == ("u-1", 400, message)
    assert error.request is not None
    assert (error.request.uid, str(error.request.kind), error.request.operation) == (
        "u-1",
        "v1/Pod",
        "CREATE",
    )
    assert (error.request.name, error.request.namespace, error.request.username) == ("p", "prod", "me")
    assert (error.request.groups, error.request.object, error.request.dry_run) == (("g",), None, True)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (_body(NESTED, uid=""), "request body is JSON nested too deeply to be an AdmissionReview"),
        (_body(NESTED, api_version="v1"), "request body is JSON nested too deeply to be an AdmissionReview"),
        (b'{"request": {"uid": "u-1"}, "x": ' + NESTED + b"}", "nested too deeply to be an AdmissionReview"),
        (_body(LONG, uid=""), "request body is not JSON: Exceeds the limit (4300 digits)"),
        (_body(LONG, api_version="v1"), "request body is not JSON: Exceeds the limit (4300 digits)"),
        # Past the part of the body read: a failed call, as before.
        (
            _body(b'["' + b"x" * 70_000 + b'", ' + NESTED + b"]")
            .replace(b'"uid": "u-1", ', b"")
            .replace(b'"dryRun": true', b'"dryRun": true, "uid": "u-1"'),
            "nested too deeply",
        ),
    ],
)
def test_without_a_readable_uid_it_stays_a_bad_request(body: bytes, message: str) -> None:
    error = _refused(body)
    assert (error.uid, error.request, error.status) == (None, None, 400)
    assert message in error.diagnostics()


def test_a_uid_in_the_nesting_is_not_taken() -> None:
    body = b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"object": '
    body += b'{"uid": "evil", "x": ' + NESTED + b"}}}"
    assert _refused(body).uid is None

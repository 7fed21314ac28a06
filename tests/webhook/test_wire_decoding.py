"""webhook/_wire.py: the decoding of a request, differential against the implementation it replaced.

``_parse_request`` checks ``requestKind`` without building it (issue 31); below is the version before that,
verbatim but for names and the operation's type check (a list or object raised an unhashable-type
``TypeError`` from both until stop 39). Every review of tests/data, and each of them with every field of its
request (and of ``kind``, ``requestKind``, ``resource`` and ``userInfo``) replaced by each of a set of hostile
values or left out, decodes to the same request or fails with the same error (message, status, location,
hint, uid, and the readable part recorded) through both.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from tests.conftest import DATA
from webhook import _wire
from webhook._admission import Verdict
from webhook._wire import (
    OPERATIONS,
    AdmissionRequest,
    GroupVersionKind,
    ReviewError,
    _dry_run,
    _groups,
    _json_type,
    _optional_object,
    _optional_str,
    parse_review_document,
)

REVIEWS = [
    *sorted(DATA.glob("70[0-5]-*-review.json")),
    DATA / "303-pod-ephemeralcontainers-update-review.json",
]
HOSTILE = list(json.loads((DATA / "760-hostile-strings.json").read_text())["strings"].values())
VALUES: list[Any] = [
    None,
    "",
    "x",
    "a/b",
    "/",
    "\ud800",
    0,
    1.5,
    True,
    False,
    [],
    ["g", 1],
    ["system:masters"],
    {},
    {"kind": "Pod"},
    {"group": "apps", "version": "v1", "kind": "Deployment"},
    {"group": 1, "version": "v1", "kind": "Pod"},
    {"group": "", "version": "v1/x", "kind": "Pod"},
    "CREATE",
    "UPDATE",
    "DELETE",
    *HOSTILE[:3],
]
_ABSENT = object()


def _reference_gvk(value: object, where: str) -> GroupVersionKind | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ReviewError(
            f"{where} is {_json_type(value)}, expected {{group, version, kind}}", status=422, location=where
        )
    kind = value.get("kind")
    group = value.get("group", "")
    version = value.get("version", "")
    if not isinstance(kind, str) or not kind:
        raise ReviewError(f"{where}.kind is missing or empty", status=422, location=f"{where}.kind")
    if not isinstance(group, str) or not isinstance(version, str):
        raise ReviewError(f"{where}.group and .version must be strings", status=422, location=where)
    if "/" in group or "/" in version:
        raise ReviewError(f"{where}.group and .version cannot contain '/'", status=422, location=where)
    return GroupVersionKind(group=group, version=version, kind=kind)


def _reference_parse_request(request: Mapping[str, Any], uid: str) -> AdmissionRequest:
    operation = request.get("operation")
    if type(operation) is not str or operation not in OPERATIONS:
        raise ReviewError(
            f"request.operation is {operation!r}, expected one of {', '.join(sorted(OPERATIONS))}",
            status=422,
            location="request.operation",
        )
    gvk = _reference_gvk(request.get("kind"), "request.kind")
    if gvk is None:
        raise ReviewError("request.kind is missing", status=422, location="request.kind")
    _reference_gvk(request.get("requestKind"), "request.requestKind")
    resource = request.get("resource")
    if isinstance(resource, dict):
        _optional_str(resource.get("resource"), "request.resource.resource")
    user = request.get("userInfo")
    user = user if isinstance(user, dict) else {}
    return AdmissionRequest(
        uid=uid,
        kind=gvk,
        operation=operation,
        sub_resource=_optional_str(request.get("subResource"), "request.subResource"),
        name=_optional_str(request.get("name"), "request.name"),
        namespace=_optional_str(request.get("namespace"), "request.namespace"),
        username=_optional_str(user.get("username"), "request.userInfo.username"),
        groups=_groups(user.get("groups")),
        object=_optional_object(request.get("object"), "request.object"),
        old_object=_optional_object(request.get("oldObject"), "request.oldObject")
        if operation in ("UPDATE", "DELETE")
        else None,
        dry_run=_dry_run(request.get("dryRun")),
    )


def _outcome(parse: Any, document: Mapping[str, Any]) -> object:
    try:
        return parse(document)
    except ReviewError as error:
        return ("error", error.message, error.status, error.location, error.hint, error.uid, error.request)
    except Exception as error:  # whatever else escapes must escape alike
        return ("raised", type(error), str(error))


def _variants(document: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    yield copy.deepcopy(dict(document))
    request = document["request"]
    places: list[tuple[str, ...]] = [(key,) for key in request]
    places += [("dryRun",), ("subResource",), ("oldObject",), ("name",), ("requestKind",), ("resource",)]
    for parent in ("kind", "requestKind", "resource", "userInfo"):
        if isinstance(request.get(parent), dict):
            places += [(parent, key) for key in request[parent]]
    places += [
        ("userInfo", "username"),
        ("userInfo", "groups"),
        ("kind", "group"),
        ("requestKind", "version"),
    ]
    for place in dict.fromkeys(places):
        for value in [*VALUES, _ABSENT]:
            changed = copy.deepcopy(dict(document))
            target = changed["request"]
            for key in place[:-1]:
                if not isinstance(target.get(key), dict):
                    target[key] = {}
                target = target[key]
            if value is _ABSENT:
                target.pop(place[-1], None)
            else:
                target[place[-1]] = copy.deepcopy(value)
            yield changed


@pytest.mark.parametrize("path", REVIEWS, ids=lambda p: p.name)
def test_every_variant_decodes_as_before(path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    document = json.loads(path.read_text())
    compared = 0
    for variant in _variants(document):
        new = _outcome(parse_review_document, variant)
        with monkeypatch.context() as patched:
            patched.setattr(_wire, "_parse_request", _reference_parse_request)
            old = _outcome(parse_review_document, variant)
        assert new == old, json.dumps(variant["request"], default=str)[:2000]
        compared += 1
    assert compared > 500


@pytest.mark.parametrize("cls", [GroupVersionKind, AdmissionRequest, Verdict])
def test_the_quick_init_classes_build_what_the_dataclass_init_builds(cls: type[Any]) -> None:
    samples: dict[type[Any], list[dict[str, Any]]] = {
        GroupVersionKind: [{"group": "", "version": "v1", "kind": "Pod"}],
        AdmissionRequest: [
            {"uid": "u", "kind": GroupVersionKind("apps", "v1", "Deployment"), "operation": "CREATE"},
            {
                "uid": "u",
                "kind": GroupVersionKind("", "v1", "Pod"),
                "operation": "UPDATE",
                "sub_resource": "ephemeralcontainers",
                "name": "n",
                "namespace": "ns",
                "username": "alice",
                "groups": ("a", "b"),
                "object": {"kind": "Pod"},
                "old_object": {},
                "dry_run": True,
            },
        ],
        Verdict: [
            {"allowed": True, "reason": "Allowed"},
            {"allowed": False, "reason": "PolicyViolation", "message": "m", "warnings": ("w",), "code": 400},
        ],
    }
    for fields in samples[cls]:
        quick = cls(**fields)
        reference = object.__new__(cls)
        cls.__init__.__wrapped__(reference, **fields)
        assert quick == reference and repr(quick) == repr(reference)
        assert dataclasses.astuple(quick) == dataclasses.astuple(reference)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(quick, dataclasses.fields(cls)[0].name, "changed")
        positional = cls(*(fields[f.name] for f in dataclasses.fields(cls) if f.name in fields))
        if list(fields) == [f.name for f in dataclasses.fields(cls)][: len(fields)]:
            assert positional == quick


def test_the_known_annotation_keys_are_qualified_names() -> None:
    assert all(_wire._ANNOTATION_KEY.fullmatch(key) for key in _wire._VALID_KEYS)
    with pytest.raises(ValueError, match="qualified-name"):
        _wire.allow_response("u", audit_annotations={"decision": "allow", "Not/Valid": "x"})

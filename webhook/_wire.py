"""AdmissionReview ``admission.k8s.io/v1``: lenient parsing of requests, strict protocol-valid responses.

Requests are read the way the API server actually sends them (``dryRun`` absent or null, ``name``
absent on ``generateName`` creates, ``object``/``oldObject`` null). Anything that is not an AdmissionReview v1
with a uid raises :class:`ReviewError` carrying an HTTP status: with no uid to answer, the API server counts a
failed call and its ``failurePolicy`` decides. Once the uid is known, a malformed request raises a
:class:`ReviewError` that carries the uid and what could be read of the request, and the webhook answers it
with a denial (recorded like any other), so that not even ``failurePolicy: Ignore`` lets it through.

Responses follow the API server's ``VerifyAdmissionResponse`` rules: exact GVK, the request's uid, a boolean
``allowed``, never ``patch``/``patchType``; a denial carries ``status.code`` ≥ 400 with a one-line message.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from verifier.base import InputError, quick_init, visible
from webhook._json import compact_encoder
from webhook._salvage import salvage

API_VERSION: Final = "admission.k8s.io/v1"
KIND: Final = "AdmissionReview"
#: controller-runtime's reasoning: two objects of up to 3 MiB each plus under 1 MiB for the rest.
MAX_BODY_BYTES: Final = 7 * 1024 * 1024
OPERATIONS: Final = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})
#: The API doc asks for warnings of at most 120 characters; the API server truncates beyond 4096 in total.
MAX_WARNING_CHARS: Final = 120
MAX_WARNINGS: Final = 20
#: A readable ``kubectl`` error; the full list is in ``auditAnnotations`` and the decision log.
MAX_MESSAGE_CHARS: Final = 1000
#: ``status.details.causes`` listed in a denial; the rest are counted in one last cause (the decision log
#: has them): a Pod built to make thousands of violations must not make a response of megabytes.
MAX_CAUSES: Final = 50
MAX_ANNOTATION_CHARS: Final = 8192

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS: Final = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
# One encoder of each kind for every answer: json.dumps with options builds a new one per call (and
# JSONEncoder.encode a new C encoder per call: webhook._json).
_COMPACT: Final = compact_encoder(ensure_ascii=False)
_COMPACT_ASCII: Final = compact_encoder(ensure_ascii=True)
# Audit annotation keys become "<webhook name>/<key>", which the API server checks as a qualified name.
_ANNOTATION_KEY = re.compile(r"[a-z0-9]([-a-z0-9_.]{0,61}[a-z0-9])?")
#: The webhook's own keys, valid (a test checks them): an answer's keys need no regex match apiece.
_VALID_KEYS: Final = frozenset({"decision", "reason", "policy-revision", "policies", "violations", "dry-run"})


class ReviewError(InputError):
    """The body is not a well-formed AdmissionReview v1 request.

    ``uid`` is the request's uid when it could be read (answer with a denial), else ``None``; ``request`` is
    then what could be read of the request (its well-formed fields, the others empty), for the decision
    record; ``status`` is the HTTP status to send when there is no uid to answer.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int,
        location: str | None = None,
        hint: str | None = None,
        uid: str | None = None,
        request: AdmissionRequest | None = None,
    ):
        super().__init__(message, location=location, hint=hint)
        self.status = status
        self.uid = uid
        self.request = request


@quick_init
@dataclass(frozen=True, slots=True)
class GroupVersionKind:
    """``{group, version, kind}`` as the API server writes it; the core group is ``""``."""

    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        """``apps/v1`` or ``v1`` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        return f"{self.api_version}/{self.kind}"


@quick_init
@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    """The fields of ``AdmissionReview.request`` the webhook uses; absent optional fields are ``None``."""

    uid: str
    kind: GroupVersionKind
    operation: str
    sub_resource: str | None = None
    name: str | None = None
    namespace: str | None = None
    username: str | None = None
    #: ``userInfo.groups``: the requester's groups as the API server authenticated them.
    groups: tuple[str, ...] = ()
    object: Mapping[str, Any] | None = None
    old_object: Mapping[str, Any] | None = None
    dry_run: bool = False


def parse_review(body: bytes) -> AdmissionRequest:
    """Decode an AdmissionReview v1 request body.

    Raises :class:`ReviewError`: status 400 for a body that is not a JSON object, 422 for a JSON object that
    is not an AdmissionReview v1 request with a uid, and with ``uid`` set for a request whose other fields are
    malformed.
    """
    try:
        document = json.loads(body)
    except RecursionError:
        raise _undecoded(body, None) from None
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError, an integer too long to convert
        raise _undecoded(body, error) from None
    if not isinstance(document, dict):
        raise ReviewError(
            f"request body is JSON {_json_type(document)}, not an AdmissionReview object",
            status=400,
            hint="send an AdmissionReview admission.k8s.io/v1 as application/json",
        )
    return parse_review_document(document)


def _undecoded(body: bytes, error: ValueError | None) -> ReviewError:
    """The error for a body ``json.loads`` refused with ``error`` (None: nested too deeply).

    Refused only for its depth or an integer too long, the body may be a well-formed review (the API server
    accepts both): when its envelope (:mod:`webhook._salvage`) is a v1 review with a uid, the error carries
    them, and the request is denied instead of failing the call.
    """
    hint = "send an AdmissionReview admission.k8s.io/v1 as application/json"
    too_long = type(error) is ValueError and "integer string conversion" in str(error)
    if error is not None and not too_long:
        return ReviewError(f"request body is not JSON: {error}", status=400, hint=hint)
    levels, digits = sys.getrecursionlimit(), sys.get_int_max_str_digits()
    envelope = salvage(body, deep=levels // 2, max_digits=digits)
    root = envelope.document or {}
    request, uid = root.get("request"), None
    if root.get("apiVersion") == API_VERSION and root.get("kind") == KIND and isinstance(request, dict):
        uid = request.get("uid")
    if not isinstance(uid, str) or not uid or not isinstance(request, dict):
        if too_long:
            return ReviewError(f"request body is not JSON: {error}", status=400, hint=hint)
        return ReviewError(
            "request body is JSON nested too deeply to be an AdmissionReview", status=400, hint=hint
        )
    if too_long:
        where = envelope.long_number or "the request"
        message = f"{where} holds a number of more than {digits} digits, too long to judge"
    else:
        where = envelope.deepest or "the request"
        message = f"{where} is nested too deeply to judge (limit about {levels} levels)"
    return ReviewError(message, status=400, hint=hint, uid=uid, request=_readable_part(request, uid))


def parse_review_document(document: Mapping[str, Any]) -> AdmissionRequest:
    """Like :func:`parse_review`, for an already decoded JSON object."""
    api_version = document.get("apiVersion")
    kind = document.get("kind")
    if api_version != API_VERSION or kind != KIND:
        raise ReviewError(
            f"expected apiVersion {API_VERSION!r} and kind {KIND!r}, got {api_version!r} and {kind!r}",
            status=422,
            location="apiVersion",
            hint='register the webhook with admissionReviewVersions: ["v1"]',
        )
    request = document.get("request")
    if not isinstance(request, dict):
        raise ReviewError(
            f"request is {_json_type(request)}, expected an AdmissionRequest object",
            status=422,
            location="request",
        )
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ReviewError("request.uid is missing or empty", status=422, location="request.uid")
    try:
        return _parse_request(request, uid)
    except ReviewError as error:
        raise ReviewError(
            error.message,
            status=error.status,
            location=error.location,
            hint=error.hint,
            uid=uid,
            request=_readable_part(request, uid),
        ) from None


def _readable_part(request: Mapping[str, Any], uid: str) -> AdmissionRequest:
    """The well-formed fields of a malformed request, the others empty: what its denial's record shows."""

    def text(value: object) -> str | None:
        return value if isinstance(value, str) and value else None

    def mapping(value: object) -> Mapping[str, Any]:
        return value if isinstance(value, dict) else {}

    kind = mapping(request.get("kind"))
    obj, old = request.get("object"), request.get("oldObject")
    return AdmissionRequest(
        uid=uid,
        kind=GroupVersionKind(
            text(kind.get("group")) or "", text(kind.get("version")) or "", text(kind.get("kind")) or ""
        ),
        operation=text(request.get("operation")) or "",
        sub_resource=text(request.get("subResource")),
        name=text(request.get("name")),
        namespace=text(request.get("namespace")),
        username=text(mapping(request.get("userInfo")).get("username")),
        groups=_groups(mapping(request.get("userInfo")).get("groups"), lenient=True),
        object=obj if isinstance(obj, dict) else None,
        old_object=old if isinstance(old, dict) else None,
        dry_run=request.get("dryRun") is True,
    )


def _parse_request(request: Mapping[str, Any], uid: str) -> AdmissionRequest:
    operation = request.get("operation")
    # A list or object is no operation, and unhashable: asked of the set, it raised a TypeError, an HTTP 500
    # that failurePolicy Ignore admits.
    if type(operation) is not str or operation not in OPERATIONS:
        raise ReviewError(
            f"request.operation is {operation!r}, expected one of {', '.join(sorted(OPERATIONS))}",
            status=422,
            location="request.operation",
        )
    gvk = _gvk(request.get("kind"), "request.kind")
    if gvk is None:
        raise ReviewError("request.kind is missing", status=422, location="request.kind")
    # Not used, but checked: the API server always sends them well-formed, so a request where they are not
    # did not come from it and is denied rather than judged.
    _gvk(request.get("requestKind"), "request.requestKind", check_only=True)
    resource = request.get("resource")
    if isinstance(resource, dict):
        _optional_str(resource.get("resource"), "request.resource.resource")
    user = request.get("userInfo")
    user = user if isinstance(user, dict) else {}
    # Checked in the order the fields are listed: the first malformed one is reported.
    sub_resource = _optional_str(request.get("subResource"), "request.subResource")
    name = _optional_str(request.get("name"), "request.name")
    namespace = _optional_str(request.get("namespace"), "request.namespace")
    username = _optional_str(user.get("username"), "request.userInfo.username")
    return AdmissionRequest(
        uid=uid,
        kind=gvk,
        operation=operation,
        sub_resource=sub_resource,
        name=name,
        namespace=namespace,
        username=username,
        groups=_groups(user.get("groups")),
        object=_optional_object(request.get("object"), "request.object"),
        # CREATE and CONNECT have no old object; whatever a sender put there is ignored, not judged.
        old_object=_optional_object(request.get("oldObject"), "request.oldObject")
        if operation in ("UPDATE", "DELETE")
        else None,
        dry_run=_dry_run(request.get("dryRun")),
    )


def parse_timeout(value: str | None) -> float | None:
    """Seconds from the ``?timeout=`` the API server appends (a Go duration such as ``10s`` or ``1m30s``).

    Returns ``None`` when the value is absent or not a duration; the caller then uses its default.
    """
    if not value:
        return None
    position = 0
    seconds = 0.0
    for match in _DURATION_PART.finditer(value):
        if match.start() != position:
            return None
        seconds += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        position = match.end()
    if position != len(value) or position == 0:
        return None
    return seconds


def allow_response(
    uid: str,
    *,
    warnings: Iterable[str] = (),
    audit_annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """An AdmissionReview v1 that admits the request."""
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    _add_extras(response, warnings, audit_annotations)
    return _review(response)


def deny_response(
    uid: str,
    *,
    message: str,
    reason: str,
    code: int = 403,
    causes: Sequence[tuple[str, str]] = (),
    warnings: Iterable[str] = (),
    audit_annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """An AdmissionReview v1 that denies the request.

    ``message`` is folded to one line; ``causes`` are ``(field path, message)`` pairs for
    ``status.details.causes``, the first :data:`MAX_CAUSES` - 1 of them listed when there are more, and a
    last one counting the others. ``code`` below 400 is a programming error (the API server would raise it
    to 400 anyway, losing the intent).
    """
    if code < 400:
        raise ValueError(f"a denial needs an HTTP status code >= 400, not {code}")
    status: dict[str, Any] = {
        "metadata": {},
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": _one_line(message, MAX_MESSAGE_CHARS) or reason,
    }
    if causes:
        listed = causes if len(causes) <= MAX_CAUSES else causes[: MAX_CAUSES - 1]
        details = [
            {"reason": "FieldValueForbidden", "field": field, "message": _one_line(text, MAX_MESSAGE_CHARS)}
            for field, text in listed
        ]
        if len(listed) < len(causes):
            hidden = len(causes) - len(listed)
            details.append(
                {
                    "reason": "FieldValueForbidden",
                    "field": "",
                    "message": f"and {hidden} more violations: see the decision log",
                }
            )
        status["details"] = {"causes": details}
    response: dict[str, Any] = {"uid": uid, "allowed": False, "status": status}
    _add_extras(response, warnings, audit_annotations)
    return _review(response)


def encode(review: Mapping[str, Any]) -> bytes:
    """The response body: compact UTF-8 JSON."""
    text = _COMPACT(review)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (from a "\ud800" escape in the request, echoed in the uid or a message) has no
        # UTF-8 form; written as a JSON escape it goes back as it came.
        return _COMPACT_ASCII(review).encode("ascii")


def short_warnings(texts: Iterable[str]) -> list[str]:
    """Warnings as the API server wants them: one line, at most 120 characters, de-duplicated, few."""
    seen: dict[str, None] = {}
    for text in texts:
        line = _one_line(text, MAX_WARNING_CHARS)
        if line:
            seen.setdefault(line, None)
    lines = list(seen)
    if len(lines) > MAX_WARNINGS:
        hidden = len(lines) - (MAX_WARNINGS - 1)
        lines = [*lines[: MAX_WARNINGS - 1], f"{hidden} more warnings: see the decision log"]
    return lines


def _review(response: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}


def _add_extras(
    response: dict[str, Any], warnings: Iterable[str], audit_annotations: Mapping[str, str] | None
) -> None:
    lines = short_warnings(warnings)
    if lines:
        response["warnings"] = lines
    if audit_annotations:
        for key in audit_annotations:
            if key not in _VALID_KEYS and not _ANNOTATION_KEY.fullmatch(key):
                raise ValueError(f"audit annotation key {key!r} is not a valid qualified-name part")
        response["auditAnnotations"] = {
            key: value if len(value) <= MAX_ANNOTATION_CHARS else value[: MAX_ANNOTATION_CHARS - 1] + "…"
            for key, value in audit_annotations.items()
        }


def _one_line(text: str, limit: int) -> str:
    # Messages quote names from the request and its evidence: every invisible, reordering or line-breaking
    # code point is written out (<U+XXXX>), as the report does; only tabs and newlines fold into spaces.
    line = " ".join(visible(text, keep="\t\n").split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _gvk(value: object, where: str, *, check_only: bool = False) -> GroupVersionKind | None:
    """``{group, version, kind}`` at ``where``; None when absent, and when only checked (``check_only``)."""
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
        # The record's api_version is group/version: a "/" inside either would name another group.
        raise ReviewError(f"{where}.group and .version cannot contain '/'", status=422, location=where)
    return None if check_only else GroupVersionKind(group, version, kind)


def _optional_str(value: object, where: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ReviewError(f"{where} is {_json_type(value)}, expected a string", status=422, location=where)
    return value


def _groups(value: object, *, lenient: bool = False) -> tuple[str, ...]:
    """``userInfo.groups``: a list of strings; ``lenient`` keeps the strings of anything else."""
    if value is None:
        return ()
    if isinstance(value, list) and all(isinstance(group, str) for group in value):
        return tuple(value)
    if lenient:
        return tuple(group for group in value if isinstance(group, str)) if isinstance(value, list) else ()
    where = "request.userInfo.groups"
    raise ReviewError(f"{where} is not a list of strings", status=422, location=where)


def _optional_object(value: object, where: str) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ReviewError(f"{where} is {_json_type(value)}, expected an object", status=422, location=where)
    return value


def _dry_run(value: object) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ReviewError(
            f"request.dryRun is {_json_type(value)}, expected a boolean",
            status=422,
            location="request.dryRun",
        )
    return value

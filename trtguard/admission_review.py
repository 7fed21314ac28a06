"""AdmissionReviews as the Kubernetes API server sends them to a validating webhook, and their answers.

:func:`admission_review` wraps one object as ``kube-apiserver`` does for a ``kubectl apply``
(``admission.k8s.io/v1``): a fresh ``uid``; ``kind``/``requestKind`` from the object's ``apiVersion`` and
``kind``; ``resource``/``requestResource`` named by the API machinery's own guess of a kind's resource
(``UnsafeGuessKindToResource``: lower case, ``-s``, ``-es`` after an ``s``, ``-ies`` for a ``y``), the names
every built-in workload kind and the operators' CRDs use; ``name`` and ``namespace`` (filled into the
object's metadata as the API server does before admission); ``operation`` with its ``options``
(``CreateOptions``/``UpdateOptions``, field manager ``kubectl-client-side-apply``, field validation
``Strict``, kubectl's since 1.27); ``userInfo`` as the
impersonation filter writes it (:meth:`policies.requesters.Requester.impersonated`); ``oldObject`` for an
UPDATE; and
``dryRun``. :func:`send` posts it (``?timeout=``, as the API server does) and checks the answer as the API
server would: an AdmissionReview whose ``response.uid`` is the request's, with ``allowed`` a boolean; any
other answer is an error, never an allow.
"""

from __future__ import annotations

import json
import ssl
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from policies.requesters import Requester
from verifier.base import InputError

__all__ = [
    "ADMIN",
    "Answer",
    "NoAnswer",
    "admission_review",
    "guess_resource",
    "send",
    "tls_context",
]

#: Kinds that no namespace holds (the built-in ones a manifest may carry beside workloads).
_CLUSTER_SCOPED = frozenset(
    {
        "Namespace",
        "Node",
        "PersistentVolume",
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "StorageClass",
        "PriorityClass",
        "RuntimeClass",
        "IngressClass",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "APIService",
        "CertificateSigningRequest",
    }
)
#: The most an answer may be (the API server reads at most 3 MiB of a webhook's response).
_MAX_ANSWER = 3 * 1024 * 1024


#: The requester when none is named: the cluster administrator of a kubeadm or kind cluster's kubeconfig.
ADMIN = Requester.impersonated("kubernetes-admin", ("system:masters",))


def guess_resource(kind: str) -> str:
    """The resource of ``kind`` as the API machinery guesses it (``meta.UnsafeGuessKindToResource``)."""
    if not kind:
        return ""
    singular = kind.lower()
    if singular.endswith("s"):
        return singular + "es"
    if singular.endswith("y"):
        return singular[:-1] + "ies"
    return singular + "s"


def admission_review(
    obj: Mapping[str, Any],
    *,
    operation: str = "CREATE",
    old: Mapping[str, Any] | None = None,
    namespace: str | None = None,
    requester: Requester = ADMIN,
    dry_run: bool = False,
    uid: str | None = None,
) -> dict[str, Any]:
    """The AdmissionReview the API server sends for ``obj`` (see the module docstring).

    ``namespace`` is the one applied to (``kubectl apply -n``): an object that names none is put there
    (``default`` without it); one that names another is an :class:`InputError`, as kubectl refuses it.
    """
    if operation not in ("CREATE", "UPDATE"):
        raise InputError(f"operation {operation!r} is neither CREATE nor UPDATE")
    if (operation == "UPDATE") != (old is not None):
        raise InputError(
            "an UPDATE needs the object as it was (--old FILE), and only an UPDATE has one",
            hint="give --operation UPDATE together with --old FILE",
        )
    api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    group, _, version = api_version.rpartition("/")
    metadata = obj.get("metadata")
    metadata = dict(metadata) if isinstance(metadata, Mapping) else {}
    named = metadata.get("namespace")
    scoped = kind not in _CLUSTER_SCOPED
    if scoped:
        if isinstance(named, str) and namespace is not None and named != namespace:
            raise InputError(
                f"{kind} {metadata.get('name')} names namespace {named}, not {namespace}",
                hint="as kubectl apply -n refuses it: drop --namespace or the object's namespace",
            )
        metadata["namespace"] = named if isinstance(named, str) else namespace or "default"
    name = metadata.get("name")
    kind_of = {"group": group, "version": version, "kind": kind}
    resource = {"group": group, "version": version, "resource": guess_resource(kind)}
    request: dict[str, Any] = {
        "uid": uid or str(uuid.uuid4()),
        "kind": kind_of,
        "resource": resource,
        "requestKind": kind_of,
        "requestResource": resource,
        "operation": operation,
        "userInfo": {"username": requester.username, "groups": list(requester.groups)},
        "object": {**obj, "metadata": metadata},
        "oldObject": dict(old) if old is not None else None,
        "dryRun": dry_run,
        "options": {
            "apiVersion": "meta.k8s.io/v1",
            "kind": "CreateOptions" if operation == "CREATE" else "UpdateOptions",
            "fieldManager": "kubectl-client-side-apply",
            "fieldValidation": "Strict",  # kubectl's default since 1.27
        },
    }
    if isinstance(name, str):
        request["name"] = name
    if scoped:
        request["namespace"] = metadata["namespace"]
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


class NoAnswer(InputError):
    """The webhook was not reached or did not answer in time: nothing answered (unlike an answer refused)."""


@dataclass(frozen=True, slots=True)
class Answer:
    """The webhook's answer to one AdmissionReview: its ``response`` object, checked."""

    response: Mapping[str, Any]

    @property
    def allowed(self) -> bool:
        """``response.allowed``."""
        return bool(self.response["allowed"])

    @property
    def status(self) -> Mapping[str, Any]:
        """``response.status`` (code, reason, message), empty when absent."""
        status = self.response.get("status")
        return status if isinstance(status, Mapping) else {}

    @property
    def warnings(self) -> list[str]:
        """``response.warnings``."""
        warnings = self.response.get("warnings")
        return [str(w) for w in warnings] if isinstance(warnings, list) else []

    @property
    def policies(self) -> list[str] | None:
        """The policies that applied, from the ``policies`` audit annotation trtguard's webhook writes (a
        JSON list of names); None when the answer does not say (another webhook, or a cut annotation)."""
        annotations = self.response.get("auditAnnotations")
        text = annotations.get("policies") if isinstance(annotations, Mapping) else None
        try:
            names = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            return None
        return [str(name) for name in names] if isinstance(names, list) else None


def tls_context(ca: str | None) -> ssl.SSLContext:
    """A client TLS context trusting ``ca`` (a PEM file), else the system's roots; HTTP/1.1, as the API
    server speaks to webhooks."""
    context = ssl.create_default_context(cafile=ca)
    context.set_alpn_protocols(["http/1.1"])
    return context


async def send(
    client: httpx.AsyncClient,
    url: str,
    review: Mapping[str, Any],
    *,
    within: float,
    server_name: str | None = None,
) -> Answer:
    """POST ``review`` to ``url`` as the API server does and return its checked answer.

    ``within`` is the limit in seconds, also sent as ``?timeout=`` (whole seconds, at least 1).
    ``server_name`` is the TLS server name and ``Host`` to present (the Service's DNS name, which the API
    server uses) when ``url`` names an address. Raises :class:`NoAnswer` when the webhook cannot be reached
    or does not answer in time, and :class:`InputError` for a status other than 200 or an answer that is not
    the AdmissionReview for this request: the API server would take any of them as a failed call
    (``failurePolicy``), never as an allow.
    """
    uid = review["request"]["uid"]
    headers = {"content-type": "application/json", "accept": "application/json"}
    extensions: dict[str, Any] = {}
    if server_name is not None:
        headers["host"] = server_name
        extensions["sni_hostname"] = server_name
    seconds = max(1, int(within))
    try:
        response = await client.post(
            url,
            params={"timeout": f"{seconds}s"},
            content=json.dumps(review).encode(),
            headers=headers,
            extensions=extensions,
            timeout=within,
        )
    except httpx.TimeoutException:
        raise NoAnswer(f"no answer from {url} within {within:g} s", hint="is the webhook running?") from None
    except httpx.HTTPError as error:
        raise NoAnswer(
            f"cannot reach {url}: {error}",
            hint="check --server, and --ca (the webhook's CA certificate) or --tls-server-name",
        ) from None
    if response.status_code != 200:
        raise InputError(f"{url} answered HTTP {response.status_code}: {response.text[:300]}")
    if len(response.content) > _MAX_ANSWER:
        raise InputError(f"{url} answered more than {_MAX_ANSWER // (1024 * 1024)} MiB")
    return _checked(response.content, uid, url)


def _checked(body: bytes, uid: str, url: str) -> Answer:
    try:
        data = json.loads(body)
    except ValueError:
        raise InputError(f"{url} answered something that is not JSON: {body[:200]!r}") from None
    answer = data.get("response") if isinstance(data, dict) else None
    problems: Sequence[str] = []
    if not isinstance(data, dict) or data.get("kind") != "AdmissionReview":
        problems = ["it is not an AdmissionReview"]
    elif data.get("apiVersion") != "admission.k8s.io/v1":
        problems = [f"its apiVersion is {data.get('apiVersion')!r}, not admission.k8s.io/v1"]
    elif not isinstance(answer, dict):
        problems = ["it has no response"]
    elif "patch" in answer or "patchType" in answer:
        problems = ["a validating webhook may not return a patch"]
    elif answer.get("uid") != uid:
        problems = [f"its response.uid is {answer.get('uid')!r}, not the request's {uid!r}"]
    elif not isinstance(answer.get("allowed"), bool):
        problems = ["its response.allowed is not a boolean"]
    if problems or not isinstance(answer, dict):
        raise InputError(
            f"the API server would reject {url}'s answer: {problems[0] if problems else 'no response'}"
        )
    return Answer(answer)

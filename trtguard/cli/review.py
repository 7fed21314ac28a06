"""``trtguard review``: send manifests to a running webhook as the API server would, and print its answers.

Each resource is wrapped in the AdmissionReview ``kube-apiserver`` sends (:mod:`trtguard.admission_review`)
and posted to ``--server``; the answers print like ``trtguard check``'s table (or as JSON), and the exit
status is ``check``'s: 0 every resource admitted, 1 one denied, 2 an input error or a call that got no
usable answer (which the API server would count as a failed call, never as an allow).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trtguard.cli._args import add_requester_arguments, impersonation
from trtguard.cli._commands import Subparsers, add_command
from verifier.base import InputError, visible

if TYPE_CHECKING:
    from policies.check import Resource
    from trtguard.admission_review import Answer

#: The webhook's message of several findings: "N policy violations: (1) … | (2) …".
_FINDINGS = re.compile(r"^\d+ policy violations: |\s\|\s(?=\(\d+\) )")
_NUMBER = re.compile(r"^\(\d+\) ")


def register(subparsers: Subparsers) -> None:
    """Add ``review``."""
    parser = add_command(
        subparsers,
        "review",
        description="Wrap each resource of FILE|DIR|- in the AdmissionReview (admission.k8s.io/v1) the "
        "Kubernetes API server sends for `kubectl apply`, POST it to a running `trtguard serve`, and print "
        "its answers like `trtguard check`. Exit 0 all admitted, 1 one denied, 2 bad input or no usable "
        "answer.",
    )
    parser.add_argument("inputs", nargs="+", metavar="FILE|DIR|-", help="YAML/JSON manifests; - reads stdin")
    parser.add_argument(
        "--server",
        required=True,
        metavar="URL",
        help="the webhook, e.g. https://127.0.0.1:8443 (path /validate unless the URL names one)",
    )
    parser.add_argument("--ca", type=Path, metavar="FILE", help="the webhook's CA certificate (PEM)")
    parser.add_argument(
        "--tls-server-name",
        metavar="NAME",
        help="TLS server name and Host to present, as the API server presents the Service's DNS name "
        "(e.g. trtguard.trtguard.svc) when --server names an address",
    )
    add_requester_arguments(
        parser, "the requester (userInfo.username; default kubernetes-admin in system:masters)"
    )
    parser.add_argument("--operation", choices=("CREATE", "UPDATE"), default="CREATE", help="default CREATE")
    parser.add_argument(
        "--old",
        type=Path,
        metavar="FILE",
        help="for UPDATE: the objects as they are now (oldObject), matched by kind, namespace and name",
    )
    parser.add_argument(
        "--namespace",
        metavar="NS",
        help="the namespace applied to, as kubectl apply -n (default: each object's own, else default)",
    )
    parser.add_argument("--dry-run", action="store_true", help="send dryRun: true (kubectl --dry-run=server)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="per request (default 10, as the API server)",
    )
    parser.add_argument("--format", choices=("table", "json"), default="table", help="default table")
    parser.set_defaults(handler=_review)


def _url(server: str) -> str:
    scheme, sep, rest = server.partition("://")
    if not sep or scheme not in ("https", "http"):
        raise InputError(f"--server {server!r} is not an https:// URL", hint="e.g. https://127.0.0.1:8443")
    return server if "/" in rest.rstrip("/") else f"{server.rstrip('/')}/validate"


def _key(obj: dict[str, Any], namespace: str | None) -> tuple[str, str, str | None, str | None]:
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    named = metadata.get("namespace") if isinstance(metadata, dict) else None
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return group, str(obj.get("kind")), named if isinstance(named, str) else namespace, name


def _review(args: argparse.Namespace) -> int:
    from policies.check import read_resources  # noqa: PLC0415 - keep `trtguard --help` light
    from policies.requesters import Requester  # noqa: PLC0415
    from trtguard.admission_review import ADMIN  # noqa: PLC0415

    impersonated = impersonation(args)
    requester = Requester.impersonated(*impersonated) if impersonated else ADMIN
    if (args.operation == "UPDATE") != (args.old is not None):
        raise InputError("--operation UPDATE and --old FILE go together", hint="give both, or neither")
    url = _url(args.server)
    problems: list[InputError] = []
    resources = list(read_resources(args.inputs, sys.stdin.buffer.read, problems))
    old: dict[tuple[str, str, str | None, str | None], dict[str, Any]] = {}
    if args.old is not None:
        for found in read_resources([str(args.old)], None, problems):
            old[_key(found.obj, args.namespace or "default")] = found.obj
    results = asyncio.run(_send_all(args, url, requester, resources, old))
    if args.format == "json":
        print(json.dumps([_json(item) for item in results], ensure_ascii=False))
        for problem in problems:
            print(f"trtguard: error: {problem.diagnostics()}", file=sys.stderr)
    else:
        sys.stdout.write(_table(results, problems, url, requester))
    denied = any(not isinstance(item.result, InputError) and not item.result.allowed for item in results)
    errors = problems or any(isinstance(item.result, InputError) for item in results)
    return 2 if errors else 1 if denied else 0


@dataclass(frozen=True, slots=True)
class _Sent:
    """One resource and what became of it: ``namespace`` the one it is applied to, as the API server fills
    it in (the object's own, ``--namespace``, else ``default``; None for a cluster-scoped kind); ``sent``
    whether its AdmissionReview was posted."""

    resource: Resource
    namespace: str | None
    result: Answer | InputError
    sent: bool

    @property
    def title(self) -> str:
        """``Kind namespace/name`` for the table."""
        namespace = f"{self.namespace}/" if self.namespace else ""
        return f"{self.resource.kind} {namespace}{self.resource.name or '<unnamed>'}"


async def _send_all(
    args: argparse.Namespace,
    url: str,
    requester: Any,
    resources: list[Resource],
    old: dict[tuple[str, str, str | None, str | None], dict[str, Any]],
) -> list[_Sent]:
    import httpx  # noqa: PLC0415

    from trtguard.admission_review import admission_review, send, tls_context  # noqa: PLC0415

    context = tls_context(str(args.ca) if args.ca is not None else None)
    results: list[_Sent] = []
    async with httpx.AsyncClient(verify=context, http2=False, trust_env=False) as client:
        for resource in resources:
            namespace, sent = resource.namespace, False
            try:
                before = None
                if args.operation == "UPDATE":
                    before = old.get(_key(resource.obj, args.namespace or "default"))
                    if before is None:
                        raise InputError(
                            f"--old {args.old} holds no {resource.title}",
                            hint="an UPDATE needs the object as it is now: the same kind, namespace and name",
                        )
                review = admission_review(
                    resource.obj,
                    operation=args.operation,
                    old=before,
                    namespace=args.namespace,
                    requester=requester,
                    dry_run=args.dry_run,
                )
                namespace, sent = review["request"].get("namespace"), True
                answer = await send(
                    client, url, review, within=args.timeout, server_name=args.tls_server_name
                )
                results.append(_Sent(resource, namespace, answer, sent))
            except InputError as error:
                results.append(_Sent(resource, namespace, error, sent))
    return results


def _table(results: list[_Sent], problems: list[InputError], url: str, requester: Any) -> str:
    from policies.check import error_lines, problem_lines  # noqa: PLC0415
    from trtguard.admission_review import NoAnswer  # noqa: PLC0415

    lines: list[str] = []
    allowed = denied = 0
    for item in results:
        where, result = f"{item.title} ({item.resource.source}:{item.resource.line})", item.result
        if isinstance(result, InputError):
            lines += error_lines(where, result)
            continue
        if result.allowed:
            allowed += 1
            # As `check` says it: an allow that no policy judged is not an allow that policies passed.
            verdict = "ALLOW (no policy applies)" if result.policies == [] else "ALLOW "
            lines.append(f"{verdict} {where}")
        else:
            denied += 1
            status = result.status
            lines.append(f"DENY   {where}: {status.get('code', '')} {status.get('reason', '')}".rstrip())
            for finding in _FINDINGS.split(str(status.get("message", ""))):
                if finding:
                    lines.append(f"  x {_NUMBER.sub('', finding)}")
        lines += [f"  ! warning: {warning}" for warning in result.warnings]
    lines += problem_lines(problems)
    total = len(results)
    errors = len(problems) + sum(isinstance(item.result, InputError) for item in results)
    sent = sum(item.sent for item in results)
    unanswered = sum(isinstance(item.result, NoAnswer) for item in results)
    if sent == 0:
        answered = f"nothing sent to {url}"
    elif unanswered == sent:
        answered = f"{url} did not answer; asked as {requester}"
    elif unanswered:
        answered = f"answered by {url} for {requester}, except {unanswered} of {sent} it did not answer"
    else:
        answered = f"answered by {url} for {requester}"
    lines.append(
        f"{total} resource{'s' if total != 1 else ''}: {allowed} allowed, {denied} denied, {errors} "
        f"error{'s' if errors != 1 else ''}; {answered}"
    )
    # The answers repeat names and references from the files: each line stays one line (as in `check`).
    return "\n".join(map(visible, lines)) + "\n"


def _json(item: _Sent) -> dict[str, Any]:
    resource, result = item.resource, item.result
    data: dict[str, Any] = {
        "kind": resource.kind,
        "namespace": item.namespace,
        "name": resource.name,
        "source": resource.source,
        "line": resource.line,
    }
    if isinstance(result, InputError):
        data["error"] = {"message": result.message, "location": result.location, "hint": result.hint}
    else:
        data["allowed"] = result.allowed
        data["response"] = dict(result.response)
    return data

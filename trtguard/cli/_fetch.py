"""What ``trtguard digest`` (what a reference points at now) and ``trtguard fetch-attestations`` (an
attestation folder filled from registries, for offline checks) do: reading registries for the user.

Their options are in :mod:`trtguard.cli.digest` and :mod:`trtguard.cli.fetch_attestations`; this module
imports the registry client and the policies' readers only inside the handlers, so it loads light.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from verifier.base import InputError

if TYPE_CHECKING:
    from trtguard.attestation_folder import FetchSummary


def registry_arguments(parser: argparse.ArgumentParser, *, timeout: float) -> None:
    """``--registry-config`` and ``--timeout`` (default ``timeout`` seconds)."""
    parser.add_argument(
        "--registry-config",
        type=Path,
        metavar="FILE",
        help="registry settings: CA bundles, loopback plain-HTTP hosts, credentials",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=timeout,
        metavar="SECONDS",
        help=f"give up after this long ({timeout:g})",
    )


def print_digest(args: argparse.Namespace) -> int:
    """``trtguard digest``: print the image reference pinned by the digest it points at now."""
    from verifier.base import (  # noqa: PLC0415
        Deadline,
        ImageReference,
    )
    from verifier.registry.client import RegistryClient  # noqa: PLC0415
    from verifier.registry.config import load_registry_config  # noqa: PLC0415

    if args.timeout <= 0:
        raise InputError("--timeout must be positive", location="--timeout")
    reference = ImageReference.parse(args.image)
    config = load_registry_config(args.registry_config) if args.registry_config else None

    async def main() -> str:
        async with RegistryClient(config) as client:
            return await client.resolve(reference, Deadline.after(args.timeout))

    print(f"{reference.name}@{asyncio.run(main())}")
    return 0


def fetch(args: argparse.Namespace) -> int:
    """``trtguard fetch-attestations``: fill an attestation folder from the registries."""
    # Imported here: the registry client and the policy evaluator's readers are not needed for `--help`.
    from policies.check import read_resources  # noqa: PLC0415
    from policies.workload_model import (  # noqa: PLC0415
        Unjudged,
        extract,
        find_images,
    )
    from trtguard.attestation_folder import fetch_folder, prepare  # noqa: PLC0415
    from verifier.base import Deadline  # noqa: PLC0415
    from verifier.registry.client import RegistryClient  # noqa: PLC0415
    from verifier.registry.config import load_registry_config  # noqa: PLC0415
    from verifier.registry.evidence import RegistryEvidence  # noqa: PLC0415

    if args.timeout <= 0:
        raise InputError("--timeout must be positive", location="--timeout")
    problems: list[InputError] = []
    references: list[str] = []
    for resource in read_resources(args.inputs, sys.stdin.buffer.read, problems):
        try:
            workload = extract(resource.obj)
        except InputError as error:
            problems.append(InputError(error.message, location=f"{resource.source}:{resource.line}"))
            continue
        if isinstance(workload, Unjudged):
            # A kind trtguard does not know: the images a search finds (`check --unknown-kinds judge`).
            references += [use.reference for use in find_images(resource.obj)[0]]
            continue
        references += [use.reference for use in workload.images]
        references += [use.reference for use in workload.engines]
    if problems:
        for problem in problems:
            print(f"trtguard: error: {problem.diagnostics()}", file=sys.stderr)
        return 2
    if not references:
        raise InputError("the inputs name no image or engine", hint="give Pods or Pod-bearing workloads")
    config = load_registry_config(args.registry_config) if args.registry_config else None
    prepare(args.output, replace=args.force)

    async def main() -> FetchSummary:
        async with RegistryClient(config) as client:
            evidence = RegistryEvidence(client)
            return await fetch_folder(references, evidence, client, args.output, Deadline.after(args.timeout))

    summary = asyncio.run(main())
    print(
        f"wrote {summary.folder}: {summary.artifacts} artifact(s), {summary.signatures} signature(s), "
        f"{summary.attestations} attestation(s), {summary.manifests} manifest(s)"
    )
    for reference in summary.unpinned:
        print(
            f"trtguard: warning: {reference} is named by tag; offline, check cannot resolve it: pin it "
            f"(`trtguard digest {reference}`)",
            file=sys.stderr,
        )
    for failure in summary.problems:
        print(f"trtguard: error: not fetched: {failure}", file=sys.stderr)
    return 1 if summary.problems else 0

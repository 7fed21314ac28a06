"""The table of ``trtguard`` commands: each one's one-line help; it is defined in the module named after it.

The top-level parser is built from this table alone, so that ``trtguard --help`` imports no command and a
command imports only its own module (and what that module needs). Helpers several commands share sit in
``_``-prefixed modules beside them. Each command module adds its parser with :func:`add_command` (and
:func:`add_subcommand` for its own sub-commands), which take the help text from here and refuse abbreviated
options everywhere: ``--registry`` is never a prefix of something else.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeAlias

if TYPE_CHECKING:  # argparse's class is generic for type checkers only
    Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    Subparsers = argparse._SubParsersAction


@dataclass(frozen=True, slots=True)
class Command:
    """Where a command is defined and what ``trtguard --help`` says of it."""

    module: str
    help: str


def module_of(command: str) -> str:
    """The module that defines ``command``: the one named after it (``push-engine`` → ``push_engine``)."""
    return f"trtguard.cli.{command.replace('-', '_')}"


def _commands(**helps: str) -> dict[str, Command]:
    return {name.replace("_", "-"): Command(module_of(name), text) for name, text in helps.items()}


#: Every command, in the order ``trtguard --help`` lists them; each lives in the module named after it.
COMMANDS: Final[Mapping[str, Command]] = _commands(
    # admission and the policies it enforces
    serve="run the validating admission webhook",
    check="check Kubernetes manifests against the policies (exit 0 allowed, 1 denied, 2 error)",
    review="send manifests to a running webhook as AdmissionReviews, as the API server does, and print "
    "its answers",
    policy="work with policies (test)",
    schema="print a JSON Schema (build manifest, policy document or decision record)",
    # the auditor's side
    audit="read, verify, rotate and back up the decision log",
    audit_cluster="judge what already runs in a cluster against the policies; write PolicyReports",
    evidence="export, verify and report on signed evidence packages",
    # building, signing and publishing
    keygen="generate an ECDSA P-256 key pair (cosign-compatible encrypted private key)",
    attest="sign an in-toto statement about a file as a DSSE envelope",
    verify_attestation="verify a DSSE attestation envelope",
    manifest="write and compare engine build manifests",
    sign="sign an image in its registry (cosign-compatible classic signature)",
    push_engine="store a TensorRT engine as an OCI artifact a Pod can mount as an image volume",
    attach_attestation="attach a DSSE attestation to an image or engine artifact in its registry",
    digest="print an image reference pinned by the digest it points at now",
    fetch_attestations="copy a workload's signatures and attestations from registries into a folder for "
    "offline checks",
    approve="sign a change approval for one engine, audit ID and list of change kinds",
    demo="material for trying trtguard without a GPU (a stand-in engine)",
    # verifying artifacts
    verify_engine="check a TensorRT engine file against its signed build manifest (optionally on a GPU)",
    verify_notation="verify an artifact's Notary Project signatures against a Notation trust policy and "
    "trust store (from the registry, or offline)",
    verify_bundle="verify a Sigstore bundle (key-signed or keyless) over a file or digest, offline",
    verify_blob="verify a classic cosign blob signature (cosign sign-blob) over a file or digest offline",
    verify_openpgp="verify a detached OpenPGP signature over a file with a keyring, as gpgv does",
)


def add_command(subparsers: Subparsers, name: str, **kwargs: Any) -> argparse.ArgumentParser:
    """The parser of command ``name``, with its help from :data:`COMMANDS`."""
    return subparsers.add_parser(name, help=COMMANDS[name].help, allow_abbrev=False, **kwargs)


def add_command_group(subparsers: Subparsers, name: str, **kwargs: Any) -> Subparsers:
    """Command ``name`` (as :func:`add_command` adds it) made of sub-commands: the place to add them, one
    of which the command line must name."""
    parser = add_command(subparsers, name, **kwargs)
    return parser.add_subparsers(dest=f"{name}_command", metavar="COMMAND", required=True)


def add_subcommand(subparsers: Subparsers, name: str, **kwargs: Any) -> argparse.ArgumentParser:
    """The parser of one sub-command of a command (``audit tail``, ``manifest create``, …)."""
    return subparsers.add_parser(name, allow_abbrev=False, **kwargs)


def deferred(module: str, function: str) -> Callable[[argparse.Namespace], int]:
    """A command handler that imports ``module`` only when the command runs: the parser (and ``--help``)
    then stays free of what the command needs to do its work."""

    def handler(args: argparse.Namespace) -> int:
        status: int = getattr(importlib.import_module(module), function)(args)
        return status

    handler.__qualname__ = f"{module}.{function}"
    return handler

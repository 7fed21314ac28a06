"""Load policy files into a compiled, immutable :class:`PolicySet`.

Everything that can be checked before a workload arrives is checked here, and every problem is reported with
its file, line and field: schema errors, unknown keys, duplicate names, key references that point nowhere,
keys that do not parse, image patterns that are not normalised, CEL expressions that do not compile. A set
with any problem does not load at all (never partly), so that the previous set stays in force in a running
server.

One module on purpose: which files are policies (the walk, and a Notation configuration folder's files,
decided by the TrustedKeys documents read in the same pass) and how they load are one decision, and a file
left out by one half must be reported by the other.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from policies._allow_lists import ALLOW_LIST_SUFFIXES
from policies._compiled_rules import (
    CompiledAttestation,
    CompiledExpression,
    compile_attestation,
    compile_condition,
    field_path,
)
from policies._kind_schema import WorkloadKindDocument
from policies._workload_kinds import kind_name_problems, registry
from policies.patterns import ImagePattern, PatternError, matches_any
from policies.requesters import RequesterSet
from policies.schema import (
    API_VERSION,
    ImageRule,
    InferencePolicyDocument,
    InferencePolicySpec,
    LabelSelector,
    ResourceFilter,
    SignatureRule,
    TrustedKeysDocument,
    parse_duration,
)
from policies.signers import Signer, load_signers, signer_list_problems
from policies.workload_model import DEFAULT_KINDS, KindRegistry
from verifier.base import Document, ImageReference, InputError, decode, load_documents, short_repr, visible

__all__ = [
    "CEL_VARIABLES",
    "CompiledAttestation",
    "CompiledExpression",
    "CompiledImageRule",
    "CompiledPolicy",
    "PolicyLoadError",
    "PolicySet",
    "load_policy_set",
    "policy_files",
]

#: Names that CEL expressions may refer to (``now``: the evaluation clock, an RFC 3339 UTC time).
CEL_VARIABLES = ("manifest", "workload", "engine", "now")

_POLICY_SUFFIXES = (".yaml", ".yml", ".json")
# `workload`, or `engine` beyond its name, reference and digest (its containers, templates: the workload's)
_WORKLOAD_NAME = re.compile(r"\bworkload\b|\bengine\b(?!\s*\.\s*(?:name|reference|digest)\b)")
_NOW_NAME = re.compile(r"\bnow\b")
# A policy directory may carry test suites beside the policies; they are not policies.
_SKIPPED_DIRECTORIES = frozenset({"tests", "testdata"})
#: Notation's trust policy documents, and its other files and folders in a configuration directory: inside a
#: folder a ``notationConfig`` entry names they are Notation's (read through that signer, never as policies),
#: so that a Notation configuration can live (and be watched for changes) inside a policy folder.
_NOTATION_DOCUMENTS = frozenset({"trustpolicy.json", "trustpolicy.oci.json", "trustpolicy.blob.json"})
_NOTATION_SETTINGS = frozenset({"config.json", "signingkeys.json"})
_NOTATION_FOLDERS = frozenset({"truststore", "plugins", "localkeys"})


class PolicyLoadError(InputError):
    """One or more problems in the policy files; nothing was loaded."""

    def __init__(self, problems: Sequence[str]) -> None:
        count = len(problems)
        summary = problems[0] if count == 1 else f"{count} problems in the policies"
        super().__init__(summary, hint="fix the policy files; nothing was loaded")
        self.problems = tuple(problems)

    def diagnostics(self) -> str:
        """Every problem on its own line."""
        if len(self.problems) == 1:
            return super().diagnostics()
        lines = [f"{len(self.problems)} problems in the policies (nothing was loaded):"]
        lines += [f"  {visible(p)}" for p in self.problems]
        return "\n".join(lines)


#: How many references an image rule remembers whether it selects.
_SELECTED_MAX = 4096


@dataclass(frozen=True, slots=True)
class CompiledImageRule:
    """An image rule with its patterns compiled."""

    rule: ImageRule
    patterns: tuple[ImagePattern, ...]
    excluded: tuple[ImagePattern, ...]
    #: per entry of ``rule.attestations``: its alternatives (one for a plain entry), compiled
    attestations: tuple[tuple[CompiledAttestation, ...], ...] = ()
    #: ``selects``' answers: admissions ask about the same few images again and again, and the answer
    #: depends on nothing else (bounded: emptied when full)
    _selected: dict[ImageReference, bool] = field(default_factory=dict, init=False, compare=False, repr=False)
    #: ``images.<name>``, the id of the rule's violations (made once: asked for every image it judges)
    rule_id: str = field(init=False, compare=False, repr=False)
    #: the ids of the rule's checks that judge the digest that runs (a tag resolved first), in order
    needs_digest: tuple[str, ...] = field(init=False, compare=False, repr=False)
    # The rule's fields read on every image it judges, read from the (frozen) rule once: an attribute of a
    # pydantic model costs several times a slot's (its ``__getattr__`` keeps the interpreter from
    # specialising the read).
    #: ``requireDigest``
    require_digest: bool = field(init=False, compare=False, repr=False)
    #: ``pinDigest``
    pin_digest: bool = field(init=False, compare=False, repr=False)
    #: ``digests``
    digests: list[str] | None = field(init=False, compare=False, repr=False)
    #: ``signatures``
    signatures: SignatureRule | None = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        rule = self.rule
        rule_id = f"images.{rule.name}"
        object.__setattr__(self, "rule_id", rule_id)
        object.__setattr__(self, "require_digest", rule.require_digest)
        object.__setattr__(self, "pin_digest", rule.pin_digest)
        object.__setattr__(self, "digests", rule.digests)
        object.__setattr__(self, "signatures", rule.signatures)
        needed = (
            ("digests", rule.digests is not None),
            ("signatures", rule.signatures is not None),
            ("attestations", bool(rule.attestations)),
        )
        object.__setattr__(self, "needs_digest", tuple(f"{rule_id}.{name}" for name, on in needed if on))

    def selects(self, reference: ImageReference) -> bool:
        """True when a ``match`` pattern selects ``reference`` and no ``exclude`` pattern does."""
        known = self._selected.get(reference)
        if known is None:
            if len(self._selected) >= _SELECTED_MAX:
                self._selected.clear()
            known = matches_any(self.patterns, reference) and not matches_any(self.excluded, reference)
            self._selected[reference] = known
        return known

    def judges(self, field: str) -> bool:
        """True when the rule judges images named in ``field``; a ``modelcar`` runs, so container rules do."""
        fields = self.rule.fields
        return fields is None or field in fields or (field == "modelcar" and "container" in fields)

    def applies_to(self, reference: ImageReference, field: str) -> bool:
        """True when the rule judges ``reference`` named in ``field``."""
        return self.judges(field) and self.selects(reference)


@dataclass(frozen=True, slots=True)
class FilterTerms:
    """A ``match`` or ``exclude`` filter's terms, read from the (frozen) document once (each admission asks
    every policy whether it selects the workload)."""

    namespaces: re.Pattern[str] | None
    """The namespace globs as one regex for ``fnmatchcase`` against any of them (None: no such term)."""
    kinds: tuple[str, ...] | None
    labels: LabelSelector | None
    requesters: RequesterSet | None

    @classmethod
    def of(cls, terms: ResourceFilter) -> FilterTerms:
        """The terms of ``terms``."""
        namespaces, kinds = terms.namespaces, terms.kinds
        return cls(
            # no glob (the schema refuses an empty list) matches nothing
            re.compile("|".join(fnmatch.translate(p) for p in namespaces) or "(?!)")
            if namespaces is not None
            else None,
            tuple(kinds) if kinds is not None else None,
            terms.labels,
            terms.requesters,
        )


@dataclass(frozen=True, slots=True)
class CompiledPolicy:
    """An InferencePolicy ready to evaluate."""

    document: InferencePolicyDocument
    source: str
    image_rules: tuple[CompiledImageRule, ...]
    expressions: tuple[CompiledExpression, ...]
    expressions_read_workload: bool
    manifest_max_age: timedelta | None
    toolchain_patterns: tuple[ImagePattern, ...]
    #: the policy judges GPU fit, which reads the Pod's node selection
    judges_scheduling: bool = False
    #: a models expression reads ``now``, the evaluation clock
    expressions_read_now: bool = False
    #: ``models.engines`` compiled (None: unset, or no ``models``)
    engine_patterns: tuple[ImagePattern, ...] | None = None
    #: ``rules_for``'s answers (bounded: emptied when full)
    _rules_for: dict[tuple[str, str, str | None, str | None, str], tuple[CompiledImageRule, ...]] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )
    # Read from the (frozen) document once: every admission asks for them, and each attribute of a pydantic
    # model costs several times a slot's (its ``__getattr__`` keeps the interpreter from specialising it).
    #: The policy's ``metadata.name``.
    name: str = field(init=False, compare=False, repr=False)
    #: The policy's ``spec``.
    spec: InferencePolicySpec = field(init=False, compare=False, repr=False)
    #: ``spec.match``'s terms.
    match: FilterTerms = field(init=False, compare=False, repr=False)
    #: ``spec.exclude``'s terms (None: no ``exclude``).
    exclude: FilterTerms | None = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        spec = self.document.spec
        object.__setattr__(self, "name", self.document.metadata.name)
        object.__setattr__(self, "spec", spec)
        object.__setattr__(self, "match", FilterTerms.of(spec.match))
        exclude = spec.exclude
        object.__setattr__(self, "exclude", FilterTerms.of(exclude) if exclude is not None else None)

    def rules_for(self, reference: ImageReference, field: str) -> tuple[CompiledImageRule, ...]:
        """The image rules that judge ``reference`` named in ``field``, in order (remembered: admissions ask
        about the same few images again and again, and the answer depends on nothing else)."""
        # Keyed by the fields ImageReference's equality compares: a tuple of strings hashes in C, where the
        # reference's own hash is a method call on every admission.
        key = (reference.registry, reference.repository, reference.tag, reference.digest, field)
        found = self._rules_for.get(key)
        if found is None:
            if len(self._rules_for) >= _SELECTED_MAX:
                self._rules_for.clear()
            found = tuple(r for r in self.image_rules if r.applies_to(reference, field))
            self._rules_for[key] = found
        return found


@dataclass(frozen=True, slots=True)
class PolicySet:
    """Every loaded policy and signer, with the revision digest of the files they came from."""

    policies: tuple[CompiledPolicy, ...]
    signers: Mapping[str, Signer]
    revision: str
    sources: tuple[Path, ...] = field(default=())
    kinds: KindRegistry = DEFAULT_KINDS
    """The workload kinds: built-in, shipped, and the set's ``WorkloadKind`` documents."""
    key_files: tuple[tuple[Path, str], ...] = ()
    """The key, certificate and trust-root files the signers read, with the SHA-256 of the bytes read."""

    @property
    def allow_list_files(self) -> tuple[tuple[Path, str], ...]:
        """The ``allowFrom`` files the policies read, each with the SHA-256 of the bytes read (``serve``
        watches them beside the policy files)."""
        return tuple(
            dict.fromkeys(
                path
                for policy in self.policies
                for rule in policy.image_rules
                for entry in rule.attestations
                for alternative in entry
                for path in alternative.allow_files
            )
        )

    @property
    def read_files(self) -> tuple[tuple[Path, str], ...]:
        """Every file besides the policy documents that the set was loaded from (allow-lists, keys), each
        with the SHA-256 of the bytes read: ``serve`` watches them like the policy files."""
        return tuple(dict.fromkeys((*self.allow_list_files, *self.key_files)))

    def signers_for(self, refs: Iterable[str]) -> dict[str, Signer]:
        """The signers named by ``refs`` (all of them exist: the loader checked)."""
        return {ref: self.signers[ref] for ref in refs}


def policy_files(paths: Sequence[Path]) -> list[Path]:
    """The candidate policy files under ``paths``: files as given, directories walked (skipping ``tests/``,
    ``testdata/``, dot-folders and vulnerability allow-lists, ``*.allow.yaml``), sorted.
    :func:`load_policy_set` leaves out those of a Notation configuration directory."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            for candidate in sorted(path.rglob("*")):
                relative = candidate.relative_to(path).parts
                if any(part in _SKIPPED_DIRECTORIES or part.startswith(".") for part in relative[:-1]):
                    continue
                if (
                    candidate.is_file()
                    and candidate.suffix in _POLICY_SUFFIXES
                    and not candidate.name.endswith(ALLOW_LIST_SUFFIXES)
                ):
                    found.append(candidate)
        elif path.is_file():
            found.append(path)
        else:
            raise PolicyLoadError([f"{path}: no such file or directory"])
    if not found:
        raise PolicyLoadError([f"no policy files (*.yaml, *.yml, *.json) under {', '.join(map(str, paths))}"])
    return found


def load_policy_set(paths: Path | Sequence[Path]) -> PolicySet:
    """Load and compile every policy document under ``paths``.

    A folder that a TrustedKeys ``notationConfig`` entry names is Notation's: the files Notation keeps there
    (:func:`_notations_own`) are read through that signer only, never as policies, and any other policy file
    placed in it is a problem (it would otherwise be silently skipped or misread). Raises
    :class:`PolicyLoadError` listing every problem; nothing is returned partly.
    """
    files = policy_files([paths] if isinstance(paths, Path) else list(paths))
    reads = [_read_file(path) for path in files]
    notation = _notation_directories(reads)
    problems: list[str] = []
    digest = hashlib.sha256()
    key_docs: list[tuple[TrustedKeysDocument, Document, Path]] = []
    policy_docs: list[tuple[InferencePolicyDocument, Document, Path]] = []
    kind_docs: list[tuple[WorkloadKindDocument, Document, Path]] = []
    written: list[tuple[Document, Path]] = []  # every InferencePolicy document, valid or not
    sources: list[Path] = []
    for read in reads:
        path = read.path
        owner = next((folder for folder in notation if _lexical(path).is_relative_to(folder)), None)
        if owner is not None:
            if not _notations_own(_lexical(path).relative_to(owner)):
                problems.append(
                    f"{path}: is inside the Notation configuration directory {owner} (a notationConfig "
                    "folder), where only Notation's own files belong; it is not read as a policy: move it "
                    "out of that folder"
                )
            continue  # Notation's: read through its notationConfig signer, which adds it to the revision
        sources.append(path)
        if read.raw is None:
            problems += read.problems
            continue
        digest.update(f"{path.name}\0{len(read.raw)}\0".encode())
        digest.update(read.raw)
        problems += read.problems
        if path.name in _NOTATION_DOCUMENTS and read.problems and not read.parsed:
            problems.append(
                f"{path}: if this is Notation's trust policy, name its folder in a TrustedKeys key "
                "(notationConfig: {directory: …}): only then is it read as Notation's (policies/README.md)"
            )
        written += [(document, path) for document in read.written]
        for document, parsed in read.parsed:
            if isinstance(parsed, TrustedKeysDocument):
                key_docs.append((parsed, document, path))
            elif isinstance(parsed, InferencePolicyDocument):
                policy_docs.append((parsed, document, path))
            else:
                kind_docs.append((parsed, document, path))
    files = sources

    key_files: list[tuple[Path, str]] = []
    signers = load_signers(key_docs, problems, digest, key_files)
    kinds = registry(kind_docs, problems)
    problems += kind_name_problems(written, kinds)
    for doc, document, path in policy_docs:
        problems += _engine_pattern_problems(doc, document, path)
    policies = _compile_policies(policy_docs, signers, problems, digest)
    if problems:
        raise PolicyLoadError(problems)
    if not policies:
        raise PolicyLoadError([f"no InferencePolicy documents in {', '.join(map(str, files))}"])
    return PolicySet(
        policies=tuple(policies),
        signers=signers,
        revision=f"sha256:{digest.hexdigest()}",
        sources=tuple(files),
        kinds=kinds,
        key_files=tuple(dict.fromkeys(key_files)),
    )


@dataclass(frozen=True, slots=True)
class _FileRead:
    """One candidate policy file: its bytes (None when unreadable), its documents parsed, its problems."""

    path: Path
    raw: bytes | None
    parsed: tuple[tuple[Document, TrustedKeysDocument | InferencePolicyDocument | WorkloadKindDocument], ...]
    problems: tuple[str, ...]
    #: Its InferencePolicy documents as written, valid or not (their kind names are checked either way).
    written: tuple[Document, ...] = ()


def _read_file(path: Path) -> _FileRead:
    problems: list[str] = []
    raw = _read(path, problems)
    if raw is None:
        return _FileRead(path, None, (), tuple(problems))
    try:
        documents = list(load_documents(decode(raw, str(path)), str(path)))
    except InputError as error:
        return _FileRead(path, raw, (), (str(error),))
    if not documents:
        # An emptied or truncated file must not silently drop its policies from the set.
        problems.append(
            f"{path}: holds no policy documents (it is empty or only comments); delete the file if it is "
            "not meant to hold policies"
        )
    parsed = []
    for document in documents:
        found = _parse_document(document, path, problems)
        if found is not None:
            parsed.append((document, found))
    written = tuple(
        d for d in documents if isinstance(d.data, dict) and d.data.get("kind") == "InferencePolicy"
    )
    return _FileRead(path, raw, tuple(parsed), tuple(problems), written)


def _lexical(path: Path) -> Path:
    """``path`` absolute and normalised without resolving links (as the loader names files)."""
    return Path(os.path.normpath(path.absolute()))


def _notation_directories(reads: Sequence[_FileRead]) -> tuple[Path, ...]:
    """The folders that TrustedKeys ``notationConfig`` entries name (relative to their policy file)."""
    found = {
        _lexical(read.path.parent / key.notation_config.directory)
        for read in reads
        for _, parsed in read.parsed
        if isinstance(parsed, TrustedKeysDocument)
        for key in parsed.spec.keys
        if key.notation_config is not None
    }
    return tuple(sorted(found))


def _notations_own(relative: Path) -> bool:
    """True for what Notation keeps in its configuration directory: its documents at the top, and anything
    under ``truststore/``, ``plugins/`` or ``localkeys/`` (certificates may have any name)."""
    parts = relative.parts
    if len(parts) == 1:
        return parts[0] in _NOTATION_DOCUMENTS | _NOTATION_SETTINGS
    return parts[0] in _NOTATION_FOLDERS


def _engine_pattern_problems(doc: InferencePolicyDocument, document: Document, path: Path) -> list[str]:
    """``models.engines`` patterns that do not compile (:class:`CompiledPolicy` holds them compiled)."""
    found = []
    for index, text in enumerate(doc.spec.models.engines or [] if doc.spec.models is not None else []):
        try:
            ImagePattern.compile(text)
        except PatternError as error:
            line = document.line_of(("spec", "models", "engines", index))
            found.append(f"{path}:{line}: spec.models.engines[{index}]: {error}")
    return found


def _read(path: Path, problems: list[str]) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError as error:
        problems.append(f"{path}: cannot read: {error.strerror}")
        return None


def _parse_document(
    document: Document, path: Path, problems: list[str]
) -> TrustedKeysDocument | InferencePolicyDocument | WorkloadKindDocument | None:
    data = document.data
    where = f"{path}:{document.line}"
    if data is None:
        problems.append(
            f"{where}: empty document (a '---' with nothing after it, or null); remove it or finish the "
            "document"
        )
        return None
    if not isinstance(data, dict):
        problems.append(f"{where}: a policy document must be a mapping with apiVersion, kind, metadata, spec")
        return None
    kind = data.get("kind")
    model: type[TrustedKeysDocument] | type[InferencePolicyDocument] | type[WorkloadKindDocument]
    if kind == "TrustedKeys":
        model = TrustedKeysDocument
    elif kind == "InferencePolicy":
        model = InferencePolicyDocument
    elif kind == "WorkloadKind":
        model = WorkloadKindDocument
    else:
        problems.append(
            f"{where}: kind {kind!r} is not a policy document; expected TrustedKeys, InferencePolicy or "
            f"WorkloadKind (apiVersion {API_VERSION})"
        )
        return None
    try:
        return model.model_validate(data)
    except ValidationError as error:
        problems.extend(_describe(error, document, path))
        return None


def _describe(error: ValidationError, document: Document, path: Path) -> list[str]:
    found = []
    for item in error.errors(include_url=False):
        loc = tuple(item["loc"])
        shown_path = field_path(loc)
        line = document.line_of(loc)
        message = item["msg"]
        value = item.get("input")
        shown = "" if item["type"] in ("missing", "extra_forbidden") else f" (got {short_repr(value)})"
        if item["type"] == "extra_forbidden":
            message = "unknown key (check the spelling against `trtguard schema policy`)"
        elif item["type"] == "missing":
            message = "required key is missing"
        elif value is None and "input" in item:
            # A key with nothing after it, as a file cut off while being written leaves it. The schema refuses
            # null everywhere (policies.schema._Model) with a message of its own.
            message = message.removeprefix("Value error, ")
            shown = "" if item["type"] == "value_error" else " (got null)"
        found.append(f"{path}:{line}: {shown_path or '<document>'}: {message}{shown}")
    return found


def _key_refs(doc: InferencePolicyDocument) -> list[tuple[tuple[str | int, ...], str]]:
    """Every key reference in a policy with the path it sits at."""
    spec = doc.spec
    refs: list[tuple[tuple[str | int, ...], str]] = []
    for i, rule in enumerate(spec.images):
        if rule.signatures:
            refs += [
                (("spec", "images", i, "signatures", "keys", k), r)
                for k, r in enumerate(rule.signatures.keys)
            ]
        for j, alternatives in enumerate(rule.attestation_alternatives()):
            for n, attestation in enumerate(alternatives):
                at: tuple[str | int, ...] = ("spec", "images", i, "attestations", j)
                base = (*at, "anyOf", n, "keys") if len(alternatives) > 1 else (*at, "keys")
                refs += [((*base, k), r) for k, r in enumerate(attestation.keys)]
    if spec.models is not None:
        for name in ("build_manifest", "verification"):
            rule = getattr(spec.models, name)
            if rule is not None:
                camel = "buildManifest" if name == "build_manifest" else name
                refs += [(("spec", "models", camel, "keys", k), r) for k, r in enumerate(rule.keys)]
        built = spec.models.build_manifest
        for field, inputs in (
            ("onnxSignedBy", built.onnx_signed_by if built is not None else None),
            ("calibrationSignedBy", built.calibration_signed_by if built is not None else None),
        ):
            if inputs is not None:
                base = ("spec", "models", "buildManifest", field, "keys")
                refs += [((*base, k), r) for k, r in enumerate(inputs.keys)]
    if spec.change_control is not None:
        keys = spec.change_control.approvals.keys
        refs += [(("spec", "changeControl", "approvals", "keys", k), r) for k, r in enumerate(keys)]
    return refs


def _compile_policies(
    docs: list[tuple[InferencePolicyDocument, Document, Path]],
    signers: Mapping[str, Signer],
    problems: list[str],
    digest: Any,
) -> list[CompiledPolicy]:
    compiled: list[CompiledPolicy] = []
    seen: dict[str, str] = {}
    for doc, document, path in docs:
        where = f"{path}:{document.line}"
        name = doc.metadata.name
        if name in seen:
            problems.append(f"{where}: InferencePolicy {name!r} is already defined at {seen[name]}")
            continue
        seen[name] = where
        before = len(problems)
        lists: dict[tuple[str | int, ...], list[tuple[tuple[str | int, ...], str]]] = {}
        for loc, ref in _key_refs(doc):
            if ref not in signers:
                problems.append(
                    f"{path}:{document.line_of(loc)}: {field_path(loc)}: key {ref!r} is not defined "
                    f"(known: {', '.join(sorted(signers)) or 'none'}); add it to a TrustedKeys document"
                )
            else:
                lists.setdefault(loc[:-1], []).append((loc, ref))
        for list_loc, entries in lists.items():
            refs = [ref for _, ref in entries]
            keyless_allowed = "signatures" in list_loc  # only image signatures may be keyless (or Notation)
            # OpenPGP signatures over a statement's bytes: build manifests and change approvals.
            model_signing_only = list_loc[3:4] in (("onnxSignedBy",), ("calibrationSignedBy",))
            openpgp_allowed = not model_signing_only and list_loc[:3] in (
                ("spec", "models", "buildManifest"),
                ("spec", "changeControl", "approvals"),
            )
            problems += [
                f"{path}:{document.line_of(entries[index][0])}: {field_path(list_loc)}: {text}"
                for index, text in signer_list_problems(
                    refs,
                    signers,
                    keyless_allowed=keyless_allowed,
                    openpgp_allowed=openpgp_allowed,
                    model_signing_only=model_signing_only,
                )
            ]
        image_rules = []
        for i, rule in enumerate(doc.spec.images):
            compiled_lists: dict[str, list[ImagePattern]] = {"match": [], "exclude": []}
            for key, texts in (("match", rule.match), ("exclude", rule.exclude)):
                for j, text in enumerate(texts):
                    try:
                        compiled_lists[key].append(ImagePattern.compile(text))
                    except PatternError as error:
                        line = document.line_of(("spec", "images", i, key, j))
                        problems.append(f"{path}:{line}: spec.images[{i}].{key}[{j}]: {error}")
            attestations = [
                tuple(
                    compile_attestation(
                        attestation,
                        ("spec", "images", i, "attestations", j, *(("anyOf", n) if len(each) > 1 else ())),
                        document,
                        path,
                        problems,
                        digest,
                    )
                    for n, attestation in enumerate(each)
                )
                for j, each in enumerate(rule.attestation_alternatives())
            ]
            image_rules.append(
                CompiledImageRule(
                    rule=rule,
                    patterns=tuple(compiled_lists["match"]),
                    excluded=tuple(compiled_lists["exclude"]),
                    attestations=tuple(attestations),
                )
            )
        expressions = []
        toolchain_patterns: list[ImagePattern] = []
        max_age = None
        models = doc.spec.models
        if models is not None:
            for i, expression in enumerate(models.rules.expressions):
                loc = ("spec", "models", "rules", "expressions", i, "cel")
                program = compile_condition(expression.cel, CEL_VARIABLES, loc, document, path, problems)
                if program is None:
                    continue
                expressions.append(
                    CompiledExpression(
                        name=expression.name or f"expressions[{i}]",
                        program=program,
                        message=expression.message,
                    )
                )
            toolchain = models.rules.toolchain
            for j, text in enumerate(toolchain.allowed or [] if toolchain else []):
                try:
                    toolchain_patterns.append(ImagePattern.compile(text))
                except PatternError as error:
                    line = document.line_of(("spec", "models", "rules", "toolchain", "allowed", j))
                    problems.append(f"{path}:{line}: spec.models.rules.toolchain.allowed[{j}]: {error}")
            if models.build_manifest is not None and models.build_manifest.max_age is not None:
                max_age = parse_duration(models.build_manifest.max_age)
        try:
            engines = None if models is None or models.engines is None else models.engines
            engine_patterns = None if engines is None else tuple(ImagePattern.compile(t) for t in engines)
        except PatternError:
            continue  # reported by _engine_pattern_problems: the set does not load
        if len(problems) > before:
            continue
        compiled.append(
            CompiledPolicy(
                document=doc,
                source=where,
                image_rules=tuple(image_rules),
                expressions=tuple(expressions),
                # Handing the object to CEL costs a scan and a conversion; skip it when nothing reads it.
                expressions_read_workload=any(_WORKLOAD_NAME.search(e.program.source) for e in expressions),
                # The clock changes on every admission: such expressions cannot share a prepared activation.
                expressions_read_now=any(_NOW_NAME.search(e.program.source) for e in expressions),
                manifest_max_age=max_age,
                toolchain_patterns=tuple(toolchain_patterns),
                judges_scheduling=models is not None and models.rules.gpu_compatibility is not None,
                engine_patterns=engine_patterns,
            )
        )
    return compiled

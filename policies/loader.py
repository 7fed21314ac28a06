"""Load policy files into a compiled, immutable :class:`PolicySet`.

Everything that can be checked before a workload arrives is checked here, and every problem is reported with
its file, line and field: schema errors, unknown keys, duplicate names, key references that point nowhere,
keys that do not parse, image patterns that are not normalised, CEL expressions that do not compile. A set
with any problem does not load at all (never partly), so that the previous set stays in force in a running
server.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from pydantic import ValidationError

from policies.cel import CelCompileError, CelProgram, compile_expression
from policies.kind_schema import WorkloadKindDocument
from policies.kinds import KindRegistry
from policies.operator_kinds import DEFAULT_KINDS
from policies.patterns import ImagePattern, PatternError, matches_any
from policies.schema import (
    API_VERSION,
    AttestationRule,
    ImageRule,
    InferencePolicyDocument,
    TrustedKeysDocument,
    parse_duration,
)
from policies.signers import Signer, load_signers, signer_list_problems
from policies.workload_kinds import kind_name_problems, registry
from verifier.base import Document, ImageReference, InputError, decode, load_documents, short_repr, visible
from verifier.scans import is_scan_predicate_type

#: Names that CEL expressions may refer to.
CEL_VARIABLES = ("manifest", "workload", "engine")
#: Names that attestation conditions may refer to (``scan`` only for the SBOM and scan predicate types).
CONDITION_VARIABLES = ("predicate", "scan")

_POLICY_SUFFIXES = (".yaml", ".yml", ".json")
# `workload`, or `engine` beyond its name, reference and digest (its containers, templates: the workload's)
_WORKLOAD_NAME = re.compile(r"\bworkload\b|\bengine\b(?!\s*\.\s*(?:name|reference|digest)\b)")
# A policy directory may carry test suites beside the policies; they are not policies.
_SKIPPED_DIRECTORIES = frozenset({"tests", "testdata"})
#: Notation's trust policy documents: read through a ``notationConfig`` signer, never as policy documents, so
#: that a Notation configuration can live (and be watched for changes) inside a policy folder.
_NOTATION_DOCUMENTS = frozenset({"trustpolicy.json", "trustpolicy.oci.json", "trustpolicy.blob.json"})


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


@dataclass(frozen=True, slots=True)
class CompiledExpression:
    """A CEL expression of a policy, compiled, with its message."""

    name: str
    program: CelProgram
    message: str


#: How many references an image rule remembers whether it selects.
_SELECTED_MAX = 4096


@dataclass(frozen=True, slots=True)
class CompiledImageRule:
    """An image rule with its patterns compiled."""

    rule: ImageRule
    patterns: tuple[ImagePattern, ...]
    excluded: tuple[ImagePattern, ...]
    #: per entry of ``rule.attestations``: its conditions compiled, and its maxAge
    conditions: tuple[tuple[CompiledExpression, ...], ...] = ()
    max_ages: tuple[timedelta | None, ...] = ()
    #: ``selects``' answers: admissions ask about the same few images again and again, and the answer
    #: depends on nothing else (bounded: emptied when full)
    _selected: dict[ImageReference, bool] = field(default_factory=dict, init=False, compare=False, repr=False)

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
class CompiledPolicy:
    """An InferencePolicy ready to evaluate."""

    document: InferencePolicyDocument
    source: str
    namespace_patterns: tuple[str, ...] | None
    exclude_namespace_patterns: tuple[str, ...] | None
    image_rules: tuple[CompiledImageRule, ...]
    expressions: tuple[CompiledExpression, ...]
    expressions_read_workload: bool
    manifest_max_age: timedelta | None
    toolchain_patterns: tuple[ImagePattern, ...]
    #: the policy judges GPU fit, which reads the Pod's node selection
    judges_scheduling: bool = False

    @property
    def name(self) -> str:
        """The policy's ``metadata.name``."""
        return self.document.metadata.name


@dataclass(frozen=True, slots=True)
class PolicySet:
    """Every loaded policy and signer, with the revision digest of the files they came from."""

    policies: tuple[CompiledPolicy, ...]
    signers: Mapping[str, Signer]
    revision: str
    sources: tuple[Path, ...] = field(default=())
    kinds: KindRegistry = DEFAULT_KINDS
    """The workload kinds: built-in, shipped, and the set's ``WorkloadKind`` documents."""

    def signers_for(self, refs: Iterable[str]) -> dict[str, Signer]:
        """The signers named by ``refs`` (all of them exist: the loader checked)."""
        return {ref: self.signers[ref] for ref in refs}


def policy_files(paths: Sequence[Path]) -> list[Path]:
    """The policy files under ``paths``: files as given, directories walked (skipping ``tests/`` and
    Notation's ``trustpolicy*.json``), sorted."""
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
                    and candidate.name not in _NOTATION_DOCUMENTS
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

    Raises :class:`PolicyLoadError` listing every problem; nothing is returned partly.
    """
    files = policy_files([paths] if isinstance(paths, Path) else list(paths))
    problems: list[str] = []
    digest = hashlib.sha256()
    key_docs: list[tuple[TrustedKeysDocument, Document, Path]] = []
    policy_docs: list[tuple[InferencePolicyDocument, Document, Path]] = []
    kind_docs: list[tuple[WorkloadKindDocument, Document, Path]] = []
    written: list[tuple[Document, Path]] = []  # every InferencePolicy document, valid or not
    for path in files:
        raw = _read(path, problems)
        if raw is None:
            continue
        digest.update(f"{path.name}\0{len(raw)}\0".encode())
        digest.update(raw)
        try:
            documents = list(load_documents(decode(raw, str(path)), str(path)))
        except InputError as error:
            problems.append(str(error))
            continue
        if not documents:
            # An emptied or truncated file must not silently drop its policies from the set.
            problems.append(
                f"{path}: holds no policy documents (it is empty or only comments); delete the file if it is "
                "not meant to hold policies"
            )
        for document in documents:
            if isinstance(document.data, dict) and document.data.get("kind") == "InferencePolicy":
                written.append((document, path))
            parsed = _parse_document(document, path, problems)
            if isinstance(parsed, TrustedKeysDocument):
                key_docs.append((parsed, document, path))
            elif isinstance(parsed, InferencePolicyDocument):
                policy_docs.append((parsed, document, path))
            elif isinstance(parsed, WorkloadKindDocument):
                kind_docs.append((parsed, document, path))

    signers = load_signers(key_docs, problems, digest)
    kinds = registry(kind_docs, problems)
    problems += kind_name_problems(written, kinds)
    for doc, document, path in policy_docs:
        problems += _engine_pattern_problems(doc, document, path)
    policies = _compile_policies(policy_docs, signers, problems)
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
    )


def _engine_pattern_problems(doc: InferencePolicyDocument, document: Document, path: Path) -> list[str]:
    """``models.engines`` patterns that do not compile (policies.engines compiles them when it judges)."""
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


def _field_path(loc: Sequence[str | int]) -> str:
    """``("spec", "images", 0, "match")`` → ``spec.images[0].match``."""
    return ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in loc).replace(".[", "[")


def _describe(error: ValidationError, document: Document, path: Path) -> list[str]:
    found = []
    for item in error.errors(include_url=False):
        loc = tuple(item["loc"])
        field_path = _field_path(loc)
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
        found.append(f"{path}:{line}: {field_path or '<document>'}: {message}{shown}")
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
        for j, attestation in enumerate(rule.attestations):
            base = ("spec", "images", i, "attestations", j, "keys")
            refs += [((*base, k), r) for k, r in enumerate(attestation.keys)]
    if spec.models is not None:
        for name in ("build_manifest", "verification"):
            rule = getattr(spec.models, name)
            if rule is not None:
                camel = "buildManifest" if name == "build_manifest" else name
                refs += [(("spec", "models", camel, "keys", k), r) for k, r in enumerate(rule.keys)]
    if spec.change_control is not None:
        keys = spec.change_control.approvals.keys
        refs += [(("spec", "changeControl", "approvals", "keys", k), r) for k, r in enumerate(keys)]
    return refs


def _compile_policies(
    docs: list[tuple[InferencePolicyDocument, Document, Path]],
    signers: Mapping[str, Signer],
    problems: list[str],
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
                    f"{path}:{document.line_of(loc)}: {_field_path(loc)}: key {ref!r} is not defined "
                    f"(known: {', '.join(sorted(signers)) or 'none'}); add it to a TrustedKeys document"
                )
            else:
                lists.setdefault(loc[:-1], []).append((loc, ref))
        for list_loc, entries in lists.items():
            refs = [ref for _, ref in entries]
            keyless_allowed = "signatures" in list_loc  # only image signatures may be keyless (or Notation)
            # OpenPGP signatures over a statement's bytes: build manifests and change approvals.
            openpgp_allowed = list_loc[:3] in (
                ("spec", "models", "buildManifest"),
                ("spec", "changeControl", "approvals"),
            )
            problems += [
                f"{path}:{document.line_of(entries[index][0])}: {_field_path(list_loc)}: {text}"
                for index, text in signer_list_problems(
                    refs, signers, keyless_allowed=keyless_allowed, openpgp_allowed=openpgp_allowed
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
            conditions = [
                _compile_conditions(
                    attestation, ("spec", "images", i, "attestations", j), document, path, problems
                )
                for j, attestation in enumerate(rule.attestations)
            ]
            image_rules.append(
                CompiledImageRule(
                    rule=rule,
                    patterns=tuple(compiled_lists["match"]),
                    excluded=tuple(compiled_lists["exclude"]),
                    conditions=tuple(conditions),
                    max_ages=tuple(
                        parse_duration(a.max_age) if a.max_age is not None else None
                        for a in rule.attestations
                    ),
                )
            )
        expressions = []
        toolchain_patterns: list[ImagePattern] = []
        max_age = None
        models = doc.spec.models
        if models is not None:
            for i, expression in enumerate(models.rules.expressions):
                loc = ("spec", "models", "rules", "expressions", i, "cel")
                try:
                    program = compile_expression(
                        expression.cel,
                        variables=CEL_VARIABLES,
                        location=f"{path}:{document.text_line_of(loc)} {_field_path(loc)}",
                        expect_bool=True,
                    )
                except CelCompileError as error:
                    problems.append(str(error) + (f" ({error.hint})" if error.hint else ""))
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
        if len(problems) > before:
            continue
        match, exclude = doc.spec.match, doc.spec.exclude
        compiled.append(
            CompiledPolicy(
                document=doc,
                source=where,
                namespace_patterns=tuple(match.namespaces) if match.namespaces is not None else None,
                exclude_namespace_patterns=tuple(exclude.namespaces)
                if exclude is not None and exclude.namespaces is not None
                else None,
                image_rules=tuple(image_rules),
                expressions=tuple(expressions),
                # Handing the object to CEL costs a scan and a conversion; skip it when nothing reads it.
                expressions_read_workload=any(_WORKLOAD_NAME.search(e.program.source) for e in expressions),
                manifest_max_age=max_age,
                toolchain_patterns=tuple(toolchain_patterns),
                judges_scheduling=models is not None and models.rules.gpu_compatibility is not None,
            )
        )
    return compiled


def _compile_conditions(
    rule: AttestationRule,
    loc: tuple[str | int, ...],
    document: Document,
    path: Path,
    problems: list[str],
) -> tuple[CompiledExpression, ...]:
    """The CEL conditions of one image attestation rule; ``scan`` only where the predicate is read as one."""
    variables = CONDITION_VARIABLES if is_scan_predicate_type(rule.predicate_type) else ("predicate",)
    compiled = []
    for k, condition in enumerate(rule.conditions):
        where = (*loc, "conditions", k, "cel")
        try:
            program = compile_expression(
                condition.cel,
                variables=variables,
                location=f"{path}:{document.text_line_of(where)} {_field_path(where)}",
                expect_bool=True,
            )
        except CelCompileError as error:
            hint = error.hint
            if "scan" not in variables and re.search(r"\bscan\b", condition.cel):
                hint = f"`scan` is set only for SBOMs and scans; read `predicate` for {rule.predicate_type}"
            problems.append(str(error) + (f" ({hint})" if hint else ""))
            continue
        compiled.append(
            CompiledExpression(
                name=condition.name or f"conditions[{k}]", program=program, message=condition.message
            )
        )
    return tuple(compiled)

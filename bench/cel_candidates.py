"""Compare the CEL libraries on PyPI for trtguard: correctness against the CEL spec first, then speed.

Run from the repository root::

    .venv/bin/python bench/cel_candidates.py                 # both tables
    .venv/bin/python bench/cel_candidates.py --only speed --iterations 5000

Every candidate that is importable is measured; the others are listed as missing. The candidates are
``cel-expr-python`` (Google's cel-cpp binding), ``common-expression-language`` (Rust ``cel`` crate via
PyO3), ``cel-python`` (``celpy``, pure Python, both of its runners) and, where installed, ``celparser``.
``trtguard`` is our wrapper (``policies.cel``) on top of the chosen library: its rows show what
the policy evaluator pays, input guards included. The speed baseline is the same check written as a plain
Python lambda, measured in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import functools
import importlib.metadata
import io
import json
import math
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ERROR = object()  # expected outcome: the expression must fail (at compile time or at evaluation)


class Failed(Exception):
    """The candidate reported an error; ``typed`` is false when it leaked a bare Python exception."""

    def __init__(self, stage: str, detail: str, *, typed: bool = True) -> None:
        super().__init__(f"{stage}: {detail}")
        self.stage = stage
        self.typed = typed


# --------------------------------------------------------------------------------------------------
# Candidates: each compiles a source once, binds an activation (the per-workload conversion cost) and
# runs a compiled program against a bound activation, returning plain Python values.


@dataclass
class Candidate:
    name: str
    distribution: str
    module: str
    compile: Callable[[str, Sequence[str]], Any]
    bind: Callable[[Any, Mapping[str, Any]], Any]  # (program, values) -> what `run` takes
    run: Callable[[Any, Any], Any]
    #: the values handed to ``run`` can be reused by every program of the same variable set
    shared_binding: bool = True

    @property
    def version(self) -> str:
        try:
            return importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            return "-"


def _cel_expr_python() -> Candidate:
    from cel_expr_python import cel  # noqa: PLC0415 - candidates are optional

    envs: dict[tuple[str, ...], Any] = {}

    def env_for(variables: Sequence[str]) -> Any:
        key = tuple(sorted(variables))
        if key not in envs:
            envs[key] = cel.NewEnv(variables=dict.fromkeys(key, cel.Type.DYN))
        return envs[key]

    def compile_(source: str, variables: Sequence[str]) -> Any:
        env = env_for(variables)
        try:
            return env, env.compile(source)
        except RuntimeError as exc:
            raise Failed("compile", str(exc).splitlines()[0]) from None

    def bind(program: Any, values: Mapping[str, Any]) -> Any:
        env, _ = program
        return env.Activation(dict(values))

    def run(program: Any, activation: Any) -> Any:
        _, expression = program
        value = expression.eval(activation)
        if value.type() == cel.Type.ERROR:
            raise Failed("eval", str(value.value()))
        return value.plain_value()

    return Candidate("cel-expr-python", "cel-expr-python", "cel_expr_python.cel", compile_, bind, run)


def _common_expression_language() -> Candidate:
    import cel  # noqa: PLC0415

    def compile_(source: str, _variables: Sequence[str]) -> Any:
        try:
            return cel.compile(source)
        except ValueError as exc:
            raise Failed("compile", str(exc).splitlines()[0]) from None

    def bind(_program: Any, values: Mapping[str, Any]) -> Any:
        return cel.Context(variables=dict(values))

    def run(program: Any, context: Any) -> Any:
        try:
            return program.execute(context)
        except Exception as exc:
            # it reports evaluation errors as built-in exceptions; ValueError, RuntimeError and TypeError
            # are its documented ones, others (KeyError, IndexError, OverflowError, ...) are leaks
            typed = isinstance(exc, ValueError | RuntimeError | TypeError)
            raise Failed("eval", f"{type(exc).__name__}: {exc}", typed=typed) from None

    return Candidate("common-expression-language", "common-expression-language", "cel", compile_, bind, run)


def _celpy(runner: str) -> Candidate:
    import celpy  # noqa: PLC0415
    from celpy import celtypes  # noqa: PLC0415
    from celpy.adapter import json_to_cel  # noqa: PLC0415
    from celpy.celparser import CELParseError  # noqa: PLC0415
    from celpy.evaluation import CELEvalError  # noqa: PLC0415

    runner_class = celpy.CompiledRunner if runner == "compiled" else celpy.InterpretedRunner
    env = celpy.Environment(runner_class=runner_class)
    # the compiled runner prints "Internal error: ..." on stdout for every evaluation error
    quiet: Callable[[], contextlib.AbstractContextManager[Any]] = (
        (lambda: contextlib.redirect_stdout(io.StringIO()))
        if runner == "compiled"
        else contextlib.nullcontext
    )

    def plain(value: Any) -> Any:
        if isinstance(value, celtypes.BoolType):
            return bool(value)
        if isinstance(value, celtypes.DoubleType):
            return float(value)
        if isinstance(value, int):
            return int(value)
        if isinstance(value, celtypes.StringType):
            return str(value)
        if isinstance(value, list):
            return [plain(item) for item in value]
        if isinstance(value, dict):
            return {plain(k): plain(v) for k, v in value.items()}
        if isinstance(value, celtypes.TimestampType):
            return dt.datetime.fromtimestamp(value.timestamp(), tz=dt.UTC)
        if isinstance(value, celtypes.DurationType):
            return dt.timedelta(seconds=value.total_seconds())
        return value

    def compile_(source: str, _variables: Sequence[str]) -> Any:
        try:
            return env.program(env.compile(source))
        except CELParseError as exc:
            raise Failed("compile", str(exc).splitlines()[0]) from None

    def bind(_program: Any, values: Mapping[str, Any]) -> Any:
        return {name: json_to_cel(value) for name, value in values.items()}

    def run(program: Any, activation: Any) -> Any:
        try:
            with quiet():
                result = program.evaluate(activation)
        except CELEvalError as exc:
            raise Failed("eval", str(exc.args[0]) if exc.args else repr(exc)) from None
        except Exception as exc:  # recorded: the library leaked an untyped error
            raise Failed("eval", f"{type(exc).__name__}: {exc}", typed=False) from None
        if isinstance(result, CELEvalError):
            raise Failed("eval", str(result))
        return plain(result)

    label = "cel-python (compiled runner)" if runner == "compiled" else "cel-python"
    return Candidate(label, "cel-python", "celpy", compile_, bind, run)


def _celparser() -> Candidate:
    import celparser  # type: ignore[import-not-found]  # noqa: PLC0415

    def compile_(source: str, _variables: Sequence[str]) -> Any:
        try:
            return celparser.compile(source, allow_undeclared_vars=False)
        except celparser.CELError as exc:
            raise Failed("compile", str(exc)) from None

    def bind(_program: Any, values: Mapping[str, Any]) -> Any:
        return dict(values)

    def run(program: Any, values: Any) -> Any:
        try:
            return program(values)
        except celparser.CELError as exc:
            raise Failed("eval", str(exc)) from None
        except Exception as exc:  # recorded: the library leaked an untyped error
            raise Failed("eval", f"{type(exc).__name__}: {exc}", typed=False) from None

    return Candidate("celparser", "celparser", "celparser", compile_, bind, run)


def _trtguard() -> Candidate:
    from policies import cel as wrapper  # noqa: PLC0415

    def compile_(source: str, variables: Sequence[str]) -> Any:
        try:
            return wrapper.compile_expression(source, variables=variables)
        except wrapper.CelCompileError as exc:
            raise Failed("compile", exc.message.splitlines()[0]) from None

    def bind(_program: Any, values: Mapping[str, Any]) -> Any:
        return wrapper.prepare_activation(values)

    def run(program: Any, activation: Any) -> Any:
        try:
            return program.evaluate(activation)
        except wrapper.CelEvaluationError as exc:
            raise Failed("eval", exc.message) from None

    return Candidate("trtguard wrapper", "cel-expr-python", "policies.cel", compile_, bind, run)


def import_ms(module: str) -> float:
    """Cold import time of ``module`` in a fresh interpreter (best of three), as a CLI start pays it."""
    best = math.inf
    for _ in range(3):
        report = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", f"import {module}"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parent.parent,
        ).stderr.splitlines()
        best = min(best, int(report[-1].split("|")[1]) / 1000)  # cumulative µs of the last (top) import
    return best


def load_candidates(celpy_runner: str) -> tuple[list[Candidate], list[str]]:
    # celpy keeps one class-level parser whose tree class belongs to the first runner created, so its
    # two runners cannot share a process (the second crashes with AttributeError): one per run.
    factories: dict[str, Callable[[], Candidate]] = {
        "cel-expr-python": _cel_expr_python,
        "common-expression-language": _common_expression_language,
        "cel-python": lambda: _celpy(celpy_runner),
        "celparser": _celparser,
        "trtguard wrapper": _trtguard,
    }
    found: list[Candidate] = []
    missing: list[str] = []
    for name, factory in factories.items():
        try:
            candidate = factory()
        except ImportError as exc:
            missing.append(f"{name} ({exc})")
            continue
        if name == "common-expression-language" and not hasattr(sys.modules["cel"], "compile"):
            missing.append(f"{name} (module `cel` belongs to another distribution)")
            continue
        found.append(candidate)
    return found, missing


# --------------------------------------------------------------------------------------------------
# Correctness: expected results per the CEL language definition (cel-spec doc/langdef.md and the
# conformance suite in tests/simple/testdata), current edition: heterogeneous numeric equality and
# ordering, errors (not wrap-around) on overflow, commutative && and || that absorb errors.

M: dict[str, Any] = {
    "a": {"b": 1},
    "n": None,
    "s": "prod-eu",
    "i": 1,
    "f": 0.5,
    "l": [1, 2, 3],
    "ts": "2026-01-01T00:00:00Z",
}

UTC = dt.UTC
CASES: list[tuple[str, str, Any]] = [
    # int / uint / double arithmetic
    ("arith", "1 + 2 * 3", 7),
    ("arith", "-7 / 2", -3),
    ("arith", "-7 % 3", -1),
    ("arith", "2.5 * 2.0", 5.0),
    ("arith", "m.f * 2.0", 1.0),
    ("arith", "1.0 / 0.0", math.inf),
    ("overflow", "9223372036854775807 + 1", ERROR),
    ("overflow", "-9223372036854775808 - 1", ERROR),
    ("overflow", "9223372036854775807 * 2", ERROR),
    ("overflow", "18446744073709551615u + 1u", ERROR),
    ("overflow", "0u - 1u", ERROR),
    ("div by zero", "1 / 0", ERROR),
    ("div by zero", "1 % 0", ERROR),
    ("no coercion", "1 + 1u", ERROR),
    ("no coercion", "1 + 2.5", ERROR),
    # comparisons, heterogeneous numbers, null
    ("compare", "1 < 1.5", True),
    ("compare", "m.i < 1.5", True),
    ("compare", "dyn(1) == 1.0", True),
    ("compare", "dyn('a') == 1", False),
    ("null", "null == null", True),
    ("null", "m.n == null", True),
    ("null", "m.s != null", True),
    # maps: has(), missing keys, in
    ("has", "has(m.a.b)", True),
    ("has", "has(m.a.c)", False),
    ("has", "has(m.missing.b)", ERROR),
    ("missing key", "m.missing", ERROR),
    ("missing key", "m.l[5]", ERROR),
    ("index", "m.a['b']", 1),
    ("in", "2 in m.l", True),
    ("in", "'b' in m.a", True),
    ("in", "'z' in m.a", False),
    # strings
    ("string", "m.s.startsWith('prod')", True),
    ("string", "m.s.endsWith('-eu')", True),
    ("string", "m.s.contains('d-e')", True),
    ("string", "m.s.matches('^prod-[a-z]+$')", True),
    ("string", "'aa'.matches('(a)\\\\1')", ERROR),  # RE2 has no back-references
    ("string", "size('héllo')", 5),
    ("string", "size(m.l) + size(m.a)", 4),
    # macros
    ("macro", "m.l.all(x, x > 0)", True),
    ("macro", "m.l.exists(x, x > 2)", True),
    ("macro", "m.l.exists_one(x, x > 1)", False),
    ("macro", "m.l.map(x, x * 2)", [2, 4, 6]),
    ("macro", "m.l.filter(x, x % 2 == 1)", [1, 3]),
    ("macro", "m.a.all(k, k == 'b')", True),
    ("macro", "[0, 1].exists(x, 1 / x > 0)", True),
    ("macro", "[0, 1].all(x, 1 / x > 0)", ERROR),
    # ternary and logic with errors
    ("ternary", "m.i == 1 ? 'one' : 'other'", "one"),
    ("ternary", "true ? 1 : 1 / 0", 1),
    ("short-circuit", "false && (1 / 0 == 1)", False),
    ("short-circuit", "(1 / 0 == 1) && false", False),
    ("short-circuit", "true || (1 / 0 == 1)", True),
    ("short-circuit", "(1 / 0 == 1) || true", True),
    # timestamps and durations
    (
        "time",
        "timestamp('2026-01-01T00:00:00Z') + duration('1h')",
        dt.datetime(2026, 1, 1, 1, tzinfo=UTC),
    ),
    ("time", "timestamp(m.ts) == timestamp('2026-01-01T01:00:00+01:00')", True),
    ("time", "timestamp(m.ts) - timestamp('2025-12-31T00:00:00Z') == duration('24h')", True),
    ("time", "duration('90m') > duration('1h')", True),
    ("time", "timestamp('2026-13-01T00:00:00Z')", ERROR),
    # conversions and types
    ("convert", "int('42') + 1", 43),
    ("convert", "string(m.i) + 'x'", "1x"),
    ("convert", "uint(-1)", ERROR),
    ("convert", "int(1e20)", ERROR),
    ("convert", "type(m.i) == int", True),
    ("undeclared", "undeclared.field == 1", ERROR),
]


def same(got: Any, expected: Any) -> bool:
    """Equality that tells bool from int and int from float, recursively."""
    if type(expected) is not type(got) and not (
        isinstance(expected, dt.datetime) and isinstance(got, dt.datetime)
    ):
        return False
    if isinstance(expected, list):
        return len(got) == len(expected) and all(same(g, e) for g, e in zip(got, expected, strict=True))
    if isinstance(expected, dict):
        return got.keys() == expected.keys() and all(same(got[k], expected[k]) for k in expected)
    return bool(got == expected)


def outcome(candidate: Candidate, source: str) -> tuple[bool, str, bool]:
    """(passed, what happened, error was typed)."""
    expected = next(e for _, s, e in CASES if s == source)
    try:
        program = candidate.compile(source, ["m"])
        got = candidate.run(program, candidate.bind(program, {"m": M}))
    except Failed as failure:
        return expected is ERROR, f"{failure.stage} error", failure.typed
    except Exception as exc:  # a crash in the candidate is a result too
        return expected is ERROR, f"crash {type(exc).__name__}", False
    if expected is ERROR:
        return False, f"= {got!r}"[:40], True
    return same(got, expected), f"= {got!r}"[:40], True


def correctness(candidates: list[Candidate]) -> None:
    print("\n## Correctness (expected per the CEL spec; ✓ pass, ✗ fail with what the library did)\n")
    header = "| # | area | expression | expected | " + " | ".join(c.name for c in candidates) + " |"
    print(header)
    print("|" + "---|" * (4 + len(candidates)))
    totals = dict.fromkeys((c.name for c in candidates), 0)
    untyped = dict.fromkeys((c.name for c in candidates), 0)
    for number, (area, source, expected) in enumerate(CASES, 1):
        cells = []
        for candidate in candidates:
            passed, what, typed = outcome(candidate, source)
            totals[candidate.name] += passed
            untyped[candidate.name] += not typed
            cells.append("✓" if passed else f"✗ {what}")
        shown = "error" if expected is ERROR else repr(expected)
        escaped = source.replace("|", "\\|")  # a bare | ends a Markdown table cell, even in code
        print(f"| {number} | {area} | `{escaped}` | {shown} | " + " | ".join(cells) + " |")
    print()
    for candidate in candidates:
        print(
            f"{candidate.name}: {totals[candidate.name]}/{len(CASES)} pass"
            f" ({untyped[candidate.name]} untyped Python exceptions leaked)"
        )


# --------------------------------------------------------------------------------------------------
# Speed: five policy expressions over an engine-build manifest and a Pod with three containers.


DATA = Path(__file__).resolve().parent.parent / "tests" / "data"


def manifest_values() -> dict[str, Any]:
    """An engine build manifest as the evaluator hands it in: snake_case JSON, RFC 3339 time."""
    return dict(json.loads((DATA / "400-cel-engine-manifest.json").read_text(encoding="utf-8")))


def workload_values() -> dict[str, Any]:
    """A Pod with three containers (server, metrics sidecar, log shipper) as the API server sends it."""
    return dict(json.loads((DATA / "401-cel-pod-three-containers.json").read_text(encoding="utf-8")))


GIB4 = 4 * 1024 * 1024 * 1024
Values = Mapping[str, Any]
#: the five policy expressions, each with the same check as a plain Python function (the baseline)
EXPRESSIONS: list[tuple[str, Callable[[Values], bool]]] = [
    (
        "manifest.builder_config.max_workspace_size <= 4 * 1024 * 1024 * 1024",
        lambda v: v["manifest"]["builder_config"]["max_workspace_size"] <= GIB4,
    ),
    (
        'manifest.accuracy.exists(m, m.metric == "top1_acc" && m.value >= 0.75)',
        lambda v: any(a["metric"] == "top1_acc" and a["value"] >= 0.75 for a in v["manifest"]["accuracy"]),
    ),
    (
        "size(manifest.builder_config.optimization_profiles) <= 4",
        lambda v: len(v["manifest"]["builder_config"]["optimization_profiles"]) <= 4,
    ),
    (
        'workload.metadata.namespace.startsWith("prod") && has(workload.metadata.labels.team)',
        lambda v: (
            v["workload"]["metadata"]["namespace"].startswith("prod")
            and "team" in v["workload"]["metadata"]["labels"]
        ),
    ),
    (
        'manifest.builder_config.plugins.all(p, p.library_sha256 != "")',
        lambda v: all(p["library_sha256"] != "" for p in v["manifest"]["builder_config"]["plugins"]),
    ),
]


def timed(function: Callable[[], Any], iterations: int) -> list[float]:
    """Per-call wall time in microseconds, after a short warm-up."""
    for _ in range(min(50, iterations)):
        function()
    samples = []
    clock = time.perf_counter_ns
    for _ in range(iterations):
        start = clock()
        function()
        samples.append((clock() - start) / 1000)
    return samples


def p99(samples: list[float]) -> float:
    return sorted(samples)[min(len(samples) - 1, math.ceil(0.99 * len(samples)) - 1)]


def cell(samples: list[float]) -> str:
    return f"{statistics.median(samples):.2f} / {p99(samples):.2f}"


def speed_row(candidate: Candidate, values: Values, iterations: int) -> str:
    """One table row: compile median, then median / p99 of bind, each eval, and a whole workload."""
    names = list(values)
    try:
        programs = [candidate.compile(source, names) for source, _ in EXPRESSIONS]
    except Failed as failure:
        return f"| {candidate.name} | {failure} |"
    bound = candidate.bind(programs[0], values)
    for (source, check), program in zip(EXPRESSIONS, programs, strict=True):
        got = candidate.run(program, bound)
        if got is not check(values):
            return f"| {candidate.name} | wrong result {got!r} for `{source}` |"
    compile_times = [
        statistics.median(
            timed(functools.partial(candidate.compile, source, names), max(20, iterations // 20))
        )
        for source, _ in EXPRESSIONS
    ]
    binds = timed(functools.partial(candidate.bind, programs[0], values), iterations)
    evals = [timed(functools.partial(candidate.run, program, bound), iterations) for program in programs]

    def per_workload() -> None:
        activation = candidate.bind(programs[0], values)
        for program in programs:
            candidate.run(program, activation)

    whole = timed(per_workload, iterations)
    return (
        f"| {candidate.name} | {statistics.median(compile_times):.0f} | {cell(binds)}"
        f" | {' | '.join(cell(samples) for samples in evals)} | {cell(whole)} |"
    )


def speed(candidates: list[Candidate], iterations: int) -> None:
    values = {"manifest": manifest_values(), "workload": workload_values()}
    print(f"\n## Speed (µs; median / p99 over {iterations} runs; Python {sys.version.split()[0]})\n")
    print(
        "`bind` turns the two maps into what the library evaluates against; `eval` runs one expression on"
        " a bound activation (for cel-expr-python, after its first use has converted the data); `workload`"
        " = bind + the five evals, what the evaluator pays per workload. Compile is the median over the"
        " five expressions.\n"
    )
    print("| candidate | compile | bind | " + " | ".join(f"eval #{i}" for i in range(1, 6)) + " | workload |")
    print("|---|---|---|" + "---|" * 6)
    checks = [check for _, check in EXPRESSIONS]
    base = [timed(functools.partial(check, values), iterations) for check in checks]
    whole = timed(lambda: [check(values) for check in checks], iterations)
    print(f"| Python function (baseline) | - | - | {' | '.join(cell(s) for s in base)} | {cell(whole)} |")
    for candidate in candidates:
        print(speed_row(candidate, values, iterations))


# --------------------------------------------------------------------------------------------------
# Bounds: the worst cases the trtguard wrapper's default limits still allow, each timed once or twice.


def bounds() -> None:
    from policies import cel as wrapper  # noqa: PLC0415 - only this section needs it

    limits = wrapper.CelLimits()
    # 99 * 99 + 99 iterations stay within cel-cpp's budget of 10,000
    items = list(range(99))
    longest = "a" * limits.max_string_length
    group = "(" + " + ".join(["x * y"] * 20) + " >= 0)"
    cases: list[tuple[str, str, dict[str, Any]]] = [
        ("budget, small body", "w.l.all(x, w.l.all(y, x + y >= 0))", {"l": items}),
        ("budget, 330-node body", f"w.l.all(x, w.l.all(y, {' && '.join([group] * 4)}))", {"l": items}),
        (
            "budget, contains() on the longest string",
            'w.l.all(x, w.l.all(y, !w.s.contains(string(x) + "b" + string(y))))',
            {"l": items, "s": longest},
        ),
        (
            "budget, matches() with a pattern built per iteration",
            "w.l.all(x, w.l.all(y, !w.s.matches('b' + string(y))))",
            {"l": items, "s": longest},
        ),
        (
            # 31 * 31 iterations only: the full budget would allocate 10,000 * 2 * max_string_length
            "1/10 of the budget, concatenating the longest string",
            "w.l.map(x, w.l.map(y, w.s + w.s)).size() > 0",
            {"l": items[:31], "s": longest},
        ),
        (
            "budget exceeded (100 * 100)",
            "w.l.all(x, w.l.all(y, x + y >= 0))",
            {"l": list(range(100))},
        ),
    ]
    print("\n## Worst cases within the default limits (trtguard wrapper; ms, best of 2)\n")
    print(f"Limits: {limits}\n")
    print("| case | expression | ms | result |")
    print("|---|---|---|---|")
    for label, source, data in cases:
        program = wrapper.compile_expression(source, variables=["w"])
        activation = {"w": data}
        best, result = math.inf, ""
        for _ in range(2):
            start = time.perf_counter()
            try:
                result = repr(program.evaluate(activation))
            except wrapper.CelEvaluationError as exc:
                result = "error: " + exc.message.splitlines()[0]
            best = min(best, time.perf_counter() - start)
        shown = source if len(source) <= 70 else source[:67] + "..."
        print(f"| {label} | `{shown}` | {best * 1000:.1f} | {result[:60]} |")
    biggest = {"w": {f"k{i}": list(range(19)) for i in range(limits.max_values // 20 - 1)}}
    start = time.perf_counter()
    wrapper.compile_expression("size(w) > 0", variables=["w"]).evaluate(biggest)
    elapsed = (time.perf_counter() - start) * 1000
    print(f"| guard + conversion of {limits.max_values} values | `size(w) > 0` | {elapsed:.1f} | True |")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000, help="timed runs per measurement")
    parser.add_argument("--only", choices=["correctness", "speed", "bounds"], help="run one table only")
    parser.add_argument(
        "--celpy-runner", choices=["interpreted", "compiled"], default="interpreted", help="cel-python runner"
    )
    args = parser.parse_args(argv)

    candidates, missing = load_candidates(args.celpy_runner)
    print("## Candidates\n")
    for candidate in candidates:
        print(
            f"- {candidate.name}: {candidate.distribution} {candidate.version},"
            f" cold import of `{candidate.module}` {import_ms(candidate.module):.0f} ms"
        )
    for name in missing:
        print(f"- {name}: not installed")
    if args.only in (None, "correctness"):
        correctness(candidates)
    if args.only in (None, "speed"):
        speed(candidates, args.iterations)
    if args.only in (None, "bounds"):
        bounds()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

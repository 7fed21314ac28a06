"""policies.cel._compiler: compile errors with positions, declared variables, static limits."""

from __future__ import annotations

import pytest

from policies.cel import CelCompileError, CelLimits, compile_expression
from policies.cel._compiler import _check_shape
from tests.policies.cel.conftest import compile_error, program
from verifier.base._errors import InputError


def test_syntax_error_points_at_file_line_column() -> None:
    error = compile_error("manifest.audit_id ==", location="policies/prod.yaml:12")
    assert error.location == "policies/prod.yaml:12:21"
    assert (error.line, error.column) == (1, 21)
    assert error.expression == "manifest.audit_id =="
    assert "Syntax error" in error.message
    assert error.message.splitlines()[1:] == ["    manifest.audit_id ==", " " * 24 + "^"]
    assert error.hint is not None and "syntax" in error.hint
    assert isinstance(error, InputError) and error.exit_code == 2
    assert error.diagnostics().startswith("policies/prod.yaml:12:21: invalid CEL expression: Syntax error")


def test_error_on_a_later_line_of_the_expression_moves_the_file_line() -> None:
    source = 'manifest.audit_id != "" &&\n  wrkload.metadata.namespace == "prod"'
    error = compile_error(source, location="policy.yaml:40 spec.models.rules.expressions[1].cel")
    assert (error.line, error.column) == (2, 3)  # where the unknown name starts
    assert error.location == "policy.yaml:41:3 spec.models.rules.expressions[1].cel"
    assert "    " + source.splitlines()[1] in error.message


def test_location_forms() -> None:
    assert compile_error("manifest +").location == "<cel>:1:11"
    assert compile_error("manifest +", location="policy.yaml").location == "policy.yaml (expression 1:11)"
    assert (
        compile_error("manifest +", location=r"C:\policies\p.yaml:7").location == r"C:\policies\p.yaml:7:11"
    )


def test_columns_count_code_points_not_bytes() -> None:
    error = compile_error("'héllo€' == nosuch")
    assert error.column == 13
    assert error.message.splitlines()[2] == "    " + " " * 12 + "^"


def test_unknown_variable_is_a_compile_error_naming_the_declared_ones() -> None:
    error = compile_error("wrkload.metadata.namespace == 'prod'", location="p.yaml:3")
    assert "unknown name 'wrkload'" in error.message
    assert error.hint == "the variables here are manifest, workload; check the spelling"
    assert error.location == "p.yaml:3:1"


def test_unknown_function_and_several_unknowns_are_all_reported() -> None:
    assert "unknown name 'sha256'" in compile_error("sha256(manifest.audit_id) == ''").message
    error = compile_error("a + b == c")
    assert error.location == "<cel>:1:1"
    assert "unknown name 'a'" in error.message
    assert "also 1:5: unknown name 'b'" in error.message and "also 1:10: unknown name 'c'" in error.message


def test_only_the_declared_variables_exist() -> None:
    compile_expression("manifest.audit_id != ''", variables=["manifest"])
    error = compile_error("workload.kind == 'Pod'", variables=["manifest"])
    assert "unknown name 'workload'" in error.message


def test_type_errors_the_checker_can_see_are_compile_errors() -> None:
    error = compile_error("manifest.audit_id + 1 == 'x' + 1")
    assert "no matching overload" in error.message
    assert error.hint is not None and "converts no types" in error.hint


def test_expect_bool_rejects_expressions_of_another_known_type() -> None:
    error = compile_error("size(manifest.accuracy) + 1", expect_bool=True, location="p.yaml:9")
    assert "yields int" in error.message and error.location == "p.yaml:9:1"
    program("manifest.version_compatible", expect_bool=True)  # dyn: checked when evaluated
    program("size(manifest.accuracy) + 1")  # without expect_bool any type is fine


def test_a_lone_surrogate_in_the_source_is_a_compile_error() -> None:
    error = compile_error('manifest.audit_id == "a\ud800"', location="p.json:3")
    assert "not valid Unicode" in error.message and error.location == "p.json:3:24"


def test_variable_names_must_be_identifiers() -> None:
    with pytest.raises(ValueError, match="cannot be a CEL variable name"):
        compile_expression("true", variables=["build-manifest"])


def test_source_length_limit() -> None:
    error = compile_error("manifest.audit_id == 'x'", limits=CelLimits(max_length=10), location="p.yaml:2")
    assert "24 characters long; the limit is 10" in error.message and error.location == "p.yaml:2:1"
    # a long allow-list in CEL is the usual cause: the hint names the built-in rules that hold any number
    assert error.hint is not None and "`allowFrom` file" in error.hint


def test_node_limit() -> None:
    # 4 nodes per comparison (==, select, identifier, constant) and 9 for the ||
    source = " || ".join(f"manifest.audit_id == '{i}'" for i in range(10))
    program(source, limits=CelLimits(max_nodes=49))
    assert "more than 48 nodes" in compile_error(source, limits=CelLimits(max_nodes=48)).message


def test_depth_limit() -> None:
    source = "manifest" + ".a" * 20 + " == 1"
    program(source, limits=CelLimits(max_depth=23))
    assert "deeper than 20 levels" in compile_error(source, limits=CelLimits(max_depth=20)).message


def test_the_parser_recursion_limit_is_reported_at_the_start() -> None:
    error = compile_error(" + ".join(["1"] * 60) + " == 0", location="p.yaml:4")
    assert error.location == "p.yaml:4:1"
    assert "recursion depth" in error.message and error.message.count("recursion depth") == 1
    assert error.hint is not None and "parentheses" in error.hint


def test_the_parser_nesting_limit_is_reported_without_status_codes() -> None:
    error = compile_error("(" * 40 + "manifest.audit_id" + ")" * 40 + " == ''")
    assert error.message.startswith(
        "invalid CEL expression: Expression recursion limit exceeded. limit: 32\n"
    )
    assert error.hint is not None and "parentheses" in error.hint


def test_two_nested_comprehensions_are_allowed() -> None:
    source = "workload.spec.containers.all(c, c.ports.all(p, p.containerPort > 1024))"
    assert program(source).evaluate_bool(
        {"workload": {"spec": {"containers": [{"ports": [{"containerPort": 8000}]}]}}}
    )


def test_a_third_nested_comprehension_is_rejected_where_it_starts() -> None:
    source = "workload.spec.containers.all(c,\n  c.ports.all(p,\n    c.env.exists(e, e.name == p.name)))"
    error = compile_error(source, location="p.yaml:30")
    assert "more than 2 comprehensions" in error.message
    assert (error.line, error.column) == (3, 17) and error.location == "p.yaml:32:17"


def test_chained_macros_count_as_nested() -> None:
    # the range of a comprehension is evaluated inside it, as cel-go's nesting validator counts
    chained = "manifest.accuracy.filter(m, m.value > 0.5).map(m, m.metric).exists(x, x == 'top1_acc')"
    assert "more than 2 comprehensions" in compile_error(chained).message
    program(chained, limits=CelLimits(max_comprehension_nesting=3))


def test_an_ast_that_cannot_be_read_is_refused_not_skipped() -> None:
    with pytest.raises(CelCompileError, match="cannot measure the expression") as caught:
        _check_shape(b"\xff\xff\xff", "manifest.audit_id", "p.yaml:8", CelLimits())
    assert caught.value.location == "p.yaml:8:1"


def test_comprehensions_over_an_empty_list_literal_cost_nothing() -> None:
    assert program("[].all(x, [].all(y, [].all(z, true)))").evaluate({}) is True

"""Syntax checks: ERROR/MISSING nodes, candidate coordinates, cut-off candidates, prompts that do not parse."""

import pytest

from engine.types import CUT_REASONS
from static_eval import AnalyzerSettings, StaticAnalyzer

PROMPT = 'def add(a, b):\n    """Add two numbers."""\n'


@pytest.fixture(scope="module")
def analyzer():
    with StaticAnalyzer(AnalyzerSettings(lint=False)) as built:  # syntax only: no worker needed
        yield built


def one(analyzer, completion, reason=None, prompt=PROMPT):
    return analyzer.analyze(prompt, [completion], [reason in CUT_REASONS])[0]


def test_valid_completion_has_no_findings(analyzer):
    report = one(analyzer, "    return a + b\n", "stop")
    assert (report.parses, report.complete, report.prompt_parses) == (True, True, True)
    assert report.kinds == []


def test_error_node_is_a_syntax_error_in_candidate_coordinates(analyzer):
    report = one(analyzer, "    x = = a\n    return x\n")
    assert not report.parses
    assert "syntax-error" in report.kinds
    finding = report.errors[0]
    assert finding.line == 1 and finding.severity == "error"


def test_error_on_a_later_line_is_placed_there(analyzer):
    report = one(analyzer, "    x = a\n    y = b\n    return x +/ y\n")
    lines = {f.line for f in report.findings if f.kind == "syntax-error"}
    assert lines == {3}


def test_missing_node_is_a_syntax_error(analyzer):
    report = one(analyzer, "    return (a + b\n")
    assert not report.parses and "syntax-error" in report.kinds


def test_unfinished_statement_is_not_complete(analyzer):
    report = one(analyzer, "    return a +", "stop")
    assert not report.complete
    assert report.kinds.count("truncated") == 1


@pytest.mark.parametrize("reason", ["length", "budget", "interrupted"])
def test_cut_off_mid_line_that_parses_is_not_complete(analyzer, reason):
    report = one(analyzer, "    return a", reason)
    assert report.parses and not report.complete
    assert "truncated" in report.kinds


def test_cut_off_inside_the_function_body_is_not_complete(analyzer):
    report = one(analyzer, "    total = a\n    total += b\n", "length")
    assert report.parses and not report.complete


def test_cut_off_between_top_level_statements_is_complete(analyzer):
    report = one(analyzer, "    return a + b\n\n\nVALUE = add(1, 2)\n", "length")
    assert report.complete and "truncated" not in report.kinds


def test_same_text_ended_normally_is_complete(analyzer):
    assert one(analyzer, "    return a", "stop").complete


def test_prompt_that_does_not_parse_is_not_blamed_on_the_candidate(analyzer):
    report = one(analyzer, "    return a\n", prompt="def add(a, b:\n    '''Broken.'''\n")
    assert not report.prompt_parses
    assert "syntax-error" not in report.kinds


def test_prompt_ending_in_an_open_header_counts_as_parsing(analyzer):
    report = one(analyzer, "    return a + b\n", prompt="def add(a, b):\n")
    assert report.prompt_parses and report.parses and report.kinds == []


def test_completion_continuing_a_prompt_line_maps_columns(analyzer):
    report = one(analyzer, "a +/ b\n", prompt='def add(a, b):\n    """Add."""\n    return ')
    finding = next(f for f in report.findings if f.kind == "syntax-error")
    assert finding.line == 1 and finding.column < len("a +/ b")


def test_at_most_max_syntax_findings(analyzer):
    completion = "".join(f"    x{i} = )\n" for i in range(40))
    report = one(analyzer, completion)
    assert 1 <= report.kinds.count("syntax-error") <= analyzer.settings.max_syntax_findings
